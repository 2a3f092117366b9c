"""ingest: the body parsers the daemon runs on every request, on one core.

- criterion: `benches/ingest.rs`, `parse_body` on a 10 000-sample body (LIBSVM, JSON lines, JSON
  array), criterion's estimate (ns per body);
- ingest_cpu: `benches/harness/ingest_cpu.rs`, thread CPU per sample of the same parser over the body cut
  into the chunks hyper reads, best and mean of many repetitions (robust to other load).
"""
import re

from common import Bench, Command, Needs, Suite, criterion


def needs(ctx):
    return Needs(examples=["ingest_cpu"], benches=["ingest"])


def criterion_cmd(ctx, build):
    quick = ["--warm-up-time", "0.2", "--measurement-time", "0.5"] if ctx.quick else []
    return Command([build.bench("ingest"), "--bench", *quick],
                   env={"CRITERION_HOME": ctx.dir("criterion", build.key)})


def cpu_cmd(ctx, build):
    return Command([build.example("ingest_cpu"), "20" if ctx.quick else "200"])


def parse_cpu(stdout, _stderr):
    """`  libsvm: best   123.4 ns/sample (...), mean   130.2 ns/sample, ...` per format."""
    out = {}
    for m in re.finditer(r"^\s*(\S+): best\s+(\S+) ns/sample.*?mean\s+(\S+) ns/sample", stdout, re.M):
        out[f"{m.group(1)}/best_ns_per_sample"] = float(m.group(2))
        out[f"{m.group(1)}/mean_ns_per_sample"] = float(m.group(3))
    return out


def benches(ctx):
    return [
        Bench("criterion", "benches/ingest.rs: parse_body on a 10 000-sample body per format (ns)",
              criterion_cmd, parse=criterion, runs=(1, 3)),
        Bench("ingest_cpu", "thread CPU per sample of the body parser, best of 20 (quick) or 200 repetitions",
              cpu_cmd, parse=parse_cpu, runs=(1, 3)),
    ]


SUITE = Suite("ingest", "body parsers: parse_body per format (criterion) and thread CPU per sample",
              needs, benches)

"""daemon: `thresher serve` over loopback HTTP under a sustained stream, and Vowpal Wabbit's daemon.

- loadgen/FORMAT-BATCH: `benches/harness/loadgen.rs` (the current tree's harness, driving each build's
  daemon with --daemon) streams d = 2^20, 40 nonzeros per sample, LIBSVM or JSON lines in 1 000 or
  10 000-sample bodies for --duration seconds: samples/s accepted (all and the second half), GET
  /v1/model p50/p99 under load, staleness, the daemon's CPU and RSS, held-out accuracy;
- learner/NAME: loadgen/libsvm-10000 with each learner in turn (`sdiht`, `mirror`, `smidas`, `subset`,
  and `auto`: sdiht with `lambda = "auto"`): how many samples/s each absorbs and its 503s
  (docs/benchmarks/learners.md, "Absorbing at the rate of the intake"); 120 s at most per run (a learner
  that publishes no model after the warm-up batch keeps loadgen waiting);
- rss/capacity=N: the daemon's RSS sampled every 0.25 s while loadgen streams max(4 N, MIN) samples into
  a window of N (quick: 2M samples, one window of 10 000): RSS at half and at the end of the sending time (flat: ratio 1), the plateau (median of
  the second half), the peak;
- dictionary/full: `benches/harness/dictionary_fill.py` registers 2^20 names of 256 bytes (quick: 2^16)
  through POST /v1/samples: RSS full, the peak while the final checkpoint is written, the checkpoint's
  size (docs/benchmarks/dictionary.md); dictionary/hashed: the same names into a daemon with
  `ingest.feature_names = "hashed"`, `hash_bits = 20`;
- vw: Vowpal Wabbit's daemon over one pass of the same stream (peer; `benches/peers/vw_daemon.py`, in a
  loopback-only network namespace: needs root for `unshare -n`, and `vowpalwabbit` from PyPI).

Run as a script (`python3 benches/suites/daemon.py rss ...`) it is the RSS sampler the rss benchmarks
call.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

from common import ROOT, Bench, Command, Metric, Needs, Suite, key_values, venv

LOADGEN = [Metric("samples_per_s", "samples/s", "higher"), Metric("sustained_samples_per_s", "samples/s", "higher"),
           Metric("model_get_p50_ms", "ms"), Metric("model_get_p99_ms", "ms"), Metric("staleness_p50_ms", "ms"),
           Metric("daemon_cpu_s", "s"), Metric("rss_peak_mib", "MiB"), Metric("heldout_accuracy", "", "higher")]
RSS = [Metric("rss_half_mib", "MiB"), Metric("rss_end_mib", "MiB"), Metric("flatness", "end/half"),
       Metric("plateau_mib", "MiB"), Metric("rss_peak_mib", "MiB"), Metric("samples_per_s", "samples/s", "higher")]
DICTIONARY = [Metric("rss_full_mib", "MiB"), Metric("rss_peak_mib", "MiB"), Metric("checkpoint_bytes", "B")]
STREAM = os.path.join(ROOT, "data", "stream")


def needs(ctx):
    return Needs(examples=["loadgen"])


def prepare(ctx):
    if not os.path.exists(os.path.join(STREAM, "train.svm")):
        ctx.sh([ctx.current.example("loadgen"), "--dump", STREAM], "dump the loadgen stream for the peers")
    ctx.vw_python = None
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode:
        ctx.skip("vw: `unshare -n` is not permitted here (needs root): Vowpal Wabbit's daemon not run")
        return
    py, missing = venv("bench-venv", ["vowpalwabbit"])
    if missing:
        ctx.skip("vw: could not install vowpalwabbit into bench-venv: Vowpal Wabbit's daemon not run")
        return
    ctx.vw_python = py


def loadgen(fmt, batch):
    def command(ctx, build):
        seconds = 3 if ctx.quick else 10
        return Command([ctx.current.example("loadgen"), "--daemon", build.thresher(), "--format", fmt,
                        "--batch", batch, "--duration", seconds])
    return command


LEARNERS = {"sdiht": "THRESHER_LEARNER_SOLVER=sdiht", "mirror": "THRESHER_LEARNER_SOLVER=mirror",
            "smidas": "THRESHER_LEARNER_SOLVER=smidas", "subset": "THRESHER_LEARNER_SOLVER=subset",
            "auto": "THRESHER_LEARNER_LAMBDA=auto"}


def learner(name):
    def command(ctx, build):
        seconds = 3 if ctx.quick else 10
        return Command([ctx.current.example("loadgen"), "--daemon", build.thresher(), "--format", "libsvm",
                        "--batch", 10_000, "--duration", seconds, "--daemon-env", LEARNERS[name]], timeout=120)
    return command


def rss(capacity, samples):
    def command(ctx, build):
        return Command([sys.executable, __file__, "rss", "--loadgen", ctx.current.example("loadgen"),
                        "--daemon", build.thresher(), "--capacity", capacity, "--samples", samples,
                        "--series", ctx.path("series", f"rss_{capacity}_{build.key}.txt")])
    return command


def dictionary(ctx, build, mode="dictionary"):
    names = 1 << 16 if ctx.quick else 1 << 20
    script = os.path.join(ROOT, "benches", "harness", "dictionary_fill.py")
    return Command([sys.executable, script, build.thresher(), names, 256,
                    ctx.path(mode.replace(":", "-"), build.key), mode])


def hashed(ctx, build):
    return dictionary(ctx, build, "hashed:20")


def vw(ctx, build):
    if not getattr(ctx, "vw_python", None):
        return None
    samples = 100_000 if ctx.quick else 1_000_000
    script = os.path.join(ROOT, "benches", "peers", "vw_daemon.py")
    return Command(["unshare", "-n", "bash", "-c", f'ip link set lo up && exec "$0" "$@"', ctx.vw_python,
                    script, STREAM, samples])


def benches(ctx):
    shapes = [("libsvm", 10_000)] if ctx.quick else [(f, b) for f in ("libsvm", "json") for b in (1000, 10_000)]
    out = [Bench(f"loadgen/{f}-{b}", f"{f} bodies of {b} samples for {3 if ctx.quick else 10} s, GET probe",
                 loadgen(f, b), metrics=LOADGEN, runs=(1, 3)) for f, b in shapes]
    for name in LEARNERS:
        out.append(Bench(f"learner/{name}", f"libsvm bodies of 10000 samples, learner {name}: samples/s absorbed, 503s",
                         learner(name), metrics=LOADGEN + [Metric("http_503", "requests")], runs=(1, 2)))
    capacities = [10_000] if ctx.quick else [10_000, 100_000, 300_000, 1_000_000]
    for cap in capacities:
        samples = 2_000_000 if ctx.quick else max(4 * cap, 6_000_000)
        out.append(Bench(f"rss/capacity={cap}", f"RSS every 0.25 s over {samples} samples into a window of {cap}",
                         rss(cap, samples), metrics=RSS, runs=(1, 1)))
    out.append(Bench("dictionary/full", "a full dictionary of 256-byte names: RSS, peak at the final checkpoint",
                     dictionary, metrics=DICTIONARY, runs=(1, 1)))
    out.append(Bench("dictionary/hashed", "the same names hashed (hash_bits = 20): RSS, peak, checkpoint",
                     hashed, metrics=DICTIONARY, runs=(1, 1)))
    out.append(Bench("vw", "Vowpal Wabbit's daemon, one pass (peer; --l1 0, 1e-8, 1e-7)", vw,
                     parse=lambda o, e: key_values(o, e, ("peer", "l1")), per_build=False, runs=(1, 1)))
    return out


SUITE = Suite("daemon", "thresher serve under HTTP load (loadgen): ingest, GET latency, staleness, RSS; VW's daemon",
              needs, benches, prepare)


def sample_rss(argv):
    """Runs loadgen, samples its daemon's VmRSS every 0.25 s, prints the loadgen line and the RSS figures."""
    p = argparse.ArgumentParser(prog="daemon.py rss")
    for flag in ("--loadgen", "--daemon", "--capacity", "--samples", "--series"):
        p.add_argument(flag, required=True)
    a = p.parse_args(argv)
    loadgen = subprocess.Popen([a.loadgen, "--daemon", a.daemon, "--format", "libsvm", "--batch", "10000",
                                "--samples", a.samples, "--capacity", a.capacity], stdout=subprocess.PIPE, text=True)
    pid = None
    for _ in range(600):  # loadgen serialises its bodies before it starts the daemon
        children = f"/proc/{loadgen.pid}/task/{loadgen.pid}/children"
        try:
            kids = open(children).read().split()
        except OSError:
            kids = []
        if kids:
            pid = kids[0]
            break
        time.sleep(0.1)
    if pid is None:
        sys.exit("the daemon did not start")
    start, series = time.time(), []
    while loadgen.poll() is None:
        try:
            for line in open(f"/proc/{pid}/status"):
                if line.startswith("VmRSS:"):
                    series.append((time.time() - start, int(line.split()[1]) / 1024))
        except OSError:
            break
        time.sleep(0.25)
    out = loadgen.stdout.read()
    loadgen.wait()
    with open(a.series, "w") as f:
        f.writelines(f"{t:.1f} {r:.1f}\n" for t, r in series)
    figures = key_values(out)
    sending = figures.get("seconds", series[-1][0] if series else 0)
    nearest = lambda t: min(series, key=lambda s: abs(s[0] - t))[1]  # noqa: E731
    second_half = [r for t, r in series if sending / 2 <= t <= sending] or [0]
    half, end = nearest(sending / 2), nearest(sending)
    print(out.strip())
    print(f"rss_half_mib={half:.0f} rss_end_mib={end:.0f} flatness={end / half:.3f} "
          f"plateau_mib={statistics.median(second_half):.0f} second_half_min_mib={min(second_half):.0f} "
          f"second_half_max_mib={max(second_half):.0f} rss_samples={len(series)}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["rss"]:
        sample_rss(sys.argv[2:])
    else:
        sys.exit("usage: daemon.py rss --loadgen BIN --daemon BIN --capacity N --samples N --series FILE")

"""The benchmark runner's machinery (`benches/run`): builds, commands, alternation, raw results, summary.

A suite (one module beside this file) is a list of benchmarks. A benchmark is one command line per build
(`Bench.command`) whose output `Bench.parse` turns into named figures. The runner runs every benchmark
`runs` times for every build, alternating the builds run by run (A B A B ...), and writes what it ran,
each run's stdout and stderr, `raw.csv` (one row per figure and run) and `summary.txt` (median and range
per build, and the ratio of the medians) to `target/bench/DATE-COMMIT/SUITE/`.

Standard library only: a fresh machine has Python 3, the Rust toolchain and the package registries.
Peers (Vowpal Wabbit, scikit-learn, abess, ...) are installed with pip into a virtualenv (`venv`).
"""
import csv
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGET = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
BENCH_DIR = os.path.join(TARGET, "bench")


def eprint(*args):
    print(*args, file=sys.stderr, flush=True)


def note(msg):
    eprint(f"[{time.strftime('%H:%M:%S')}] {msg}")


def git(*args, cwd=ROOT):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def loadavg():
    try:
        return open("/proc/loadavg").read().split()[0]
    except OSError:
        return "?"


# ------------------------------------------------------------------------------------------ suites


class Metric:
    """A figure a benchmark reports: `key` in `Bench.parse`'s dict; `better` is "lower" or "higher"."""

    def __init__(self, key, unit="", better="lower"):
        self.key, self.unit, self.better = key, unit, better


class Command:
    """One command line. `argv[0]` may be a path; `env` is added to the runner's environment."""

    def __init__(self, argv, env=None, cwd=ROOT, timeout=None):
        self.argv = [str(a) for a in argv]
        self.env = {k: str(v) for k, v in (env or {}).items()}
        self.cwd, self.timeout = cwd, timeout

    def line(self):
        env = " ".join(f"{k}={v}" for k, v in self.env.items())
        return (env + " " if env else "") + " ".join(_quote(a) for a in self.argv)


def _quote(a):
    return a if re.fullmatch(r"[\w@%+=:,./-]+", a) else "'" + a.replace("'", "'\\''") + "'"


class Bench:
    """One benchmark of a suite.

    command(ctx, build) -> Command, or None when `build` cannot run it (say why with ctx.skip).
    parse(stdout, stderr) -> {figure: value}; metrics name the figures the summary shows (all when empty).
    per_build: False for a run that does not depend on the build (a peer): it runs once per round, on the
    current build only. runs: (quick, full) default number of runs per build.
    """

    def __init__(self, name, describe, command, parse=None, metrics=(), per_build=True, runs=(1, 3),
                 timeout=(600, 7200)):
        self.name, self.describe, self.command = name, describe, command
        self.parse = parse or key_values
        self.metrics, self.per_build, self.runs, self.timeout = list(metrics), per_build, runs, timeout


class Needs:
    """What a suite's builds must contain: the `thresher` binary, examples (the harnesses under
    benches/harness, declared as [[example]] targets) and criterion benches, by target name."""

    def __init__(self, examples=(), benches=(), thresher=True):
        self.examples, self.benches, self.thresher = list(examples), list(benches), thresher


class Suite:
    """name, one line of description, needs(ctx) -> Needs, benches(ctx) -> [Bench], an optional
    prepare(ctx) run once before any benchmark (data, peers) and finish(ctx) once after them all."""

    def __init__(self, name, describe, needs, benches, prepare=None, finish=None):
        self.name, self.describe = name, describe
        self.needs, self.benches, self.prepare, self.finish = needs, benches, prepare, finish


# ------------------------------------------------------------------------------------------ parsing


NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


def key_values(stdout, _stderr="", prefix_keys=()):
    """Every `key=number` on stdout. A line that names `prefix_keys` (e.g. format=json) prefixes its
    other keys with those values (`json/samples_per_s`), so rows of one table stay apart."""
    out = {}
    for line in stdout.splitlines():
        pairs = dict(re.findall(r"(\w+)=(\S+)", line))
        prefix = "/".join(pairs[k] for k in prefix_keys if k in pairs)
        for k, v in pairs.items():
            if k in prefix_keys or not re.fullmatch(NUMBER, v):
                continue
            out[f"{prefix}/{k}" if prefix else k] = float(v)
    return out


def markdown_figures(text, key_cols=1):
    """Every Markdown table row of `text`: the first `key_cols` cells name the row, each further cell's
    numbers (outside square brackets) are figures `ROW/COLUMN`, `ROW/COLUMN/2`, ..."""
    out, header = {}, None
    for line in text.splitlines():
        line = line.strip()
        if not (line.startswith("|") and line.endswith("|")):
            header = None
            continue
        cells = [c.strip() for c in line[1:-1].split("|")]
        if header is None:
            header = cells
            continue
        if all(re.fullmatch(r":?-+:?", c) for c in cells):
            continue
        row = "/".join(cells[:key_cols]).replace(" ", "_")
        for col, cell in zip(header[key_cols:], cells[key_cols:]):
            numbers = re.findall(NUMBER, re.sub(r"\[[^]]*\]", "", cell))
            for i, v in enumerate(numbers):
                out[f"{row}/{col.replace(' ', '_')}" + (f"/{i + 1}" if i else "")] = float(v)
    return out


UNITS_NS = {"ps": 1e-3, "ns": 1.0, "µs": 1e3, "us": 1e3, "ms": 1e6, "s": 1e9}


def criterion(stdout, _stderr=""):
    """criterion's `ID time: [low estimate high]` lines: the estimate in ns, per benchmark ID."""
    out, current = {}, None
    for line in stdout.splitlines():
        m = re.match(r"^(\S.*?)\s+time:\s+\[", line)
        if m:
            current = m.group(1).strip()
        elif line and not line[0].isspace() and "time:" not in line:
            current = line.strip()
        t = re.search(r"time:\s+\[(\S+) (\S+) (\S+) (\S+) (\S+) (\S+)\]", line)
        if t and current:
            out[current + " (ns)"] = float(t.group(3)) * UNITS_NS.get(t.group(4), float("nan"))
    return out


# ------------------------------------------------------------------------------------------ builds


class Build:
    """One build measured: the working tree ("HEAD", possibly dirty) or a revision checked out in a git
    worktree under target/bench/rev/. Its executables are copied to target/bench/bin/KEY/, so a later
    cargo build does not replace them mid-run. A revision builds in its own target directory
    (target/bench/rev-target/): sharing target/ with the working tree, cargo took the two trees' thresher
    for one unit (the same name, version and metadata hash), found the other tree's artifact fresh, and an
    A/B measured one build twice."""

    def __init__(self, label, rev, src):
        self.label, self.rev, self.src = label, rev, src
        self.key = "current" if src == ROOT else rev
        self.bin = os.path.join(BENCH_DIR, "bin", self.key)
        self.target = TARGET if self.key == "current" else os.path.join(BENCH_DIR, "rev-target")
        self.missing = set()

    def thresher(self):
        return os.path.join(self.bin, "thresher")

    def example(self, name):
        return os.path.join(self.bin, "examples", name)

    def bench(self, name):
        return os.path.join(self.bin, "benches", name)

    def make(self, needs):
        """cargo build what `needs` names that this revision has; records what it lacks in `missing`."""
        meta = json.loads(subprocess.run(
            ["cargo", "metadata", "--no-deps", "--format-version", "1"], cwd=self.src, check=True,
            capture_output=True, text=True).stdout)
        have = {(k, t["name"]) for p in meta["packages"] for t in p["targets"] for k in t["kind"]}
        examples = [e for e in needs.examples if ("example", e) in have]
        benches = [b for b in needs.benches if ("bench", b) in have]
        self.missing = {f"example {e}" for e in needs.examples if e not in examples} | {
            f"bench {b}" for b in needs.benches if b not in benches}
        env = dict(os.environ, CARGO_TARGET_DIR=self.target)
        os.makedirs(os.path.join(self.bin, "examples"), exist_ok=True)
        os.makedirs(os.path.join(self.bin, "benches"), exist_ok=True)
        cmd = ["cargo", "build", "--release", "--bin", "thresher"] + [a for e in examples for a in ("--example", e)]
        note(f"building {self.label} ({self.rev}): {' '.join(cmd[2:])}")
        subprocess.run(cmd, cwd=self.src, env=env, check=True)
        shutil.copy2(os.path.join(self.target, "release", "thresher"), self.thresher())
        for e in examples:
            shutil.copy2(os.path.join(self.target, "release", "examples", e), self.example(e))
        if benches:
            cmd = ["cargo", "bench", "--no-run", "--message-format=json"] + [a for b in benches for a in ("--bench", b)]
            note(f"building {self.label} ({self.rev}): {' '.join(cmd[1:])}")
            out = subprocess.run(cmd, cwd=self.src, env=env, check=True, capture_output=True, text=True).stdout
            for line in out.splitlines():
                msg = json.loads(line)
                if msg.get("reason") == "compiler-artifact" and "bench" in msg["target"]["kind"] \
                        and msg.get("executable"):
                    shutil.copy2(msg["executable"], self.bench(msg["target"]["name"]))
        for m in sorted(self.missing):
            note(f"{self.label} ({self.rev}) has no {m}: the benchmarks that run it are skipped for it")


def against_build(rev):
    """`rev` checked out (detached) in a git worktree under target/bench/rev/, reused when present."""
    sha = git("rev-parse", "--short", rev + "^{commit}")
    path = os.path.join(BENCH_DIR, "rev", sha)
    if not os.path.isdir(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        git("worktree", "add", "--detach", path, sha)
    return Build(rev, sha, path)


def current_build():
    sha = git("rev-parse", "--short", "HEAD")
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=ROOT).returncode != 0
    return Build("HEAD", sha + ("-dirty" if dirty else ""), ROOT)


# ------------------------------------------------------------------------------------------ peers


def venv(name, packages, python="python3", probe=None):
    """A virtualenv `name` (under the project root, git-ignored) with each of `packages` pip-installed
    if missing. Returns (its python or None, [packages it could not install]). `probe` maps a package
    to the module that proves it is installed (default: the package name)."""
    path = os.path.join(ROOT, name)
    py = os.path.join(path, "bin", "python")
    if not os.path.exists(py):
        r = subprocess.run([python, "-m", "venv", path], capture_output=True, text=True)
        if r.returncode != 0:
            note(f"cannot create {name} with {python}: {r.stderr.strip()}")
            return None, list(packages)
    missing = []
    for pkg in packages:
        module = (probe or {}).get(pkg, re.split(r"[<>=]", pkg)[0].replace("-", "_"))
        if subprocess.run([py, "-c", f"import {module}"], capture_output=True).returncode == 0:
            continue
        note(f"installing {pkg} into {name}")
        r = subprocess.run([py, "-m", "pip", "install", "-q", pkg], capture_output=True, text=True)
        if r.returncode != 0:
            missing.append(pkg)
            tail = (r.stderr.strip().splitlines() or ["?"])[-1]
            note(f"could not install {pkg} into {name}: {tail}")
    return py, missing


# ------------------------------------------------------------------------------------------ context


class Context:
    """What a suite sees: the options, the builds (the current one last), the results folder."""

    def __init__(self, suite, quick, builds, out, options):
        self.suite, self.quick, self.builds, self.out = suite, quick, builds, out
        self.options = options
        self.current = builds[-1]
        self.notes = []

    def skip(self, what):
        """Records (and prints) something the suite could not do, for the summary."""
        self.notes.append(what)
        note(what)

    def dir(self, *parts):
        p = os.path.join(self.out, *parts)
        os.makedirs(p, exist_ok=True)
        return p

    def path(self, *parts):
        p = os.path.join(self.out, *parts)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        return p

    def sh(self, argv, what, env=None, cwd=ROOT, check=True):
        """Runs a preparation step (not measured), its output into prepare/, and records it."""
        cmd = Command(argv, env=env, cwd=cwd)
        slug = re.sub(r"\W+", "_", what).strip("_")[:40]
        with open(self.path("commands.txt"), "a") as f:
            f.write(f"# prepare: {what}\n{cmd.line()}\n")
        note(f"{self.suite}: {what}")
        with open(self.path("prepare", slug + ".stdout"), "w") as so, \
                open(self.path("prepare", slug + ".stderr"), "w") as se:
            r = subprocess.run(cmd.argv, cwd=cwd, env=dict(os.environ, **cmd.env), stdout=so, stderr=se)
        if check and r.returncode != 0:
            raise RuntimeError(f"{what} failed ({r.returncode}): see {se.name}")
        return r.returncode == 0


def results_dir(suite, build):
    day = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    base = os.path.join(BENCH_DIR, f"{day}-{build.rev}", suite)
    path, n = base, 1
    while os.path.exists(path):
        n += 1
        path = f"{base}-{n}"
    os.makedirs(path)
    return path


# ------------------------------------------------------------------------------------------ running


def run_suite(suite, quick, against, runs, only, verbose):
    current = current_build()
    builds = ([against_build(against)] if against else []) + [current]
    out = results_dir(suite.name, current)
    ctx = Context(suite.name, quick, builds, out, {"runs": runs, "only": only})
    started = datetime.datetime.now(datetime.timezone.utc)
    meta = {
        "suite": suite.name, "quick": quick, "argv": sys.argv,
        "started_utc": started.strftime("%Y-%m-%d %H:%M:%S"), "nproc": os.cpu_count(), "loadavg": loadavg(),
        "builds": [{"label": b.label, "rev": b.rev, "src": b.src} for b in builds],
        "out": os.path.relpath(out, ROOT),
    }
    note(f"{suite.name}: results in {os.path.relpath(out, ROOT)}")
    needs = suite.needs(ctx)
    for b in builds:  # the current tree last: target/release then holds its binaries again
        b.make(needs)
    if suite.prepare:
        suite.prepare(ctx)
    benches = [b for b in suite.benches(ctx) if not only or re.search(only, b.name)]
    samples, failures = [], []
    raw = open(os.path.join(out, "raw.csv"), "w", newline="")
    writer = csv.writer(raw)
    writer.writerow(["bench", "build", "rev", "run", "figure", "value", "seconds", "exit", "loadavg"])
    for bench in benches:
        n = runs or max(bench.runs[0 if quick else 1], 3 if against else 1)
        for i in range(n):
            for build in builds if bench.per_build else [current]:
                cmd = bench.command(ctx, build)
                if cmd is None:
                    continue
                tag = f"{bench.name}.{build.key}.{i + 1}"
                seconds, code, load = run_one(ctx, cmd, tag, bench.timeout[0 if quick else 1], verbose)
                if code != 0:
                    failures.append(f"{bench.name} on {build.label}: exit {code} (runs/{tag}.stderr)")
                figures = bench.parse(open_text(out, tag, "stdout"), open_text(out, tag, "stderr")) \
                    if code == 0 else {}
                for k, v in figures.items():
                    writer.writerow([bench.name, build.label, build.rev, i + 1, k, v, f"{seconds:.3f}", code, load])
                    samples.append((bench.name, build.label, k, v))
                writer.writerow([bench.name, build.label, build.rev, i + 1, "wall_s", f"{seconds:.3f}",
                                 f"{seconds:.3f}", code, load])
                samples.append((bench.name, build.label, "wall_s", seconds))
                raw.flush()
    raw.close()
    if suite.finish:
        suite.finish(ctx)
    meta["finished_utc"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    meta["notes"], meta["failures"] = ctx.notes, failures
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
    text = summary(suite, benches, builds, samples, meta)
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write(text)
    print(text, end="")
    return 1 if failures else 0


def open_text(out, tag, stream):
    with open(os.path.join(out, "runs", f"{tag}.{stream}"), errors="replace") as f:
        return f.read()


def run_one(ctx, cmd, tag, timeout, verbose):
    """Runs one measured command: stdout and stderr into runs/TAG.*, the line into commands.txt."""
    with open(ctx.path("commands.txt"), "a") as f:
        f.write(f"# {tag} (cwd {os.path.relpath(cmd.cwd, ROOT)})\n{cmd.line()}\n")
    load = loadavg()
    note(f"{tag}: {cmd.line()[:150]}  (load {load})")
    start = time.perf_counter()
    with open(ctx.path("runs", tag + ".stdout"), "w") as so, open(ctx.path("runs", tag + ".stderr"), "w") as se:
        try:
            proc = subprocess.run(cmd.argv, cwd=cmd.cwd, env=dict(os.environ, **cmd.env), stdout=so,
                                  stderr=None if verbose else se, timeout=cmd.timeout or timeout)
            code = proc.returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
    seconds = time.perf_counter() - start
    if code != 0:
        note(f"{tag}: exit {code} after {seconds:.1f} s")
    return seconds, code, load


def summary(suite, benches, builds, samples, meta):
    """Per benchmark and figure: each build's median [min, max] over its runs, and with two builds the
    ratio of the medians (this build / the other)."""
    labels = [b.label for b in builds]
    lines = [f"{suite.name}{' (quick)' if meta['quick'] else ''}: {meta['started_utc']} UTC, {meta['nproc']} cores, "
             f"load {meta['loadavg']} at the start",
             "builds: " + ", ".join(f"{b.label} = {b.rev}" for b in builds), ""]
    head = ["benchmark", "figure"] + [f"{lab} median [min, max] (n)" for lab in labels]
    if len(builds) == 2:
        head.append(f"{labels[1]}/{labels[0]}")
    rows = [head]
    for bench in benches:
        wanted = {m.key: m for m in bench.metrics}
        keys = [m.key for m in bench.metrics] or sorted({k for b, _, k, _ in samples if b == bench.name} - {"wall_s"})
        keys = keys + ["wall_s"]
        for key in keys:
            per = [[v for b, lab, k, v in samples if b == bench.name and lab == label and k == key] for label in labels]
            if not any(per):
                continue
            cells = [fmt_cell(v) for v in per]
            unit = wanted[key].unit + ", " if key in wanted and wanted[key].unit else ""
            row = [bench.name, key + (f" ({unit}{wanted[key].better} is better)" if key in wanted else "")]
            row += cells
            if len(builds) == 2:
                row.append(f"{statistics.median(per[1]) / statistics.median(per[0]):.3f}"
                           if per[0] and per[1] and statistics.median(per[0]) else "-")
            rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    for n in meta["notes"]:
        lines.append(f"note: {n}")
    for f in meta["failures"]:
        lines.append(f"FAILED: {f}")
    lines.append(f"raw results: {meta['out']}/")
    return "\n".join(lines) + "\n"


def fmt(v):
    if v == 0 or (1e-3 <= abs(v) < 1e4):
        return f"{v:.4g}"
    if 1e4 <= abs(v) < 1e15:
        return f"{v:.0f}"
    return f"{v:.3e}"


def fmt_cell(values):
    if not values:
        return "-"
    return f"{fmt(statistics.median(values))} [{fmt(min(values))}, {fmt(max(values))}] ({len(values)})"

"""paper: the reproductions of Liu et al. (ICML 2017) and the mirror-descent convergence figures.

- paper_5_1: Sec. 5.1, support recovery on the synthetic ridge problem (d = 500, kbar = 100): DIHT,
  SDIHT, IHT, HTP (`benches/harness/paper_5_1.rs`) and abess (`benches/peers/paper_5_1.py`, from PyPI
  into bench-venv/) on the same files; PSSR (%) and median relative error per N and solver;
- efficiency_5_2/k=K: Sec. 5.2, time to IHT's primal value on the real text sets (rotten_tomatoes,
  trump_tweets; Huber and hinge, two lambdas): HTP, DIHT, SDIHT against IHT (`benches/harness/
  efficiency_5_2.rs`), k = 1000 and 300 and a tighter target (quick: k = 300, a looser target);
- mirror/SET-LOSS: gap per pass and per second of SDIHT, IHT, sparse mirror descent (each map) and
  SMIDAS (`benches/harness/mirror_convergence.rs`) on the text sets, Huber and logistic; the tables
  (and PNG figures when matplotlib imports in bench-venv) of `mirror_summary.py` in mirror.md.

The real text sets live in data/real (`FETCH=.../shared/datasets/fetch.sh` fills it); without them the
benchmarks on them are skipped (quick mirror runs use a synthetic stream instead).
"""
import csv
import os
import subprocess
import sys
from collections import OrderedDict

from common import ROOT, Bench, Command, Needs, Suite, key_values, markdown_figures, venv

REAL = os.path.join(ROOT, "data", "real")
SETS = ["rotten_tomatoes", "trump_tweets"]


def needs(ctx):
    return Needs(examples=["paper_5_1", "efficiency_5_2", "mirror_convergence"])


def have_real():
    return all(os.path.exists(os.path.join(REAL, f"{s}.svm")) for s in SETS)


def prepare(ctx):
    ctx.py, missing = venv("bench-venv", ["numpy", "abess"])
    if missing:
        ctx.skip(f"paper: could not install {', '.join(missing)}: paper_5_1 runs without abess")
        ctx.py = None
    ctx.plot_py, missing = venv("bench-venv", ["matplotlib"])
    if missing:
        ctx.skip("paper: no matplotlib in bench-venv: mirror tables without figures")
        ctx.plot_py = sys.executable
    if not have_real():
        fetch = os.environ.get("FETCH", os.path.join(ROOT, "..", "shared", "datasets", "fetch.sh"))
        if os.path.exists(fetch):
            ctx.sh(["bash", fetch, REAL], "fetch the real text sets", check=False)
    if not have_real():
        ctx.skip("paper: no data/real text sets (set FETCH=.../shared/datasets/fetch.sh): efficiency_5_2 and "
                 "the mirror runs on text skipped")


def paper_5_1(ctx, build):
    copies, validation = (2, 2) if ctx.quick else (20, 8)
    return Command([sys.executable, __file__, "paper_5_1", build.example("paper_5_1"),
                    ctx.dir(f"paper_5_1-{build.key}"), copies, validation, ctx.py or "-"])


def efficiency(k, change):
    def command(ctx, build):
        if not have_real():
            return None
        return Command([build.example("efficiency_5_2"), "--data", REAL, "--k", k, "--iht-change", change,
                        "--out", ctx.dir(f"efficiency_5_2-{build.key}")])
    return command


def mirror(data, loss):
    def command(ctx, build):
        path = os.path.join(REAL, f"{data}.svm") if data != "synthetic" else "synthetic"
        if data != "synthetic" and not os.path.exists(path):
            return None
        epochs, budget = ("5", "5") if ctx.quick else ("20", "30")
        return Command([sys.executable, __file__, "mirror", build.example("mirror_convergence"),
                        ctx.path(f"mirror-{build.key}", f"{data}_{loss}.csv"), path, "--loss", loss,
                        "--lambda", "0.002", "--k", "100", "--epochs", epochs, "--budget", budget, "--batch", "128",
                        "--l1", os.environ.get("SMIDAS_L1", "0.01")])
    return command


def benches(ctx):
    out = [Bench("paper_5_1", "Sec. 5.1 support recovery, DIHT/SDIHT/IHT/HTP and abess (PSSR %, rel. error)",
                 paper_5_1, parse=lambda o, e: markdown_figures(o), runs=(1, 1), timeout=(900, 7200))]
    runs = [("300", "1e-2")] if ctx.quick else [("1000", "1e-4"), ("300", "1e-4"), ("1000", "1e-6")]
    for k, change in runs:
        out.append(Bench(f"efficiency_5_2/k={k},change={change}", "Sec. 5.2 time to IHT's primal value (s, ratios)",
                         efficiency(k, change), parse=lambda o, e: markdown_figures(o, key_cols=3), runs=(1, 1)))
    sets = ["synthetic"] if ctx.quick else SETS
    for data in sets:
        for loss in ("huber", "logistic"):
            out.append(Bench(f"mirror/{data}-{loss}", "gap per pass and per second, each solver (final figures)",
                             mirror(data, loss), parse=lambda o, e: key_values(o, e, ("solver",)), runs=(1, 1)))
    return out


def finish(ctx):
    """The mirror tables (and figures) of every CSV the mirror runs wrote, per build, into mirror.md."""
    for build in ctx.builds:
        folder = os.path.join(ctx.out, f"mirror-{build.key}")
        if not os.path.isdir(folder):
            continue
        csvs = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".csv"))
        with open(os.path.join(folder, "mirror.md"), "w") as f:
            subprocess.run([ctx.plot_py, os.path.join(ROOT, "benches", "suites", "mirror_summary.py"), *csvs], stdout=f)


SUITE = Suite("paper", "Liu et al. Sec. 5.1 (with abess) and 5.2 on real text; mirror-descent convergence",
              needs, benches, prepare, finish)


def run_paper_5_1(example, out, copies, validation, py):
    """The Rust side writes the copies and fits them; abess fits the same files; the table merges both."""
    subprocess.run([example, "--copies", copies, "--validation", validation, "--out", out], check=True)
    peer = os.path.join(ROOT, "benches", "peers", "paper_5_1.py")
    if py != "-":
        subprocess.run([py, peer, "fit", out], check=True)
        subprocess.run([py, peer, "table", out], check=True)
    else:
        sys.stdout.write(open(os.path.join(out, "results_rust.csv")).read())


def run_mirror(example, out, *args):
    """Runs the harness into `out` (CSV: solver,epoch,seconds,primal,dual,gap,support) and prints each
    solver's last certified row."""
    subprocess.run([example, *args, "--out", out], check=True)
    last = OrderedDict()
    with open(out) as f:
        for row in csv.DictReader(f):
            last[row["solver"]] = row
    for solver, r in last.items():
        print(f"solver={solver} passes={r['epoch']} seconds={r['seconds']} primal={r['primal']} gap={r['gap']} "
              f"support={r['support']}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["paper_5_1"] and len(sys.argv) == 7:
        run_paper_5_1(*sys.argv[2:])
    elif sys.argv[1:2] == ["mirror"] and len(sys.argv) > 4:
        run_mirror(*sys.argv[2:])
    else:
        sys.exit("usage: paper.py paper_5_1 EXAMPLE OUT COPIES VALIDATION PY | mirror EXAMPLE OUT.csv ARGS...")

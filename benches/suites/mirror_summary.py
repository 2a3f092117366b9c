"""Summarises mirror_convergence CSVs (solver,epoch,seconds,primal,dual,gap,support) as docs/benchmarks/mirror.md's
markdown tables, and draws gap/primal against passes and seconds when matplotlib is importable."""
import csv
import os
import sys
from collections import defaultdict


def load(path):
    runs = defaultdict(list)
    with open(path) as f:
        for row in csv.DictReader(f):
            runs[row["solver"]].append({k: (v if k == "solver" else float(v)) for k, v in row.items()})
    return runs


def at(rows, epoch):
    hit = [r for r in rows if r["epoch"] <= epoch]
    return hit[-1] if hit else None


def table(path, runs):
    name = os.path.splitext(os.path.basename(path))[0]
    print(f"\n**{name}** (lambda = 0.002, k = 100)\n")
    print("| solver | gap after 1 pass | 5 passes | 20 passes | primal after 20 | solver seconds for 20 | support |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for solver, rows in runs.items():
        last = rows[-1]
        cells = []
        for e in (1, 5, 20):
            r = at(rows, e)
            cells.append(f"{r['gap']:.2e}" if r and r["epoch"] == e else "—")
        passes = int(last["epoch"])
        note = "" if passes >= 20 else f" ({passes} passes in the budget)"
        print(f"| {solver} | {' | '.join(cells)} | {last['primal']:.6f} | {last['seconds']:.2f}{note} | {int(last['support'])} |")


def plot(path, runs):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for solver, rows in runs.items():
        e = [r["epoch"] for r in rows]
        s = [r["seconds"] for r in rows]
        g = [max(r["gap"], 1e-12) for r in rows]
        p = [r["primal"] for r in rows]
        axes[0].semilogy(e, g, label=solver)
        axes[1].semilogy(s, g, label=solver)
        axes[2].plot(e, p, label=solver)
    axes[0].set_xlabel("passes")
    axes[0].set_ylabel("gap P - D")
    axes[1].set_xlabel("solver seconds")
    axes[1].set_xscale("log")
    axes[1].set_ylabel("gap P - D")
    axes[2].set_xlabel("passes")
    axes[2].set_ylabel("primal P")
    axes[0].legend(fontsize=8)
    fig.suptitle(os.path.splitext(os.path.basename(path))[0])
    fig.tight_layout()
    out = os.path.splitext(path)[0] + ".png"
    fig.savefig(out, dpi=90)
    print(f"\n![{os.path.basename(out)}]({out})")


for path in sys.argv[1:]:
    runs = load(path)
    table(path, runs)
    plot(path, runs)

"""Peer side of the DIHT Sec. 5.1 reproduction: abess on the very copies the Rust example wrote.

    python benches/peers/paper_5_1.py fit DIR       # abess on DIR/n{N}_copy{c}.svm -> DIR/results_abess.csv
    python benches/peers/paper_5_1.py table DIR     # merge with DIR/results_rust.csv, print the Markdown table

abess runs with `support_size=100` (= kbar = k), its default settings otherwise (no ridge term), once
with and once without an intercept. The truth is known by construction: ones on the first 100
coordinates of d = 500 (thresher::synth::paper_ridge).
"""

import csv
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

D, KBAR = 500, 100


def read_libsvm(path):
    """Dense (X, y) from the 0-based LIBSVM text thresher::synth::to_libsvm writes."""
    rows, labels = [], []
    for line in Path(path).read_text().splitlines():
        if not line.strip():
            continue
        parts = line.split()
        labels.append(float(parts[0]))
        x = np.zeros(D)
        for item in parts[1:]:
            j, v = item.split(":")
            x[int(j)] = float(v)
        rows.append(x)
    return np.array(rows), np.array(labels)


def fit(directory):
    from abess.linear import LinearRegression

    truth = np.zeros(D)
    truth[:KBAR] = 1.0
    pattern = re.compile(r"n(\d+)_copy(\d+)\.svm$")
    copies = sorted(
        (int(m.group(1)), int(m.group(2)), p)
        for p in Path(directory).glob("n*_copy*.svm")
        if (m := pattern.search(p.name))
    )
    out = ["n,copy,solver,lambda,relative_error,recovered,epochs,seconds,relative_gap"]
    for n, copy, path in copies:
        X, y = read_libsvm(path)
        for intercept in (False, True):
            name = "abess+b" if intercept else "abess"
            started = time.perf_counter()
            model = LinearRegression(support_size=KBAR, fit_intercept=intercept)
            model.fit(X, y)
            seconds = time.perf_counter() - started
            w = np.asarray(model.coef_, dtype=float)
            support = np.flatnonzero(w)
            recovered = int(len(support) == KBAR and np.all(support < KBAR))
            error = np.linalg.norm(w - truth) / np.linalg.norm(truth)
            out.append(f"{n},{copy},{name},0,{error:.6e},{recovered},0,{seconds:.4f},nan")
    Path(directory, "results_abess.csv").write_text("\n".join(out) + "\n")
    print(f"abess: {len(copies)} copies", file=sys.stderr)


def table(directory):
    cells = defaultdict(list)
    lambdas = {}
    for name in ("results_rust.csv", "results_abess.csv"):
        with open(Path(directory, name)) as f:
            for r in csv.DictReader(f):
                key = (int(r["n"]), r["solver"])
                cells[key].append((int(r["recovered"]), float(r["relative_error"])))
                lambdas[key] = r["lambda"]
    solvers = ["diht", "sdiht", "iht", "htp", "abess", "abess+b"]
    ns = sorted({n for n, _ in cells})
    copies = max(len(v) for v in cells.values())
    print(f"PSSR (%) / median relative error ||w - wbar|| / ||wbar||, {copies} test copies per N;")
    print("lambda chosen per solver and N on separate validation copies (in brackets).\n")
    print("| N | " + " | ".join(solvers) + " |")
    print("|---:|" + "---|" * len(solvers))
    for n in ns:
        row = [str(n)]
        for s in solvers:
            v = cells.get((n, s))
            if not v:
                row.append("-")
                continue
            pssr = 100.0 * sum(r for r, _ in v) / len(v)
            med = float(np.median([e for _, e in v]))
            lam = f" [{float(lambdas[(n, s)]):g}]" if not s.startswith("abess") else ""
            row.append(f"{pssr:.0f} / {med:.3f}{lam}")
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("fit", "table"):
        sys.exit(__doc__)
    {"fit": fit, "table": table}[sys.argv[1]](sys.argv[2])

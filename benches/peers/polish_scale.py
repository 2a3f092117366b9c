#!/usr/bin/env python3
"""`thresher fit` with and without polishing and --standardize: held-out accuracy, primal, gap, fit time.

    python3 benches/peers/polish_scale.py --real data/real --work DIR [--bin target/release/thresher]

Text sets: data/real/NAME.svm split as benches/peers/quality.py splits them (seeded permutation, seed 0,
25% held out). `badly_scaled`: a synthetic logistic set written here (seed 1), 8000 rows, d = 60, 20
nonzeros per row, 12 informative features; each column's values are uniform on [-1, 1] times a
magnitude of 1e6, 1 or 1e-6 (a third each, the informative features spread over the three; 1e6 is the
largest magnitude `fit` reads, `ingest.max_abs_value`), labels the sign of the score on the unit-scale
values plus N(0, 0.3) noise. Every fit: --solver sdiht --loss logistic -k K
--intercept and the lambda given (a number, or auto), timed as a whole process (median of --repeat runs,
alternating the four variants); the primal and gap are the model file's certificate (of the scaled
problem with --standardize), accuracy by `thresher predict --scores` on the held-out part.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from quality import split_text  # noqa: E402


def badly_scaled(work, n=8000, d=60, nnz=20, informative=12, seed=1):
    rng = np.random.default_rng(seed)
    magnitude = np.array([[1e6, 1.0, 1e-6][j % 3] for j in range(d)])
    truth = np.zeros(d)
    truth[:informative] = rng.choice([-1.0, 1.0], informative) * rng.uniform(1.0, 2.0, informative)
    lines = []
    for _ in range(n):
        cols = np.sort(rng.choice(d, nnz, replace=False))
        z = rng.uniform(-1.0, 1.0, nnz)
        label = 1 if z @ truth[cols] + 0.3 * rng.standard_normal() >= 0 else -1
        x = z * magnitude[cols]
        lines.append(f"{label} " + " ".join(f"{j}:{v:.6e}" for j, v in zip(cols, x)) + "\n")
    path = os.path.join(work, "badly_scaled.svm")
    with open(path, "w") as f:
        f.writelines(lines)
    return split_text(path, work, "badly_scaled", 0, 0.25)


def fit(binary, train, out, lam, k, polish, standardize):
    cmd = [binary, "fit", train, "--solver", "sdiht", "--loss", "logistic", "-k", str(k), "--lambda", lam,
           "--intercept", "--out", out]
    if not polish:
        cmd.append("--no-polish")
    if standardize:
        cmd.append("--standardize")
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        return seconds, "failed: " + done.stderr.strip().splitlines()[0].replace("|", "/")
    polish_line = next((line for line in done.stderr.splitlines() if line.startswith("polish:")), "")
    return seconds, polish_line


def accuracy(binary, model, test):
    scores = subprocess.run([binary, "predict", "--model", model, "--scores", test], capture_output=True,
                            text=True, check=True).stdout.split()
    labels = [float(line.split()[0]) for line in open(test) if line.strip()]
    return float(np.mean([(float(s) >= 0) == (y > 0) for s, y in zip(scores, labels)]))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--real", default="data/real")
    p.add_argument("--work", required=True)
    p.add_argument("--bin", default="target/release/thresher")
    p.add_argument("-k", type=int, default=100)
    p.add_argument("--lambdas", default="1e-4,auto")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    sets = [(name, *split_text(os.path.join(args.real, f"{name}.svm"), args.work, name, 0, 0.25)[:2])
            for name in ("rotten_tomatoes", "trump_tweets")]
    sets.append(("badly_scaled", *badly_scaled(args.work)[:2]))
    variants = [(polish, standardize) for standardize in (False, True) for polish in (False, True)]
    print("| set | lambda | polish | standardize | held-out acc | primal | gap | relative gap | fit s (median) | polish |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, train, test in sets:
        for lam in args.lambdas.split(","):
            times = {v: [] for v in variants}
            results = {}
            for _ in range(args.repeat):
                for polish, standardize in variants:
                    out = os.path.join(args.work, f"{name}.{lam}.{int(polish)}{int(standardize)}.json")
                    seconds, line = fit(args.bin, train, out, lam, args.k, polish, standardize)
                    times[(polish, standardize)].append(seconds)
                    results[(polish, standardize)] = (out, line)
            for polish, standardize in variants:
                out, line = results[(polish, standardize)]
                if line.startswith("failed"):
                    print(f"| {name} | {lam} | {'on' if polish else 'off'} | {'on' if standardize else 'off'} | "
                          f"- | - | - | - | {statistics.median(times[(polish, standardize)]):.2f} | {line} |")
                    continue
                model = json.load(open(out))
                c = model["certificate"]
                chosen = f"auto ({model['lambda']:g})" if lam == "auto" else lam
                note = line.replace("polish: ", "") if polish else "off"
                print(f"| {name} | {chosen} | {'on' if polish else 'off'} | {'on' if standardize else 'off'} | "
                      f"{100 * accuracy(args.bin, out, test):.2f}% | {c['primal']:.6g} | {c['gap']:.3e} | "
                      f"{c['gap'] / max(1.0, abs(c['primal'])):.2e} | "
                      f"{statistics.median(times[(polish, standardize)]):.2f} | {note} |")


if __name__ == "__main__":
    main()

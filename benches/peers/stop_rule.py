#!/usr/bin/env python3
"""Two `thresher` builds side by side on the text sets: `fit`'s held-out accuracy, fit time, epochs, why it
stopped, its primal and relative gap, per setting.

    python3 benches/peers/stop_rule.py --before OLD_BINARY --after target/release/thresher [--real data/real]

Each set `REAL/NAME.svm` is split once by a seeded shuffle (Python's `random`, seed 0; 25% held out); both
builds read the same files. Runs alternate between the builds (before, after, before, ...) `--repeats` times;
the wall time is the median over the repeats of the whole `fit` process (parse, solve, certify, write), the
other figures are those of the last run (every run is deterministic). Accuracy: `thresher predict --scores`
on the held-out part, the sign of the score against the label. Prints a Markdown table.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import tempfile
import time

SETTINGS = [
    ("logistic, lambda 1e-4, --intercept", ["--loss", "logistic", "--lambda", "1e-4", "--intercept"]),
    ("logistic, lambda auto, --intercept", ["--loss", "logistic", "--lambda", "auto", "--intercept"]),
    ("hinge, lambda 1e-4, --intercept", ["--loss", "hinge", "--lambda", "1e-4", "--intercept"]),
    ("logistic, lambda 1e-4, default intercept", ["--loss", "logistic", "--lambda", "1e-4"]),
    ("logistic, lambda auto, default intercept", ["--loss", "logistic", "--lambda", "auto"]),
]


def split(src, work, name, seed=0, held_out=0.25):
    with open(src) as f:
        lines = [line if line.endswith("\n") else line + "\n" for line in f if line.strip()]
    order = list(range(len(lines)))
    random.Random(seed).shuffle(order)
    n_test = round(held_out * len(lines))
    test, train = sorted(order[:n_test]), order[n_test:]
    paths = os.path.join(work, f"{name}.train.svm"), os.path.join(work, f"{name}.test.svm")
    for path, idx in zip(paths, (train, test)):
        with open(path, "w") as g:
            g.writelines(lines[i] for i in idx)
    return paths


def fit(binary, train, test, flags, work):
    model = os.path.join(work, "model.json")
    args = [binary, "fit", train, "--solver", "sdiht", "-k", "100", "--out", model] + flags
    start = time.perf_counter()
    out = subprocess.run(args, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(args)}: {out.stderr}")
    summary = [line for line in out.stderr.splitlines() if line.startswith("solver=")][-1]
    fields = dict(kv.split("=", 1) for kv in summary.split())
    scores = subprocess.run([binary, "predict", "--model", model, "--scores", test],
                            capture_output=True, text=True, check=True).stdout.split()
    with open(test) as f:
        labels = [float(line.split(None, 1)[0]) for line in f if line.strip()]
    right = sum((float(s) >= 0) == (y > 0) for s, y in zip(scores, labels))
    with open(model) as f:
        m = json.load(f)
    primal = float(fields["primal"])
    return {
        "wall": wall,
        "accuracy": right / len(labels),
        "epochs": int(fields["epochs"]),
        "stop": fields["stop"],
        "primal": primal,
        "relative_gap": float(fields["gap"]) / max(1.0, abs(primal)),
        "lambda": float(fields["lambda"]),
        "intercept": m["intercept"],
        "warned": "warning: the model did not converge" in out.stderr,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", required=True)
    p.add_argument("--after", required=True)
    p.add_argument("--real", default="data/real")
    p.add_argument("--sets", default="rotten_tomatoes,trump_tweets")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    print("| set | setting | build | held-out acc | fit wall s (median) | epochs | stop | primal | relative gap | lambda | warns |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as work:
        for name in args.sets.split(","):
            train, test = split(os.path.join(args.real, f"{name}.svm"), work, name)
            for label, flags in SETTINGS:
                runs = {"before": [], "after": []}
                for _ in range(args.repeats):
                    for build in ("before", "after"):
                        binary = getattr(args, build)
                        runs[build].append(fit(binary, train, test, flags, work))
                for build in ("before", "after"):
                    r = runs[build][-1]
                    wall = statistics.median(x["wall"] for x in runs[build])
                    print(f"| {name} | {label} | {build} | {100 * r['accuracy']:.2f}% | {wall:.2f} | {r['epochs']} "
                          f"| {r['stop']} | {r['primal']:.4f} | {r['relative_gap']:.2e} | {r['lambda']:g} "
                          f"| {'yes' if r['warned'] else 'no'} |", flush=True)


if __name__ == "__main__":
    main()

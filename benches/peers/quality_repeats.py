"""Held-out quality of the small seeded sets over several splits: `quality_real.py` once per seed,
then every method's mean, standard deviation and per-seed figures side by side.

Why: convention_2012 holds 47 test documents and permeability 41 molecules, so one document is 2.1
points of accuracy and one split's figure moves by several points with the seed; the quality
benchmark's 0.5-point target is below what one split can resolve. Every method is run on the same
splits (seeds 0..R-1, 25% held out each), so the per-seed differences are paired.

    data/real/.venv/bin/python benches/peers/quality_repeats.py --seeds 10 \
        --sets convention_2012,permeability --methods fit,peer [quality_real.py's other flags]

Writes WORK/seed-S/ (each run's splits, models and results.jsonl) and WORK/quality_repeats.md.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=10, help="splits: seeds 0..R-1")
    p.add_argument("--work", default="quality-repeats")
    p.add_argument("--sets", default="convention_2012,permeability")
    args, rest = p.parse_known_args()
    work = os.path.abspath(args.work)
    rows = []
    for seed in range(args.seeds):
        out = os.path.join(work, f"seed-{seed}")
        subprocess.run([sys.executable, os.path.join(HERE, "quality_real.py"), "--work", out, "--seed",
                        str(seed), "--sets", args.sets] + rest, check=True)
        with open(os.path.join(out, "results.jsonl")) as f:
            rows += [dict(json.loads(line), seed=seed) for line in f if line.strip()]
    lines = ["| set | method | figure | mean | sd | per seed (0..R-1) |", "| --- | --- | --- | --- | --- | --- |"]
    for name in args.sets.split(","):
        methods = sorted({r["method"] for r in rows if r["data"] == name})
        for method in methods:
            mine = sorted((r for r in rows if r["data"] == name and r["method"] == method), key=lambda r: r["seed"])
            key = "acc" if "acc" in mine[0] else "r2"
            vals = [r.get(key) for r in mine]
            ok = [v for v in vals if v is not None]
            if not ok:
                continue
            scale = 100 if key == "acc" else 1
            sd = statistics.stdev(ok) * scale if len(ok) > 1 else 0.0
            each = ", ".join("-" if v is None else f"{v * scale:.2f}" for v in vals)
            lines.append(f"| {name} | {method} | {'accuracy %' if key == 'acc' else 'R^2'} | "
                         f"{statistics.mean(ok) * scale:.3f} | {sd:.3f} | {each} |")
    report = os.path.join(work, "quality_repeats.md")
    with open(report, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# Convergence of SDIHT, IHT, sparse mirror descent (each map) and SMIDAS on the real data sets, Huber and
# logistic: one CSV per (data set, loss) in target/mirror-bench/, then the summary tables of docs/benchmarks/mirror.md
# (and PNG figures when matplotlib is importable: `bench-venv/bin/pip install matplotlib`).
#   bash benches/mirror_convergence.sh            # data from data/real (bash ../shared/datasets/fetch.sh data/real)
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${DATA:-data/real}
OUT=target/mirror-bench
mkdir -p "$OUT"
cargo build --release --example mirror_convergence
for set in rotten_tomatoes trump_tweets; do
  for loss in huber logistic; do
    ./target/release/examples/mirror_convergence "$DATA/$set.svm" --loss "$loss" --lambda 0.002 --k 100 \
      --epochs 20 --budget 30 --batch 128 --l1 "${SMIDAS_L1:-0.01}" \
      --out "$OUT/${set}_${loss}.csv" 2> "$OUT/${set}_${loss}.txt"
    cat "$OUT/${set}_${loss}.txt"
  done
done
PY=python3
[ -x bench-venv/bin/python ] && PY=bench-venv/bin/python
"$PY" benches/mirror_summary.py "$OUT"/*.csv

#!/usr/bin/env bash
# One-pass `thresher fit` of two or more builds, alternated run by run on the same file, with the median
# and minimum of the solver's epoch time (`seconds=` in fit's summary line) and of the process's wall
# time per build. Alternating matters on a shared machine, where absolute times drift by 1.5x between
# minutes; read the medians side by side.
#
#   benches/fit_ab.sh TRAIN RUNS BINARY... [-- FIT FLAGS]
#   benches/fit_ab.sh /work/data-w3/train.svm 8 /tmp/thresher-old target/release/thresher
#
# Default flags: --solver mirror --loss logistic -k 100 --lambda 1e-4 --epochs 1 (the W3 rows of
# docs/benchmarks/quality.md). The models are written to a temporary directory and compared byte for
# byte across builds (a change meant to be exact must leave them identical).
set -euo pipefail
train=$1
runs=$2
shift 2
bins=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    bins+=("$1")
    shift
done
[ $# -gt 0 ] && shift
flags=("$@")
[ ${#flags[@]} -eq 0 ] && flags=(--solver mirror --loss logistic -k 100 --lambda 1e-4 --epochs 1)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for _ in $(seq "$runs"); do
    for b in "${!bins[@]}"; do
        start=$EPOCHREALTIME
        summary=$("${bins[$b]}" fit "$train" "${flags[@]}" --out "$work/model.$b.json" 2>&1 | grep '^solver=')
        end=$EPOCHREALTIME
        epoch=$(grep -o 'seconds=[0-9.]*' <<<"$summary" | cut -d= -f2)
        echo "$b $epoch $start $end" >>"$work/times"
    done
done
python3 - "$work/times" "${bins[@]}" <<'EOF'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
for b, name in enumerate(sys.argv[2:]):
    epoch = [float(r[1]) for r in rows if int(r[0]) == b]
    wall = [float(r[3]) - float(r[2]) for r in rows if int(r[0]) == b]
    print(f"{name}: epoch median {statistics.median(epoch):.3f} s (min {min(epoch):.3f}), "
          f"wall median {statistics.median(wall):.2f} s (min {min(wall):.2f}), {len(wall)} runs")
EOF
for b in "${!bins[@]}"; do
    if ! cmp -s "$work/model.0.json" "$work/model.$b.json"; then
        echo "models differ: ${bins[0]} and ${bins[$b]}"
    fi
done

#!/usr/bin/env bash
# Model quality side by side: thresher fit and daemon against Vowpal Wabbit, scikit-learn SGD, liblinear
# (L1 logistic tuned to <= 100 nonzeros) and River, on the W3-like stream and the text sets, in one run.
# Writes docs/benchmarks/quality.md (and data/quality/results.jsonl).
#   bash benches/quality.sh [--quick] [REAL_DIR]     (REAL_DIR default data/real; fetched when missing)
# W3_DIR=DIR uses (or writes) the stream there (default data/w3, data/w3-quick with --quick); extra
# arguments after REAL_DIR go to benches/quality.py (see its --help), e.g. --methods fit,vw --sets w3.
set -euo pipefail
cd "$(dirname "$0")/.."
QUICK=""
if [ "${1:-}" = "--quick" ]; then QUICK=1; shift; fi
REAL="${1:-data/real}"; [ $# -gt 0 ] && shift
if [ -n "$QUICK" ]; then
  W3="${W3_DIR:-data/w3-quick}"; TRAIN=100000; TEST=20000
else
  W3="${W3_DIR:-data/w3}"; TRAIN=1000000; TEST=100000
fi

# Peers in a private virtualenv; nothing system-wide.
[ -x bench-venv/bin/python ] || python3 -m venv bench-venv
bench-venv/bin/python -c "import vowpalwabbit, sklearn, river, numpy, scipy" 2>/dev/null \
  || bench-venv/bin/pip install -q vowpalwabbit scikit-learn river numpy scipy

cargo build --release --quiet
cargo build --release --quiet --example w3_stream

for f in rotten_tomatoes trump_tweets; do
  [ -f "$REAL/$f.svm" ] || bash "${FETCH:-../shared/datasets/fetch.sh}" "$REAL"
done
# The generator writes each file under a temporary name and renames it when complete.
if [ ! -f "$W3/train.svm" ] || [ ! -f "$W3/test.svm" ]; then
  target/release/examples/w3_stream --train "$TRAIN" --test "$TEST" --out "$W3"
fi

CMD="bash benches/quality.sh${QUICK:+ --quick} $(printf '%q ' "$REAL" "$@")"
CMD="${CMD% }"
exec bench-venv/bin/python benches/quality.py --w3 "$W3" --real "$REAL" --command "$CMD" \
  ${QUICK:+--quick --river-samples 20000} "$@"

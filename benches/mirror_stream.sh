#!/usr/bin/env bash
# Side by side on one stream (d = 2^20, 40 nonzeros per sample, 100 true features, SAMPLES samples cycled
# from 200k distinct ones, held-out 20k): thresher's stream learners in-process (sparse mirror descent,
# SMIDAS) vs scikit-learn SGDClassifier(l1) partial_fit, River and Vowpal Wabbit, installed from PyPI into
# bench-venv/ (git-ignored). Held-out accuracy, support size, samples/s of the learning loop.
#   bash benches/mirror_stream.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SAMPLES="${SAMPLES:-1000000}"
[ -x bench-venv/bin/python ] || python3 -m venv bench-venv
bench-venv/bin/python -c "import vowpalwabbit, sklearn, river" 2>/dev/null \
  || bench-venv/bin/pip install -q vowpalwabbit scikit-learn river
cargo build --release --quiet --example loadgen --example mirror_stream
DATA=${DATA:-data/stream}; mkdir -p "$DATA"
[ -f "$DATA/train.svm" ] || target/release/examples/loadgen --dump "$DATA"
echo "== thresher stream learners (in-process)"
target/release/examples/mirror_stream "$DATA" --samples "$SAMPLES"
echo "== peers"
bench-venv/bin/python benches/mirror_peers.py "$DATA" "$SAMPLES"

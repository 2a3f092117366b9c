#!/usr/bin/env bash
# Side by side: thresher serve vs Vowpal Wabbit's daemon on the same stream (d = 2^20, 40 nonzeros per
# sample, 100 true features, from 200k distinct samples): thresher under DURATION s of sustained load per
# format and batch size, VW over one pass of SAMPLES samples.
#   bash benches/vw_daemon.sh            (needs root for `unshare -n`; installs VW into bench-venv/)
set -euo pipefail
cd "$(dirname "$0")/.."
SAMPLES="${SAMPLES:-1000000}"   # VW's one pass
DURATION="${DURATION:-10}"      # seconds of sustained load per thresher row
[ -x bench-venv/bin/python ] || python3 -m venv bench-venv
bench-venv/bin/python -c "import vowpalwabbit" 2>/dev/null || bench-venv/bin/pip install -q vowpalwabbit
cargo build --release --quiet --example loadgen
cargo build --release --quiet
DATA=data/stream; mkdir -p "$DATA"
[ -f "$DATA/train.svm" ] || target/release/examples/loadgen --dump "$DATA"
echo "== thresher serve (loopback HTTP, LIBSVM and JSON bodies)"
for fmt in libsvm json; do for batch in 1000 10000; do
  target/release/examples/loadgen --format "$fmt" --batch "$batch" --duration "$DURATION"
done; done
echo "== what the GET tail owes to each setting (LIBSVM, 10 000-sample bodies)"
echo "   senders with the kernel's autotuned send buffers (4 MiB here):"
target/release/examples/loadgen --format libsvm --batch 10000 --duration "$DURATION" --sender-sndbuf-kib 0
echo "   daemon without yield points (server.yield_interval_us = 0):"
target/release/examples/loadgen --format libsvm --batch 10000 --duration "$DURATION" \
  --daemon-env THRESHER_SERVER_YIELD_INTERVAL_US=0
echo "== GET probe asking for the short EEVDF slice, as the daemon's HTTP workers do (no privilege)"
for batch in 1000 10000; do
  target/release/examples/loadgen --format libsvm --batch "$batch" --duration "$DURATION" --probe-priority slice
done
echo "== Vowpal Wabbit daemon (inside a loopback-only network namespace)"
unshare -n bash -c "ip link set lo up && bench-venv/bin/python benches/vw_daemon.py $DATA $SAMPLES"

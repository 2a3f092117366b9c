#!/usr/bin/env bash
# Memory under a sustained stream: runs examples/loadgen (which starts `thresher serve` itself) for
# SAMPLES samples and samples the daemon's RSS every second; prints "seconds rss_mib" rows, then the
# loadgen summary. RSS should rise while the window and the queue fill, then stay flat.
#   bash benches/rss_soak.sh            [SAMPLES=3000000] [CAPACITY=100000] [FORMAT=libsvm]
set -euo pipefail
cd "$(dirname "$0")/.."
SAMPLES="${SAMPLES:-3000000}"; CAPACITY="${CAPACITY:-100000}"; FORMAT="${FORMAT:-libsvm}"
cargo build --release --quiet && cargo build --release --quiet --example loadgen
target/release/examples/loadgen --format "$FORMAT" --batch 10000 --samples "$SAMPLES" --capacity "$CAPACITY" \
  > /tmp/rss_soak_summary.txt &
LOADGEN=$!
PID=""
for _ in $(seq 100); do
  # The daemon loadgen spawned (its child), not any other thresher on the machine.
  PID=$(pgrep -P "$LOADGEN" -f "thresher serve" || true)
  [ -n "$PID" ] && break; sleep 0.1
done
START=$(date +%s)
echo "seconds rss_mib"
while kill -0 "$LOADGEN" 2>/dev/null && [ -n "$PID" ] && [ -r "/proc/$PID/status" ]; do
  RSS=$(awk '/^VmRSS:/ {print $2}' "/proc/$PID/status" 2>/dev/null || echo 0)
  echo "$(( $(date +%s) - START )) $(( ${RSS:-0} / 1024 ))"
  sleep 1
done
wait "$LOADGEN"
cat /tmp/rss_soak_summary.txt

#!/usr/bin/env bash
# Memory as a function of window capacity, under a sustained stream (the requirement: "RSS as a function of window
# capacity; it must stay flat under a sustained stream"). For each capacity, examples/loadgen starts
# `thresher serve` itself (its child process) and streams max(MULT x capacity, MIN_SAMPLES) samples
# (d = 2^20, 40 nonzeros each, LIBSVM batches of 10k); this script reads the daemon's VmRSS from
# /proc/PID/status every 0.5 s. Printed per capacity: RSS at 50% and at 100% of the sending time, their
# ratio (flatness: 1.00 = flat), the plateau (median over the second half of the run), the peak (VmHWM),
# and samples/s; then the marginal bytes per window sample (least-squares slope of plateau over capacity)
# against the theoretical size of one windowed sample.
#   bash benches/rss_capacity.sh    [CAPACITIES="10000 100000 300000 1000000"] [MULT=4] [MIN_SAMPLES=6000000]
#                                   [FORMAT=libsvm] [KEEP=dir for the raw "seconds rss_kib" series]
# The Dockerfile runs the daemon with MALLOC_ARENA_MAX=2; export it to measure that setting. The daemon
# inherits the environment, so THRESHER_INGEST_QUEUE_CAPACITY=4 (say) bounds the ingest queue, which under a
# saturating stream holds queue_capacity x 10k samples and otherwise dominates RSS at small windows.
set -euo pipefail
cd "$(dirname "$0")/.."
CAPACITIES="${CAPACITIES:-10000 100000 300000 1000000}"
MULT="${MULT:-4}"; MIN_SAMPLES="${MIN_SAMPLES:-6000000}"; FORMAT="${FORMAT:-libsvm}"
OUT="${KEEP:-$(mktemp -d)}"; mkdir -p "$OUT"
cargo build --release --quiet && cargo build --release --quiet --example loadgen

echo "MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX:-unset} THRESHER_INGEST_QUEUE_CAPACITY=${THRESHER_INGEST_QUEUE_CAPACITY:-1024 (default)} THRESHER_INGEST_QUEUE_SAMPLES=${THRESHER_INGEST_QUEUE_SAMPLES:-640000 (default)} format=$FORMAT raw series in $OUT"
ROWS="$OUT/rows.txt"; : > "$ROWS"
for CAP in $CAPACITIES; do
  SAMPLES=$(( CAP * MULT > MIN_SAMPLES ? CAP * MULT : MIN_SAMPLES ))
  SERIES="$OUT/rss_$CAP.txt"; : > "$SERIES"
  target/release/examples/loadgen --format "$FORMAT" --batch 10000 --samples "$SAMPLES" \
    --capacity "$CAP" > "$OUT/loadgen_$CAP.txt" &
  LOADGEN=$!
  PID=""
  for _ in $(seq 600); do  # loadgen serialises its bodies before it starts the daemon
    PID=$(pgrep -P "$LOADGEN" -f "thresher serve" || true)
    [ -n "$PID" ] && break; sleep 0.1
  done
  [ -n "$PID" ] || { echo "capacity $CAP: the daemon did not start" >&2; exit 1; }
  START=$(date +%s.%N)
  while [ -r "/proc/$PID/status" ] && kill -0 "$LOADGEN" 2>/dev/null; do
    RSS=$(awk '/^VmRSS:/ {print $2}' "/proc/$PID/status" 2>/dev/null || true)
    [ -n "$RSS" ] && echo "$(echo "$(date +%s.%N) - $START" | bc) $RSS" >> "$SERIES"
    sleep 0.5
  done
  wait "$LOADGEN"
  SUMMARY=$(cat "$OUT/loadgen_$CAP.txt")
  field() { echo "$SUMMARY" | tr ' ' '\n' | awk -F= -v k="$1" '$1 == k {print $2}'; }
  SECONDS_SENT=$(field seconds); RATE=$(field samples_per_s); PEAK=$(field rss_peak_mib)
  # 50% / 100%: the sample nearest that fraction of the sending time; plateau: median of t in [T/2, T].
  awk -v T="$SECONDS_SENT" -v cap="$CAP" -v n="$SAMPLES" -v peak="$PEAK" -v rate="$RATE" '
    { t[NR] = $1; r[NR] = $2 / 1024 }
    END {
      d50 = 1e18; d100 = 1e18; m = 0
      for (i = 1; i <= NR; i++) {
        if ((x = t[i] - T / 2) * x < d50) { d50 = x * x; r50 = r[i] }
        if ((x = t[i] - T) * x < d100) { d100 = x * x; r100 = r[i] }
        if (t[i] >= T / 2 && t[i] <= T) h[++m] = r[i]
      }
      # insertion sort of the second half, for its median, min and max
      for (i = 2; i <= m; i++) { v = h[i]; for (j = i - 1; j >= 1 && h[j] > v; j--) h[j + 1] = h[j]; h[j + 1] = v }
      med = m ? (m % 2 ? h[(m + 1) / 2] : (h[m / 2] + h[m / 2 + 1]) / 2) : 0
      printf "%d %d %.1f %.0f %.0f %.3f %.0f %.0f %.0f %.0f %d %.0f\n", cap, n, T, r50, r100, r100 / r50, med, h[1], h[m], peak, rate, NR
    }' "$SERIES" >> "$ROWS"
done

echo
echo "| window capacity | samples sent | seconds | RSS at 50% (MiB) | RSS at 100% (MiB) | 100%/50% | plateau (MiB, median of 2nd half) | 2nd-half min-max (MiB) | peak (MiB) | samples/s |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
awk '{ printf "| %d | %d | %s | %d | %d | %s | %d | %d-%d | %d | %d |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11 }' "$ROWS"
# Marginal cost of one windowed sample: the least-squares slope of the plateau over the capacity.
awk '{ n++; x = $1; y = $7 * 1048576; sx += x; sy += y; sxx += x * x; sxy += x * y }
  END {
    b = (n * sxy - sx * sy) / (n * sxx - sx * sx); a = (sy - b * sx) / n
    printf "\nbytes per window sample (slope of plateau over capacity): %.0f; intercept %.0f MiB\n", b, a / 1048576
  }' "$ROWS"
# One windowed sample (40 nonzeros): indices 40 x 4 B and values 40 x 8 B on the heap (malloc rounds each
# to 16 B plus an 8 B header), the Slot inline in the ring (Sample: two Vec headers 2 x 24, label 8,
# weight Option<f64> 16; sq_norm 8) and its dual alpha 8.
echo "theoretical: 40 x (4 + 8) = 480 B of payload; with the Slot (80 B), alpha (8 B) and malloc rounding (176 + 336 B): 600 B"

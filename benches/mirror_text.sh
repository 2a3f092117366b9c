#!/usr/bin/env bash
# The daemon's learners on real text (logistic, k = 100, lambda 1e-4): each set split 75/25 with a seeded
# shuffle, the training part streamed over HTTP in 1 000-line bodies into one daemon running one learner
# per table of $CONFIG (default: SDIHT, mirror with its defaults, and mirror with the previous defaults:
# hypentropy, support-only memory, 100 000-step horizon, no intercept), SETTLE seconds of passes over the
# window, then each learner's /v1/models/NAME scored on the held-out part with `thresher predict`.
#   bash benches/mirror_text.sh [SET ...]   (default: rotten_tomatoes trump_tweets from data/real)
set -euo pipefail
cd "$(dirname "$0")/.."
REAL=${REAL:-data/real}
SETS=("$@"); [ ${#SETS[@]} -gt 0 ] || SETS=(rotten_tomatoes trump_tweets)
BIN=${BIN:-target/release/thresher}
[ -n "${NOBUILD:-}" ] || cargo build --release --quiet --bin thresher
TMP=$(mktemp -d); trap 'kill $PID 2>/dev/null || true; rm -rf "$TMP"' EXIT
CONFIG=${CONFIG:-$TMP/learners.toml}
if [ ! -f "$CONFIG" ]; then
  cat > "$CONFIG" <<TOML
[server]
listen = "127.0.0.1:0"
[window]
capacity = 100000
[[learner]]
name = "sdiht"
solver = "sdiht"
loss = "logistic"
k = 100
lambda = 1e-4
[[learner]]
name = "mirror"
solver = "mirror"
loss = "logistic"
k = 100
lambda = 1e-4
[[learner]]
name = "mirror_old"
solver = "mirror"
loss = "logistic"
k = 100
lambda = 1e-4
mirror = "hypentropy"
memory = "support"
horizon = 100000
intercept = false
TOML
fi
NAMES=$(grep -A1 '^\[\[learner\]\]' "$CONFIG" | sed -n 's/^name = "\(.*\)"/\1/p')
for set in "${SETS[@]}"; do
  # Seeded 75/25 split.
  awk 'BEGIN{srand(7)} {print rand() "\t" $0}' "$REAL/$set.svm" | sort -k1,1 | cut -f2- > "$TMP/all.svm"
  n=$(wc -l < "$TMP/all.svm"); ntrain=$((n * 3 / 4))
  head -n "$ntrain" "$TMP/all.svm" > "$TMP/train.svm"; tail -n +$((ntrain + 1)) "$TMP/all.svm" > "$TMP/test.svm"
  "$BIN" serve --config "$CONFIG" > "$TMP/log" 2>&1 & PID=$!
  for _ in $(seq 100); do
    port=$(grep -o '127.0.0.1:[0-9]*' "$TMP/log" | head -1 | cut -d: -f2) && [ -n "$port" ] && break; sleep 0.1
  done
  split -l 1000 "$TMP/train.svm" "$TMP/chunk."
  for c in "$TMP"/chunk.*; do
    until curl -sf -XPOST -H 'Content-Type: text/plain' --data-binary @"$c" "localhost:$port/v1/samples" > /dev/null; do sleep 0.2; done
  done
  rm -f "$TMP"/chunk.*
  sleep "${SETTLE:-5}"
  for name in $NAMES; do
    curl -sf "localhost:$port/v1/models/$name" > "$TMP/$name.json"
    acc=$("$BIN" predict --model "$TMP/$name.json" "$TMP/test.svm" 2>&1 >/dev/null | sed -n 's/.*accuracy=\([0-9.]*\).*/\1/p')
    python3 -c "import json,sys; m=json.load(open(sys.argv[1])); c=m['certificate']; print(f\"$set $name held-out {sys.argv[2]} nnz {len(m['support'])} intercept {m.get('intercept',0):.4f} gap {c['gap']:.4g} primal {c['primal']:.4g}\")" "$TMP/$name.json" "$acc"
  done
  kill $PID; wait $PID 2>/dev/null || true
done

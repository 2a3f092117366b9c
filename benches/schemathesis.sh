#!/usr/bin/env bash
# Contract test of the HTTP API against its own OpenAPI document: builds the release binary, starts it
# on 127.0.0.1 with a fresh data directory, and runs schemathesis (every check) against /openapi.json.
# Exits non-zero if any check fails. Usage: benches/schemathesis.sh [extra `schemathesis run` args]
#   VENV (default target/schemathesis-venv), MAX_EXAMPLES (default 100), PORT (default 18787),
#   SEED (default 1), BINARY (default target/release/thresher), SKIP_BUILD (set: use BINARY as built).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-target/schemathesis-venv}
PORT=${PORT:-18787}
MAX_EXAMPLES=${MAX_EXAMPLES:-100}
if [ ! -x "$VENV/bin/schemathesis" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q schemathesis
fi
[ -n "${SKIP_BUILD:-}" ] || cargo build --release --quiet
data=$(mktemp -d)
log="$data/daemon.log"
cleanup() { [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$data"; }
trap cleanup EXIT
"${BINARY:-./target/release/thresher}" serve --listen "127.0.0.1:$PORT" --data-dir "$data/state" >"$log" 2>&1 &
pid=$!
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break
  sleep 0.1
done
# A published model, so the model routes answer 200 as well as 503.
seq 1 300 | awk '{printf "%d %d:1 %d:0.5\n", $1 % 7 - 3, $1 % 5 + 1, $1 % 11 + 7}' |
  curl -sf -H 'Content-Type: text/plain' --data-binary @- "http://127.0.0.1:$PORT/v1/samples" >/dev/null
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && break
  sleep 0.1
done
SCHEMATHESIS_HOOKS=schemathesis_hooks PYTHONPATH=benches \
  "$VENV/bin/schemathesis" run "http://127.0.0.1:$PORT/openapi.json" \
  --checks all --max-examples "$MAX_EXAMPLES" --seed "${SEED:-1}" --no-color "$@"
status=$?
kill -0 "$pid" 2>/dev/null || { echo "daemon died; its log:" >&2; cat "$log" >&2; exit 1; }
exit $status

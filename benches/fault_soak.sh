#!/usr/bin/env bash
# Faults under load: benches/fault_soak.py against the release binary with a fresh data directory.
# Usage: benches/fault_soak.sh [--duration 600] [--seed 1] [--kill-every 40] (see fault_soak.py)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -n "${SKIP_BUILD:-}" ] || cargo build --release --quiet
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/data"
python3 benches/fault_soak.py --data-dir "$work/data" "$@"

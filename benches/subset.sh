#!/usr/bin/env bash
# Best subset (l0 + l1 + l2): the paper's Sec. 5.1 protocol, thresher subset / dual-ast / diht side by side
# with abess and L0Learn (when pip can install it for this Python), all in one run.
#   bash benches/subset.sh                  (COPIES=10 by default; NS, SNRS, P, COPIES override)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x bench-venv/bin/python ] || python3 -m venv bench-venv
bench-venv/bin/python -c "import numpy, abess" 2>/dev/null || bench-venv/bin/pip install -q numpy abess
# L0Learn ships wheels for CPython <= 3.10 only and no source distribution: skip it when pip cannot.
bench-venv/bin/python -c "import l0learn" 2>/dev/null || bench-venv/bin/pip install -q l0learn \
  || echo "warning: l0learn is not installable for $(bench-venv/bin/python -V); running without it" >&2
cargo build --release --quiet
bench-venv/bin/python benches/subset.py

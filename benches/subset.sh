#!/usr/bin/env bash
# Best subset (l0 + l1 + l2): the paper's Sec. 5.1 protocol, thresher subset / dual-ast / diht side by side
# with abess and L0Learn, all in one run.
#   bash benches/subset.sh                  (COPIES=10 by default; NS, SNRS, P, COPIES override)
# L0Learn ships wheels for CPython <= 3.10 only (no source distribution). When python3 is newer, the
# harness runs in a virtualenv on CPython 3.10 (PY310, default: pyenv's 3.10.13 when present), where
# `pip install l0learn==0.4.3 "numpy<2"` works; without one it runs without L0Learn and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=bench-venv
if ! python3 -c 'import sys; sys.exit(sys.version_info >= (3, 11))'; then
  PY310="${PY310:-$(command -v pyenv >/dev/null && echo "$(pyenv root)/versions/3.10.13/bin/python3.10" || true)}"
  if [ -n "$PY310" ] && [ -x "$PY310" ]; then
    VENV=bench-venv-py310
    [ -x "$VENV/bin/python" ] || "$PY310" -m venv "$VENV"
  else
    echo "warning: no CPython 3.10 (set PY310=/path/to/python3.10): running without L0Learn" >&2
  fi
fi
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -c "import numpy, abess" 2>/dev/null || "$VENV/bin/python" -m pip install -q "numpy<2" abess
"$VENV/bin/python" -c "import l0learn" 2>/dev/null || "$VENV/bin/python" -m pip install -q l0learn==0.4.3 "numpy<2" \
  || echo "warning: l0learn is not installable for $("$VENV/bin/python" -V); running without it" >&2
cargo build --release --quiet
"$VENV/bin/python" benches/subset.py

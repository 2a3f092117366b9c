#!/usr/bin/env bash
# DIHT paper Sec. 5.1 reproduction, thresher (DIHT, SDIHT, IHT, HTP) side by side with abess.
#   bash benches/paper_5_1.sh [COPIES] [VALIDATION_COPIES]      (defaults 20 and 8; from the project root)
# 1. the Rust example generates every copy with thresher::synth::paper_ridge, writes the test copies to
#    data/paper_5_1/*.svm (git-ignored), picks lambda on the validation copies and fits the test copies;
# 2. abess (PyPI, into bench-venv/, git-ignored) fits the same files, with and without intercept;
# 3. the table (PSSR / median relative error per N and solver) is printed and saved as table.md.
set -euo pipefail
cd "$(dirname "$0")/.."
COPIES="${1:-20}"; VALIDATION="${2:-8}"; OUT=data/paper_5_1
[ -x bench-venv/bin/python ] || python3 -m venv bench-venv
bench-venv/bin/python -c "import abess" 2>/dev/null || bench-venv/bin/pip install -q abess
rm -rf "$OUT"; mkdir -p "$OUT"
cargo run --release --quiet --example paper_5_1 -- --copies "$COPIES" --validation "$VALIDATION" --out "$OUT"
bench-venv/bin/python benches/peers/paper_5_1.py fit "$OUT"
bench-venv/bin/python benches/peers/paper_5_1.py table "$OUT" | tee "$OUT/table.md"
echo "abess $(bench-venv/bin/python -c 'import abess; print(abess.__version__)'); $(date -u +%F); $(nproc) cores" | tee -a "$OUT/table.md"

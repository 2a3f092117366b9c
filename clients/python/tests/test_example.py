"""The notebook-style example runs end to end (its own assertions compare the two models)."""

import os
import pathlib
import subprocess
import sys

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "compare_liblinear.py"


def test_compare_liblinear_example():
    env = dict(os.environ)
    folds = env.get("THRESHER_EXAMPLE_FOLDS", "3")
    r = subprocess.run([sys.executable, "-W", "error::FutureWarning", str(EXAMPLE), "--folds", folds],
                       capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("rotten_tomatoes: 12808 samples")
    assert any(l.startswith("thresher") and "accuracy" in l for l in lines)
    assert any(l.startswith("liblinear") and "accuracy" in l for l in lines)
    print(r.stdout)

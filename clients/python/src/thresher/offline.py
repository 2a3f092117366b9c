"""``thresher fit`` from Python: find the binary, write the samples as LIBSVM (JSON lines for named features)
into a temporary file, run the fit and read the model it prints."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import tempfile
from typing import Any, Dict, List, Optional, Sequence

from . import _encode
from .errors import FitError


def find_binary(explicit: Optional[str] = None) -> str:
    """``explicit``, else ``$THRESHER_BIN``, else ``thresher`` on ``PATH``."""
    for candidate in (explicit, os.environ.get("THRESHER_BIN")):
        if candidate:
            if shutil.which(candidate) is None:
                raise FileNotFoundError("thresher binary %r is not an executable file" % candidate)
            return candidate
    found = shutil.which("thresher")
    if found is None:
        raise FileNotFoundError(
            "no thresher binary: pass thresher_bin=..., set THRESHER_BIN or put thresher on PATH "
            "(cargo install --path . or cargo build --release -> target/release/thresher)")
    return found


@functools.lru_cache(maxsize=8)
def _fit_flags(binary: str) -> frozenset:
    """The long options ``binary fit`` knows (builds differ, e.g. in ``--no-intercept``)."""
    out = subprocess.run([binary, "fit", "--help"], capture_output=True, text=True)
    return frozenset(re.findall(r"--[a-z0-9-]+", out.stdout))


_LINE = re.compile(r":(\d+): ")


def fit(X: Any, y: Sequence[float], *, loss: str, k: int, lam: Any, weights: Optional[Sequence[float]] = None,
        intercept: bool = True, solver: str = "auto", tol: float = 1e-6, epochs: int = 1000,
        seed: int = 0, extra_args: Sequence[str] = (), binary: Optional[str] = None) -> Dict[str, Any]:
    """Runs ``thresher fit`` on ``(X, y)`` and returns the model (``thresher-model/1`` JSON as a dict).

    ``lam`` is a number or ``"auto"``. ``intercept=False`` passes ``--no-intercept`` when the binary knows
    it (where the intercept is on by default), else leaves ``--intercept`` out."""
    binary = find_binary(binary)
    content_type, it = _encode.lines(X, y, weights)
    fmt = "libsvm" if content_type == _encode.LIBSVM else "jsonl"
    with tempfile.TemporaryDirectory(prefix="thresher-fit-") as d:
        data = os.path.join(d, "train." + ("svm" if fmt == "libsvm" else "jsonl"))
        with open(data, "wb") as f:
            f.writelines(it)
        args: List[str] = [binary, "fit", data, "--format", fmt, "--loss", loss, "-k", str(int(k)),
                           "--lambda", lam if isinstance(lam, str) else _encode.num(lam),
                           "--solver", solver, "--tol", _encode.num(tol), "--epochs", str(int(epochs)),
                           "--seed", str(int(seed))]
        if intercept:
            args.append("--intercept")
        elif "--no-intercept" in _fit_flags(binary):
            args.append("--no-intercept")
        args.extend(extra_args)
        r = subprocess.run(args, capture_output=True, text=True)
        if r.returncode != 0:
            msg = r.stderr.strip().split("\n\n")[0].removeprefix("Error: ").strip()
            m = _LINE.search(msg)
            raise FitError("thresher fit failed: " + msg.replace(data, "DATA"),
                           line=int(m.group(1)) if m and data in msg else None,
                           row=int(m.group(1)) - 1 if m and data in msg else None)
        return json.loads(r.stdout)

"""Samples as the daemon and ``thresher fit`` read them, one ``bytes`` line per sample.

Numeric features become LIBSVM lines (``text/plain``, the daemon's cheapest format to write and as
cheap as any to parse; a weight as SVMlight's ``cost:c`` token after the label); named features (lists
of dicts, pandas frames) become JSON lines (``application/x-ndjson``). Feature ``j`` of an array
or matrix is index ``j`` (0-based; the daemon and ``fit`` keep indices exactly as given). Zeros are left
out; a missing named value (``None``, NaN) is left out like a zero. Numbers are written with Python's
shortest round-trip ``repr``, so the daemon reads back the exact same ``float64``.
"""

from __future__ import annotations

import json
import math
from typing import Any, Iterator, Optional, Sequence, Tuple

LIBSVM = "text/plain"
NDJSON = "application/x-ndjson"


def num(v: float) -> str:
    """The shortest text that reads back as ``v`` (integers without a point)."""
    v = float(v)
    if v.is_integer() and abs(v) < 1e15:
        return "%d" % v
    return repr(v)


def _is_scipy_sparse(X: Any) -> bool:
    mod = type(X).__module__
    return mod.startswith("scipy.sparse") and hasattr(X, "tocsr")


def _is_frame(X: Any) -> bool:
    return type(X).__name__ == "DataFrame" and type(X).__module__.startswith("pandas")


def _tolist(a: Any) -> list:
    return a.tolist() if hasattr(a, "tolist") else list(a)


def kind(X: Any) -> str:
    """``"sparse"`` (SciPy), ``"frame"`` (pandas), ``"named"`` (list of dicts) or ``"dense"``."""
    if _is_scipy_sparse(X):
        return "sparse"
    if _is_frame(X):
        return "frame"
    if isinstance(X, dict):
        raise TypeError("X is one dict: pass a list of dicts, one per sample")
    if isinstance(X, (list, tuple)) and len(X) > 0 and isinstance(X[0], dict):
        return "named"
    return "dense"


def n_rows(X: Any) -> int:
    if _is_scipy_sparse(X) or _is_frame(X):
        return X.shape[0]
    return len(X)


def rows(X: Any) -> Iterator[Tuple[Optional[list], Optional[list], Optional[dict]]]:
    """Each sample as ``(indices, values, None)`` or ``(None, None, {name: value})``, zeros left out."""
    k = kind(X)
    if k == "sparse":
        A = X.tocsr()
        if not A.has_sorted_indices:
            A = A.copy()
            A.sort_indices()
        indptr, ind, val = A.indptr.tolist(), A.indices, A.data
        for i in range(A.shape[0]):
            s, e = indptr[i], indptr[i + 1]
            idx, vals = ind[s:e].tolist(), val[s:e].tolist()
            if 0.0 in vals:
                keep = [j for j, v in enumerate(vals) if v != 0.0]
                idx, vals = [idx[j] for j in keep], [vals[j] for j in keep]
            yield idx, vals, None
    elif k == "frame":
        names = [str(c) for c in X.columns]
        for values in X.itertuples(index=False, name=None):
            yield None, None, _named(zip(names, values))
    elif k == "named":
        for d in X:
            if not isinstance(d, dict):
                raise TypeError("a list of dicts must hold only dicts, found %r" % type(d).__name__)
            if d and all(isinstance(key, int) for key in d):
                idx = sorted(key for key, v in d.items() if v)
                yield idx, [float(d[j]) for j in idx], None
            else:
                yield None, None, _named(d.items())
    else:
        try:
            import numpy as np
        except ImportError:  # lists of lists without NumPy
            for r in X:
                r = list(r)
                idx = [j for j, v in enumerate(r) if v != 0]
                yield idx, [float(r[j]) for j in idx], None
            return
        A = np.asarray(X, dtype=np.float64)
        if A.ndim != 2:
            raise ValueError("X must be 2-D (samples x features), got shape %r" % (A.shape,))
        for r in A:
            idx = np.flatnonzero(r)
            yield idx.tolist(), r[idx].tolist(), None


def _named(items) -> dict:
    out = {}
    for name, v in items:
        if v is None:
            continue
        v = float(v)
        if math.isnan(v) or v == 0.0:
            continue
        out[str(name)] = v
    return out


def lines(X: Any, y: Optional[Sequence[float]] = None, weights: Optional[Sequence[float]] = None,
          predict: bool = False, ids: Optional[Sequence[str]] = None) -> Tuple[str, Iterator[bytes]]:
    """The content type and one line per sample. Without ``y`` (prediction), LIBSVM lines carry the
    label 0 (the daemon ignores it) and JSON lines none. With ``ids`` (a prediction kept for a late
    label), JSON lines each carrying its ``id``."""
    n = n_rows(X)
    if ids is not None:
        ids = [str(i) for i in ids]
        if len(ids) != n:
            raise ValueError("X has %d samples but ids has %d entries" % (n, len(ids)))
        return NDJSON, _ndjson(rows(X), y, weights, ids)
    if y is not None:
        y = _tolist(y)
        if len(y) != n:
            raise ValueError("X has %d samples but y has %d labels" % (n, len(y)))
    if weights is not None:
        weights = _tolist(weights)
        if len(weights) != n:
            raise ValueError("X has %d samples but weights has %d entries" % (n, len(weights)))
    named = kind(X) in ("frame", "named")
    if not named:
        return LIBSVM, _libsvm(rows(X), y, weights)
    return NDJSON, _ndjson(rows(X), y, weights)


def _libsvm(it, y, weights) -> Iterator[bytes]:
    for i, (idx, vals, names) in enumerate(it):
        if names is not None:
            raise TypeError("named and numeric samples cannot mix in one call")
        lab = num(y[i]) if y is not None else "0"
        if weights is not None:
            c = float(weights[i])
            if not math.isfinite(c):
                from .errors import InvalidSample
                raise InvalidSample("sample has a non-finite weight", row=i)
            lab += " cost:" + num(c)
        pairs = " ".join(["%d:%s" % (j, num(v)) for j, v in zip(idx, vals)])
        yield (lab + " " + pairs + "\n").encode() if pairs else (lab + "\n").encode()


def _ndjson(it, y, weights, ids=None) -> Iterator[bytes]:
    for i, (idx, vals, names) in enumerate(it):
        o: dict = {}
        if ids is not None:
            o["id"] = ids[i]
        if y is not None:
            o["label"] = float(y[i])
        if names is not None:
            o["features"] = names
        else:
            o["indices"] = idx
            o["values"] = vals
        if weights is not None:
            o["weight"] = float(weights[i])
        try:
            text = json.dumps(o, allow_nan=False, separators=(",", ":"))
        except ValueError:
            from .errors import InvalidSample
            raise InvalidSample("sample has a non-finite label, value or weight", row=i) from None
        yield (text + "\n").encode()

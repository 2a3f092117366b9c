"""``Client``: the daemon's HTTP API from Python, over one kept-alive connection (standard library only).

``learn`` cuts the samples into batches under ``batch_size`` samples and ``max_body_bytes`` bytes (the
daemon's ``server.body_limit_bytes`` is 32 MiB by default), halves a batch the daemon still finds too
large (413), and waits out a full ingest queue (503 + ``Retry-After``) for up to ``retry_timeout``
seconds. Every other refusal raises the matching :mod:`thresher.errors` class with the daemon's message,
the line of the request and the row of the caller's data.
"""

from __future__ import annotations

import http.client
import json
import ssl
import time
import urllib.parse
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import _encode
from .errors import ConnectionFailed, ThresherError, Unavailable, from_response

_RETRYABLE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


class Client:
    """A connection to ``thresher serve`` at ``url`` (``http://host:port`` or ``https://...``), with
    ``token`` sent as ``Authorization: Bearer TOKEN`` when given. Not shared between threads."""

    def __init__(self, url: str = "http://127.0.0.1:8080", token: Optional[str] = None, *,
                 timeout: float = 60.0, batch_size: int = 10_000, max_body_bytes: int = 8 << 20,
                 retry_timeout: float = 120.0, ssl_context: Optional[ssl.SSLContext] = None):
        u = urllib.parse.urlsplit(url if "://" in url else "http://" + url)
        if u.scheme not in ("http", "https"):
            raise ValueError("url must be http:// or https://, got %r" % url)
        if batch_size < 1 or max_body_bytes < 1:
            raise ValueError("batch_size and max_body_bytes must be positive")
        self.url = url
        self._scheme, self._host, self._port = u.scheme, u.hostname or "127.0.0.1", u.port
        self._prefix = u.path.rstrip("/")
        self._token = token
        self.timeout = timeout
        self.batch_size = batch_size
        self.max_body_bytes = max_body_bytes
        self.retry_timeout = retry_timeout
        self._ssl = ssl_context
        self._conn: Optional[http.client.HTTPConnection] = None

    # -- transport -------------------------------------------------------------------------------

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            if self._scheme == "https":
                self._conn = http.client.HTTPSConnection(self._host, self._port, timeout=self.timeout,
                                                         context=self._ssl)
            else:
                self._conn = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
        return self._conn

    def _raw(self, method: str, path: str, body: Optional[bytes] = None,
             content_type: Optional[str] = None) -> Tuple[int, Dict[str, str], bytes]:
        """One request; a kept-alive connection the daemon closed meanwhile is reopened once (the
        daemon closes idle connections without reading anything from them)."""
        headers = {}
        if self._token is not None:
            headers["Authorization"] = "Bearer " + self._token
        if content_type is not None:
            headers["Content-Type"] = content_type
        for attempt in (0, 1):
            reused = self._conn is not None
            conn = self._connection()
            try:
                conn.request(method, self._prefix + path, body=body, headers=headers)
                r = conn.getresponse()
                data = r.read()
                if r.getheader("Connection", "").lower() == "close":
                    self.close()
                return r.status, {k.lower(): v for k, v in r.getheaders()}, data
            except _RETRYABLE as e:
                self.close()
                if not reused or attempt == 1:
                    raise ConnectionFailed("connection to %s broke: %s" % (self.url, e)) from e
            except (OSError, http.client.HTTPException) as e:
                self.close()
                raise ConnectionFailed("cannot reach %s: %s" % (self.url, e)) from e
        raise AssertionError("unreachable")

    def _request(self, method: str, path: str, body: Optional[bytes] = None,
                 content_type: Optional[str] = None, row0: int = 0, accepted: int = 0) -> Any:
        """A request whose success is 2xx JSON; anything else raises its typed error."""
        status, headers, data = self._raw(method, path, body, content_type)
        if 200 <= status < 300:
            if headers.get("content-type", "").startswith("application/json"):
                return json.loads(data)
            return data.decode()
        raise _error(status, headers, data, row0, accepted)

    # -- ingest ----------------------------------------------------------------------------------

    def learn(self, X: Any, y: Sequence[float], weights: Optional[Sequence[float]] = None) -> int:
        """Sends samples ``X`` with labels ``y`` (and optional per-sample ``weights``) to
        ``POST /v1/samples``; returns how many the daemon accepted.

        ``X``: a 2-D NumPy array (or list of lists), a SciPy sparse matrix, a pandas DataFrame (its column
        names become feature names) or a list of dicts (``{"name": value}``, or ``{index: value}``).
        Classification losses need labels of exactly -1 / +1. Each batch is all or nothing; a refused
        batch raises with ``accepted`` = what earlier batches delivered and ``row`` = the refused row."""
        content_type, it = _encode.lines(X, y, weights)
        accepted = 0
        for row0, batch in self._batches(it):
            accepted += self._post_samples(batch, content_type, row0, accepted)
        return accepted

    def _batches(self, it):
        batch: List[bytes] = []
        size, row0 = 0, 0
        for line in it:
            if batch and (len(batch) >= self.batch_size or size + len(line) > self.max_body_bytes):
                yield row0, batch
                row0 += len(batch)
                batch, size = [], 0
            batch.append(line)
            size += len(line)
        if batch:
            yield row0, batch

    def _post_samples(self, batch: List[bytes], content_type: str, row0: int, accepted: int) -> int:
        body = b"".join(batch)
        deadline = time.monotonic() + self.retry_timeout
        while True:
            status, headers, data = self._raw("POST", "/v1/samples", body, content_type)
            if status == 202:
                return int(json.loads(data)["accepted"])
            if status == 413 and len(batch) > 1:
                half = len(batch) // 2
                n = self._post_samples(batch[:half], content_type, row0, accepted)
                return n + self._post_samples(batch[half:], content_type, row0 + half, accepted + n)
            wait = _retry_after(headers)
            if status == 503 and wait is not None and time.monotonic() + wait <= deadline:
                time.sleep(wait)
                continue
            raise _error(status, headers, data, row0, accepted)

    # -- models ----------------------------------------------------------------------------------

    def model(self, learner: Optional[str] = None) -> dict:
        """The primary learner's published model (``GET /v1/model``), or ``learner``'s: the
        ``thresher-model/1`` fields (``support``, ``weights``, ``intercept``, ``certificate``...) plus the
        daemon's (``version``, ``samples_seen``, ``feature_names`` with named features...)."""
        if learner is None:
            return self._request("GET", "/v1/model")
        return self._request("GET", "/v1/models/" + urllib.parse.quote(learner, safe=""))

    def models(self) -> List[dict]:
        """Every learner's model, in configuration order (``version`` 0 and no model before its first)."""
        return self._request("GET", "/v1/models")["models"]

    def predict(self, X: Any, learner: Optional[str] = None, ids: Optional[Sequence[str]] = None):
        """The model's predictions for ``X`` (same kinds as :meth:`learn`), from ``POST /v1/predict``:
        the score ``w.x + b`` for the squared loss, the class -1 / +1 for a classification loss; a NumPy
        array when NumPy is installed, else a list. Unknown feature names count as zeros. With ``ids``
        (one string per sample), the daemon keeps each sample and the scores it served until
        :meth:`labels` gives its label (``[labels]``, a late label)."""
        content_type, it = _encode.lines(X, predict=True, ids=ids)
        path = "/v1/predict"
        if learner is not None:
            path += "?learner=" + urllib.parse.quote(learner, safe="")
        out: List[float] = []
        for row0, batch in self._batches(it):
            r = self._request("POST", path, b"".join(batch), content_type, row0=row0)
            out.extend(r["predictions"])
        try:
            import numpy as np
        except ImportError:
            return out
        return np.asarray(out, dtype=np.float64)

    def labels(self, ids: Sequence[str], y: Sequence[float],
               weights: Optional[Sequence[float]] = None) -> List[str]:
        """Late labels (``POST /v1/labels``): the label of each sample predicted with ``ids``; each
        joined sample is learned, charged the loss of the score served for it. Returns each item's
        status in order: ``joined``, ``unknown`` (never predicted with that id, or labelled already),
        ``expired``, ``evicted`` or ``duplicate``. Sent in batches of ``batch_size`` items."""
        ids, y = [str(i) for i in ids], _encode._tolist(y)
        if len(ids) != len(y):
            raise ValueError("%d ids but %d labels" % (len(ids), len(y)))
        if weights is not None:
            weights = _encode._tolist(weights)
            if len(weights) != len(ids):
                raise ValueError("%d ids but %d weights" % (len(ids), len(weights)))
        out: List[str] = []
        for start in range(0, len(ids), self.batch_size):
            items = []
            for i in range(start, min(start + self.batch_size, len(ids))):
                o = {"id": ids[i], "label": float(y[i])}
                if weights is not None:
                    o["weight"] = float(weights[i])
                items.append(o)
            body = json.dumps(items, allow_nan=False).encode()
            r = self._request("POST", "/v1/labels", body, "application/json", row0=start)
            out.extend(item["status"] for item in r["results"])
        return out

    def history(self, learner: Optional[str] = None, since: Optional[int] = None) -> dict:
        """The learner's last published snapshots' scalars, oldest first (``GET /v1/history``)."""
        q = {}
        if learner is not None:
            q["learner"] = learner
        if since is not None:
            q["since"] = str(since)
        path = "/v1/history" + ("?" + urllib.parse.urlencode(q) if q else "")
        return self._request("GET", path)

    def metrics(self) -> Dict[str, List[Tuple[Dict[str, str], float]]]:
        """``GET /metrics`` parsed: metric name -> ``[(labels, value), ...]``."""
        return parse_prometheus(self.metrics_text())

    def metrics_text(self) -> str:
        """``GET /metrics`` as the Prometheus text it is."""
        return self._request("GET", "/metrics")

    def healthy(self) -> bool:
        """``GET /healthz`` answered 200."""
        try:
            return self._raw("GET", "/healthz")[0] == 200
        except ConnectionFailed:
            return False

    def ready(self) -> bool:
        """``GET /readyz``: a model is published (or restored)."""
        return self._raw("GET", "/readyz")[0] == 200

    def wait_model(self, samples: int = 0, timeout: float = 60.0, learner: Optional[str] = None,
                   gap: Optional[float] = None) -> dict:
        """Polls until the learner's model has seen at least ``samples`` samples (and, with ``gap``,
        certifies a gap at most ``gap``); returns it. Raises ``TimeoutError`` after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        last = None
        while True:
            try:
                last = self.model(learner)
                if last.get("samples_seen", 0) >= samples and (
                        gap is None or last["certificate"]["gap"] <= gap):
                    return last
            except Unavailable:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("no model with %d samples%s within %.0f s (last: %s)" % (
                    samples, "" if gap is None else " and gap <= %g" % gap, timeout,
                    None if last is None else {k: last.get(k) for k in ("samples_seen", "certificate")}))
            time.sleep(0.05)


def _retry_after(headers: Dict[str, str]) -> Optional[float]:
    v = headers.get("retry-after")
    if v is None:
        return None
    try:
        return max(0.0, float(v))
    except ValueError:
        return None


def _error(status: int, headers: Dict[str, str], data: bytes, row0: int, accepted: int) -> ThresherError:
    message, line = data.decode(errors="replace").strip() or "HTTP %d" % status, None
    try:
        body = json.loads(data)
        if isinstance(body, dict):
            message = str(body.get("error", message))
            line = body.get("line")
    except ValueError:
        pass
    row = row0 + line - 1 if isinstance(line, int) else None
    return from_response(status, message, line, row=row, accepted=accepted,
                         retry_after=_retry_after(headers))


def parse_prometheus(text: str) -> Dict[str, List[Tuple[Dict[str, str], float]]]:
    """Prometheus text exposition (0.0.4) -> name -> ``[(labels, value), ...]`` (comments skipped)."""
    out: Dict[str, List[Tuple[Dict[str, str], float]]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        labels: Dict[str, str] = {}
        if "{" in line:
            name, rest = line.split("{", 1)
            i = 0
            while i < len(rest) and rest[i] != "}":
                eq = rest.index("=", i)
                key = rest[i:eq].strip().lstrip(",").strip()
                j, val = eq + 2, []
                while rest[j] != '"':
                    if rest[j] == "\\":
                        j += 1
                        val.append({"n": "\n"}.get(rest[j], rest[j]))
                    else:
                        val.append(rest[j])
                    j += 1
                labels[key] = "".join(val)
                i = j + 1
                while i < len(rest) and rest[i] in ", ":
                    i += 1
            value = rest[i + 1:].split()[0]
        else:
            name, value = line.split()[:2]
        out.setdefault(name.strip(), []).append((labels, float(value)))
    return out

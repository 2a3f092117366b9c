"""Typed errors: one class per answer of the daemon (or failure of ``thresher fit``), each carrying the
daemon's message and, for an invalid sample, its line in the request and its row in the caller's data."""

from __future__ import annotations

from typing import Optional


class ThresherError(Exception):
    """Any error the daemon answered (``status`` set) or the client met.

    ``message`` is the daemon's ``error`` text; ``line`` the 1-based line (or array position) of the
    request body it names; ``row`` the 0-based row of the caller's data that line came from;
    ``accepted`` how many samples earlier batches of the same ``learn`` call had already delivered.
    """

    def __init__(self, message: str, status: Optional[int] = None, line: Optional[int] = None,
                 row: Optional[int] = None, accepted: int = 0, retry_after: Optional[float] = None):
        self.message = message
        self.status = status
        self.line = line
        self.row = row
        self.accepted = accepted
        self.retry_after = retry_after
        super().__init__(self._text())

    def _text(self) -> str:
        where = []
        if self.status is not None:
            where.append(f"HTTP {self.status}")
        if self.row is not None:
            where.append(f"row {self.row}")
        if self.line is not None:
            where.append(f"line {self.line}")
        return f"{self.message} ({', '.join(where)})" if where else self.message


class InvalidSample(ThresherError, ValueError):
    """400 naming a line: a sample the daemon refused. Nothing of that request entered."""


class BadRequest(ThresherError, ValueError):
    """400 without a line: an unreadable body or a bad query parameter."""


class Unauthorized(ThresherError):
    """401: no bearer token, or one the daemon does not know."""


class Forbidden(ThresherError):
    """403: the token lacks the scope (``read`` / ``write``) the route needs."""


class NotFound(ThresherError, LookupError):
    """404: no such learner (or route)."""


class PayloadTooLarge(ThresherError):
    """413: one sample's body is over ``server.body_limit_bytes`` (batches are split before this)."""


class UnsupportedMediaType(ThresherError):
    """415: the content type is not one the daemon reads."""


class Unavailable(ThresherError):
    """503: the ingest queue stayed full past the client's ``retry_timeout``, the daemon is shutting
    down, or no model is published yet. ``retry_after`` holds the daemon's ``Retry-After``, if any."""


class ConnectionFailed(ThresherError, ConnectionError):
    """The daemon could not be reached, or the connection broke."""


class FitError(ThresherError, ValueError):
    """``thresher fit`` failed: its message, and the data file's line when it names one."""


_BY_STATUS = {401: Unauthorized, 403: Forbidden, 404: NotFound, 413: PayloadTooLarge,
              415: UnsupportedMediaType, 503: Unavailable}


def from_response(status: int, message: str, line: Optional[int], **kw) -> ThresherError:
    """The error for an answer of the daemon."""
    if status == 400:
        cls = InvalidSample if line is not None else BadRequest
    else:
        cls = _BY_STATUS.get(status, ThresherError)
    return cls(message, status=status, line=line, **kw)

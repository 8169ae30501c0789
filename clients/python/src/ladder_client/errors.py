"""Exceptions raised by the client."""

from __future__ import annotations

from typing import Any, Mapping, Optional


class LadderError(Exception):
    """An HTTP answer other than 2xx from the service.

    Carries the HTTP ``status``, the service's ``error`` text (the ``error`` field of its
    ``{"error": "..."}`` body, or the raw body when it is not such JSON), the parsed ``body``
    and, for a 429 or a 503, ``retry_after`` in seconds when the service sent ``Retry-After``.
    """

    def __init__(
        self,
        status: int,
        error: str,
        *,
        method: str = "",
        path: str = "",
        body: Any = None,
        headers: Optional[Mapping[str, str]] = None,
    ) -> None:
        self.status = status
        self.error = error
        self.method = method
        self.path = path
        self.body = body
        self.headers = dict(headers or {})
        retry = self.headers.get("retry-after")
        self.retry_after: Optional[int] = int(retry) if retry and retry.isdigit() else None
        where = f"{method} {path}: " if method else ""
        super().__init__(f"{where}HTTP {status}: {error}")


class AmountError(ValueError):
    """A price or size that gives no valid signed amounts (nothing is rounded).

    ``kind`` names the cause as the Rust client's error variants do: ``Malformed``,
    ``TooPrecise``, ``TooLarge``, ``OutOfRange``, ``PriceTicksOutOfRange``, ``ZeroShares``,
    ``SharesNotWhole``, ``Overflow``, ``PriceOutOfRange``, ``OffTick``.
    """

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


class StreamError(Exception):
    """A WebSocket stream failed: the service sent an ``{"error": ...}`` frame and closed, or
    a market book could not be repaired."""


class StreamClosed(StreamError):
    """The WebSocket connection closed."""

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


class BundlerError(Exception):
    """A JSON-RPC error answered by the service's bundler (``POST /bundler``, HTTP 200).

    Carries the JSON-RPC ``code`` (``-32602`` malformed parameters, whose ``message`` names the
    field; ``-32500`` a refused operation, e.g. ``AA24 signature error``, ``AA25 invalid account
    nonce``, ``AA20 account not deployed``, ``nothing to redeem``, ``market not resolved``;
    ``-32601`` an unknown method; ``-32600`` an invalid request), its ``message``, its ``data``
    (``{"expectedNonce": "0x…"}`` with ``AA25``) and the ``method`` called.
    """

    def __init__(self, code: int, message: str, *, data: Any = None, method: str = "") -> None:
        self.code = code
        self.message = message
        self.data = data
        self.method = method
        where = f"{method}: " if method else ""
        super().__init__(f"{where}JSON-RPC error {code}: {message}")

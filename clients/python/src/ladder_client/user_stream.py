"""``/ws/user``: the authenticated feed of one key's orders and trades (API.md §16,
CONTRACT §14).

The first message carries the L2 HMAC of ``timestamp + "GET" + "/ws/user"``; events then
flow with no acknowledgement: ``order`` events (``type`` PLACEMENT, UPDATE or CANCELLATION,
with the OpenOrder fields) and ``trade`` events (the Trade fields, at the match and at every
status change). ``seq`` rises by one per event on the connection.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator, Optional, Sequence

from .auth import Credentials, ws_user_subscribe
from ._ws import EventSocket
from .errors import StreamClosed, StreamError


class UserStream:
    """A ``/ws/user`` subscription. Use as a context manager or call :meth:`connect`.

    ``markets`` limits the events to those condition ids (empty: every market);
    ``cancel_on_disconnect`` makes the connection a dead-man switch: when it ends, the service
    cancels every open order of the key's address.
    """

    def __init__(
        self,
        ws_base_url: str,
        credentials: Credentials,
        markets: Sequence[str] = (),
        *,
        cancel_on_disconnect: bool = False,
    ) -> None:
        self.url = ws_base_url.rstrip("/") + "/ws/user"
        self.credentials = credentials
        self.markets = list(markets)
        self.cancel_on_disconnect = cancel_on_disconnect
        self._socket = EventSocket(self.url)
        #: The ``seq`` of the last event received (0 before any).
        self.last_seq = 0
        #: Events found missing (a jump in ``seq``); the user feed has no snapshot to repair from.
        self.missed = 0

    def connect(self) -> "UserStream":
        """Opens the connection and subscribes."""
        self._socket.open()
        self._socket.send_json(
            ws_user_subscribe(self.credentials, self.markets, cancel_on_disconnect=self.cancel_on_disconnect)
        )
        return self

    def recv(self, timeout: Optional[float] = None) -> dict[str, Any]:
        """The next event; ``TimeoutError`` after ``timeout`` seconds without one;
        :class:`StreamError` when the service refused the subscription or closed."""
        event = self._socket.next_event(timeout)
        if "error" in event and "event_type" not in event:
            raise StreamError(f"/ws/user: {event['error']}")
        seq = event.get("seq")
        if isinstance(seq, int):
            if self.last_seq and seq != self.last_seq + 1:
                self.missed += max(0, seq - self.last_seq - 1)
            self.last_seq = seq
        return event

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 10.0) -> dict[str, Any]:
        """Reads events until ``predicate(event)`` is true and returns that event; raises
        ``TimeoutError`` when ``timeout`` seconds pass first."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no matching /ws/user event in time")
            event = self.recv(remaining)
            if predicate(event):
                return event

    def ping(self) -> None:
        """Sends the text ``PING`` (the service answers ``PONG``, which :meth:`recv` skips)."""
        self._socket.send_text("PING")

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while True:
            try:
                yield self.recv()
            except StreamClosed:
                return

    def close(self) -> None:
        """Closes the connection (with ``cancel_on_disconnect``, the service then cancels)."""
        self._socket.close()

    def __enter__(self) -> "UserStream":
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

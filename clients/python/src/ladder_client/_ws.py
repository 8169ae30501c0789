"""The WebSocket plumbing shared by the two streams: connect, send JSON, and read events one at
a time (a frame holds one event object or an array of them; text ``PONG`` answers ``PING``)."""

from __future__ import annotations

import json
import time
from collections import deque
from typing import Any, Iterator, Optional

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from .errors import StreamClosed, StreamError


class EventSocket:
    """One WebSocket connection that yields decoded JSON events."""

    def __init__(self, url: str, *, open_timeout: float = 10.0) -> None:
        self.url = url
        self._open_timeout = open_timeout
        self._ws: Optional[ClientConnection] = None
        self._pending: deque[dict[str, Any]] = deque()
        self.pongs = 0

    @property
    def connected(self) -> bool:
        """True while the connection is open."""
        return self._ws is not None

    def open(self) -> None:
        """Opens the connection (no proxy: the service is reached directly)."""
        self._ws = connect(
            self.url,
            open_timeout=self._open_timeout,
            proxy=None,
            compression=None,
            max_size=None,
        ).__enter__()

    def send_json(self, message: Any) -> None:
        """Sends one JSON text message."""
        self._require().send(json.dumps(message, separators=(",", ":")))

    def send_text(self, text: str) -> None:
        """Sends one text message (such as ``PING``)."""
        self._require().send(text)

    def _require(self) -> ClientConnection:
        if self._ws is None:
            raise StreamError("not connected")
        return self._ws

    def next_event(self, timeout: Optional[float]) -> dict[str, Any]:
        """The next event object (an ``{"error": ...}`` frame is returned like any other:
        the stream classes above raise :class:`StreamError` for it). Raises ``TimeoutError``
        when none comes within ``timeout`` seconds, and :class:`StreamClosed` when the
        connection closes."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._pending:
            ws = self._require()
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                text = ws.recv(timeout=remaining)
            except ConnectionClosed as e:
                self._ws = None
                raise StreamClosed(f"connection closed: {e}") from e
            if isinstance(text, bytes):
                text = text.decode()
            if text == "PONG":
                self.pongs += 1
                continue
            decoded = json.loads(text)
            items = decoded if isinstance(decoded, list) else [decoded]
            for item in items:
                self._pending.append(item)
        return self._pending.popleft()

    def events(self, timeout: Optional[float] = None) -> Iterator[dict[str, Any]]:
        """Events until the connection closes; ``TimeoutError`` when ``timeout`` seconds pass
        with none."""
        while True:
            try:
                yield self.next_event(timeout)
            except StreamClosed:
                return

    def close(self) -> None:
        """Closes the connection."""
        ws, self._ws = self._ws, None
        if ws is not None:
            ws.close()

"""Heartbeats in a background thread: the market maker's dead-man switch over REST
(CONTRACT §19, API.md §16).

``POST /heartbeats`` with ``{"heartbeat_id": null}`` starts the key's heartbeats and answers a
new id; each later beat sends the id of the last answer. A beat with another id is a 400 whose
body carries the current id (``null`` when none runs, as after an expiry): the thread takes it
and goes on, starting again when it is ``null``. If no valid beat arrives within the service's
``--heartbeat-timeout-ms``, the service cancels every open order of the key's address.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Callable, Optional

import httpx

from .errors import LadderError

if TYPE_CHECKING:
    from .client import LadderClient

log = logging.getLogger(__name__)


class Heartbeater:
    """Beats every ``interval_s`` seconds on a daemon thread until :meth:`stop`.

    ``on_expired`` is called (on the heartbeat thread) when the service says no heartbeat runs
    any more for the key although one was running: the timeout passed and the address's orders
    were cancelled. ``on_error`` is called with any other failure; the thread keeps beating.
    Use as a context manager, or :meth:`start` / :meth:`stop`.
    """

    def __init__(
        self,
        client: "LadderClient",
        interval_s: float = 2.0,
        *,
        on_expired: Optional[Callable[[], None]] = None,
        on_error: Optional[Callable[[Exception], None]] = None,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self._client = client.clone()
        self.interval_s = interval_s
        self.on_expired = on_expired
        self.on_error = on_error
        self.heartbeat_id: Optional[str] = None
        self.beats = 0
        self.expiries = 0
        self.last_error: Optional[Exception] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        """True while the thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> "Heartbeater":
        """Starts the heartbeats (a fresh start on the service) and the thread."""
        if self.running:
            return self
        self._stop.clear()
        self.heartbeat_id = None
        self.beat()
        self._thread = threading.Thread(target=self._run, name="ladder-heartbeat", daemon=True)
        self._thread.start()
        return self

    def beat(self) -> Optional[str]:
        """Sends one beat now (on the calling thread) and returns the id to send next."""
        with self._lock:
            try:
                self.heartbeat_id = self._client.post_heartbeat(self.heartbeat_id)
                self.beats += 1
            except LadderError as e:
                if e.status == 400 and isinstance(e.body, dict) and "heartbeat_id" in e.body:
                    current = e.body.get("heartbeat_id")
                    if current is None and self.heartbeat_id is not None:
                        self.expiries += 1
                        log.warning("heartbeats expired: the service cancelled the open orders")
                        if self.on_expired is not None:
                            self.on_expired()
                    self.heartbeat_id = current
                    # Resynchronised (or restarting): beat again at once with the id given.
                    self.heartbeat_id = self._client.post_heartbeat(self.heartbeat_id)
                    self.beats += 1
                else:
                    self._failed(e)
            except (httpx.HTTPError, OSError) as e:
                self._failed(e)
            return self.heartbeat_id

    def _failed(self, error: Exception) -> None:
        self.last_error = error
        log.warning("heartbeat failed: %s", error)
        if self.on_error is not None:
            self.on_error(error)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.beat()
            except Exception as e:  # noqa: BLE001 - the thread must survive any failure
                self._failed(e)

    def stop(self, *, stop_on_service: bool = True) -> None:
        """Stops the thread; with ``stop_on_service`` also ``DELETE /heartbeats`` (which
        cancels nothing). Without it, the service cancels the orders once the timeout passes."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval_s + self._client._timeout + 1)
            self._thread = None
        if stop_on_service:
            with self._lock:
                try:
                    self._client.stop_heartbeats()
                except (LadderError, httpx.HTTPError, OSError) as e:
                    self._failed(e)
                self.heartbeat_id = None

    def close(self) -> None:
        """Stops without telling the service (see :meth:`stop`) and closes the connections."""
        self.stop(stop_on_service=False)
        self._client.close()

    def __enter__(self) -> "Heartbeater":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self._client.close()

"""``/ws/market``: the public book feed, with local books that repair themselves
(API.md §17, CONTRACT §16).

Every market has one event sequence: each event published for it carries ``seq``, rising by
exactly one. A ``book`` event (on subscribe and on request) is current as of its ``seq`` and
does not consume one. A client that sees a jump has missed events: this stream then reads the
market's books with ``GET /book`` (which carries the same ``seq``), replaces its local books,
drops the events the snapshot already holds and goes on with the next. If the REST snapshot is
behind the event that showed the gap (it should not be: a book read reflects every
acknowledged order), it tries again a few times, then falls back to the WebSocket ``snapshot``
operation.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Callable, Iterator, Optional, Sequence, Union

from ._ws import EventSocket
from .book import LocalBook
from .errors import StreamClosed, StreamError

#: ``event_type`` of the client-side event :class:`MarketStream` yields after a repair.
REPAIRED = "book_repaired"


class MarketStream:
    """A ``/ws/market`` subscription keeping one :class:`LocalBook` per subscribed token.

    ``book_source(token_id)`` returns a ``GET /book`` answer (``LadderClient.get_book``).
    ``frame_filter``, when given, sees every event before it is processed and drops it by
    returning ``False`` (meant for tests that need a gap). After a repair :meth:`recv` yields a
    client-side event ``{"event_type": "book_repaired", "market", "seq", "missed": [first,
    last]}``.
    """

    def __init__(
        self,
        ws_base_url: str,
        asset_ids: Sequence[Union[int, str]],
        *,
        book_source: Callable[[str], dict[str, Any]],
        frame_filter: Optional[Callable[[dict[str, Any]], bool]] = None,
        repair_attempts: int = 5,
        repair_backoff_s: float = 0.05,
    ) -> None:
        self.url = ws_base_url.rstrip("/") + "/ws/market"
        self.asset_ids = [str(a) for a in asset_ids]
        self.book_source = book_source
        self.frame_filter = frame_filter
        self.repair_attempts = repair_attempts
        self.repair_backoff_s = repair_backoff_s
        self._socket = EventSocket(self.url)
        #: Local books by token id.
        self.books: dict[str, LocalBook] = {}
        #: The last applied ``seq`` of each market (condition id); absent while unknown.
        self.seq: dict[str, int] = {}
        #: Token ids of each market, as learnt from its books.
        self.market_assets: dict[str, set[str]] = {}
        #: Repairs made from ``GET /book``, and those that needed the WebSocket snapshot.
        self.repairs = 0
        self.ws_snapshot_repairs = 0
        #: ``{"error": ...}`` frames received (the connection stays).
        self.errors: list[str] = []
        self._ready: deque[dict[str, Any]] = deque()

    # ------------------------------------------------------------------ connection

    def connect(self) -> "MarketStream":
        """Opens the connection and subscribes to the tokens."""
        self._socket.open()
        self._socket.send_json({"type": "market", "assets_ids": self.asset_ids})
        return self

    def subscribe(self, asset_ids: Sequence[Union[int, str]]) -> None:
        """Adds tokens (their ``book`` events follow)."""
        ids = [str(a) for a in asset_ids]
        self.asset_ids.extend(a for a in ids if a not in self.asset_ids)
        self._socket.send_json({"operation": "subscribe", "assets_ids": ids})

    def unsubscribe(self, asset_ids: Sequence[Union[int, str]]) -> None:
        """Removes tokens and forgets their books."""
        ids = [str(a) for a in asset_ids]
        self.asset_ids = [a for a in self.asset_ids if a not in ids]
        for a in ids:
            self.books.pop(a, None)
        self._socket.send_json({"operation": "unsubscribe", "assets_ids": ids})

    def request_snapshot(self, asset_ids: Sequence[Union[int, str]] = ()) -> None:
        """Asks for fresh ``book`` events (all subscribed tokens when empty)."""
        self._socket.send_json({"operation": "snapshot", "assets_ids": [str(a) for a in asset_ids]})

    def ping(self) -> None:
        """Sends the text ``PING``."""
        self._socket.send_text("PING")

    def close(self) -> None:
        """Closes the connection."""
        self._socket.close()

    def __enter__(self) -> "MarketStream":
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while True:
            try:
                yield self.recv()
            except StreamClosed:
                return

    # ------------------------------------------------------------------ events

    def recv(self, timeout: Optional[float] = None) -> dict[str, Any]:
        """The next event, already applied to the local books. Events that a snapshot already
        holds are skipped; a gap is repaired before anything after it is returned.
        ``TimeoutError`` after ``timeout`` seconds without an event."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._ready:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            event = self._socket.next_event(remaining)
            if self.frame_filter is not None and not self.frame_filter(event):
                continue
            self._process(event)
        return self._ready.popleft()

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 10.0) -> dict[str, Any]:
        """Reads events until ``predicate(event)`` holds; ``TimeoutError`` after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no matching /ws/market event in time")
            event = self.recv(remaining)
            if predicate(event):
                return event

    def _process(self, event: dict[str, Any]) -> None:
        kind = event.get("event_type")
        if kind is None:
            if "error" in event:
                self.errors.append(str(event["error"]))
                self._ready.append(event)
            return
        market = event.get("market")
        seq = event.get("seq")
        if kind == "book":
            self._take_book(event)
            self._ready.append(event)
            return
        if not isinstance(market, str) or not isinstance(seq, int):
            self._ready.append(event)
            return
        current = self.seq.get(market)
        if current is None:
            # No book yet (a WebSocket snapshot is on its way): its book will hold this.
            return
        if seq <= current:
            return
        if seq > current + 1:
            self._repair(market, current, event)
            return
        self._apply(event)
        self._ready.append(event)

    def _take_book(self, event: dict[str, Any]) -> None:
        market = event["market"]
        current = self.seq.get(market)
        if current is not None and event["seq"] < current:
            return
        book = LocalBook.from_json(event)
        self.books[book.asset_id] = book
        self.market_assets.setdefault(market, set()).add(book.asset_id)
        self.seq[market] = book.seq

    def _apply(self, event: dict[str, Any]) -> None:
        market = event["market"]
        self.seq[market] = event["seq"]
        kind = event["event_type"]
        if kind == "price_change":
            for change in event.get("price_changes", []):
                book = self.books.get(str(change["asset_id"]))
                if book is not None:
                    book.apply_change(change["side"], change["price"], change["size"])
        elif kind == "last_trade_price":
            book = self.books.get(str(event["asset_id"]))
            if book is not None:
                book.last_trade_price = event.get("price")
        for asset in self.market_assets.get(market, ()):
            if asset in self.books:
                self.books[asset].seq = event["seq"]

    def _repair(self, market: str, current: int, event: dict[str, Any]) -> None:
        """Replaces the market's books from ``GET /book`` after a gap shown by ``event``."""
        assets = sorted(self.market_assets.get(market, ()))
        seq = event["seq"]
        for attempt in range(self.repair_attempts):
            snapshots = {asset: self.book_source(asset) for asset in assets}
            seqs = {int(s.get("seq", -1)) for s in snapshots.values()}
            snapshot_seq = min(seqs) if seqs else -1
            if len(seqs) == 1 and snapshot_seq >= seq - 1:
                for asset, snapshot in snapshots.items():
                    self.books[asset] = LocalBook.from_json(snapshot)
                self.seq[market] = snapshot_seq
                self.repairs += 1
                self._ready.append(
                    {"event_type": REPAIRED, "market": market, "seq": snapshot_seq, "missed": [current + 1, seq - 1]}
                )
                if snapshot_seq == seq - 1:
                    self._apply(event)
                    self._ready.append(event)
                return
            time.sleep(self.repair_backoff_s * (attempt + 1))
        if not assets:
            raise StreamError(f"gap in market {market} and no subscribed token to repair it from")
        # The REST read stayed behind: ask the feed itself for fresh books.
        del self.seq[market]
        self.ws_snapshot_repairs += 1
        self.request_snapshot(assets)

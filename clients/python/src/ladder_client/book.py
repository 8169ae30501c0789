"""A local copy of one token's book, kept from ``book`` snapshots and ``price_change`` entries
(API.md §14, §17). Levels are keyed by price ticks; sizes are whole shares."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Optional

from .units import PRICE_SCALE, format_price_ticks, parse_decimal_ticks


def book_hash(book: dict[str, Any]) -> str:
    """Polymarket's book hash: the lowercase hex SHA-1 of the compact JSON of the book, keys in
    the order given, with ``hash`` set to ``""`` (API.md §14). Compare with ``book["hash"]``."""
    blank = dict(book)
    blank["hash"] = ""
    return hashlib.sha1(json.dumps(blank, separators=(",", ":")).encode()).hexdigest()


@dataclass
class LocalBook:
    """The book of ``asset_id`` in ``market`` as of event ``seq``."""

    market: str
    asset_id: str
    seq: int
    bids: dict[int, int] = field(default_factory=dict)
    asks: dict[int, int] = field(default_factory=dict)
    last_trade_price: Optional[str] = None

    @classmethod
    def from_json(cls, book: dict[str, Any]) -> "LocalBook":
        """A book from a ``GET /book`` answer or a ``book`` event."""
        local = cls(market=book["market"], asset_id=str(book["asset_id"]), seq=int(book.get("seq", 0)))
        for level in book.get("bids", []):
            local.bids[parse_decimal_ticks(level["price"])] = int(level["size"])
        for level in book.get("asks", []):
            local.asks[parse_decimal_ticks(level["price"])] = int(level["size"])
        last = book.get("last_trade_price")
        local.last_trade_price = last or None
        return local

    def mirrored(self, asset_id: str) -> "LocalBook":
        """The same market's book seen from the other token: a bid at p is an ask at 1 − p."""
        return LocalBook(
            market=self.market,
            asset_id=asset_id,
            seq=self.seq,
            bids={PRICE_SCALE - p: s for p, s in self.asks.items()},
            asks={PRICE_SCALE - p: s for p, s in self.bids.items()},
        )

    def apply_change(self, side: str, price: str, size: str) -> None:
        """Applies one ``price_changes`` entry: ``size`` is the level's new total (``"0"``
        removes it); ``BUY`` is the bid side."""
        levels = self.bids if side == "BUY" else self.asks
        ticks = parse_decimal_ticks(price)
        shares = int(size)
        if shares == 0:
            levels.pop(ticks, None)
        else:
            levels[ticks] = shares

    def best_bid(self) -> Optional[str]:
        """The highest bid price, or ``None``."""
        return format_price_ticks(max(self.bids)) if self.bids else None

    def best_ask(self) -> Optional[str]:
        """The lowest ask price, or ``None``."""
        return format_price_ticks(min(self.asks)) if self.asks else None

    def midpoint(self) -> Optional[str]:
        """(best bid + best ask) / 2 rounded half up to 0.0001, as ``GET /midpoint``."""
        if not self.bids or not self.asks:
            return None
        return format_price_ticks((max(self.bids) + min(self.asks) + 1) // 2)

    def levels(self) -> dict[str, list[dict[str, str]]]:
        """``{"bids": [...], "asks": [...]}`` ordered as the service writes them: best last."""
        return {
            "bids": [{"price": format_price_ticks(p), "size": str(s)} for p, s in sorted(self.bids.items())],
            "asks": [{"price": format_price_ticks(p), "size": str(s)} for p, s in sorted(self.asks.items(), reverse=True)],
        }

    def same_levels(self, book: dict[str, Any]) -> bool:
        """True when this book has exactly the levels of a ``GET /book`` answer or ``book`` event."""
        other = LocalBook.from_json(book)
        return self.bids == other.bids and self.asks == other.asks

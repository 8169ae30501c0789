"""Trades with cursor pagination, and heartbeats (the dead-man switch) against the real
service."""

from __future__ import annotations

import base64
import time

import pytest

from conftest import HEARTBEAT_TIMEOUT_MS, MARKET, YES, wait_until
from ladder_client import END_CURSOR, LadderClient, LadderError


def test_trades_pagination(trader0: LadderClient, trader1: LadderClient, clean_book: None) -> None:
    before = {t["id"] for t in trader0.iter_trades(market=MARKET)}
    trade_ids: list[str] = []
    for i in range(7):
        trader0.place_order(YES, "BUY", "0.35", 1)
        result = trader1.place_order(YES, "SELL", "0.35", 1)
        assert result["status"] == "matched", result
        trade_ids.extend(result["tradeIds"])
    # Page by page, by hand: full pages carry a real cursor, the last one LTE=.
    pages = []
    cursor = ""
    while True:
        page = trader0.get_trades(market=MARKET, limit=3, next_cursor=cursor)
        pages.append(page)
        assert page["count"] == len(page["data"]) and page["limit"] == 3
        cursor = page["next_cursor"]
        if cursor == END_CURSOR:
            break
        assert int(base64.b64decode(cursor)) == 3 * len(pages)
    seen = [t["id"] for p in pages for t in p["data"]]
    assert len(seen) == len(set(seen)) == len(before) + 7
    assert set(trade_ids) <= set(seen)
    # Newest first.
    assert seen[: len(trade_ids)] == list(reversed(trade_ids))
    # The generator follows the same cursors; /data/trades is the same list.
    assert [t["id"] for t in trader0.iter_trades(market=MARKET, limit=2)] == seen
    assert [t["id"] for t in trader0.iter_trades(market=MARKET, limit=4, path="/data/trades")] == seen
    # Both sides see the trade, each from its own side.
    one = trader0.get_trade(trade_ids[0])
    assert one["trader_side"] == "MAKER" and trader1.get_trade(trade_ids[0])["trader_side"] == "TAKER"
    # (The status may have moved on in between: settlement runs.)
    assert [t["id"] for t in trader0.get_trades(id=trade_ids[0])["data"]] == [one["id"]]
    with pytest.raises(LadderError) as e:
        trader0.get_trades(next_cursor="not a cursor")
    assert e.value.status == 400 and e.value.error.startswith("next_cursor:")
    # An empty stream.
    assert trader0.get_trades(market="0x" + "00" * 32) == {"data": [], "next_cursor": END_CURSOR, "count": 0, "limit": 100}


def test_heartbeats_keep_orders_and_their_expiry_cancels_them(trader0: LadderClient, clean_book: None) -> None:
    expired: list[bool] = []
    with trader0.user_stream([MARKET]) as stream:
        heartbeater = trader0.heartbeater(interval_s=HEARTBEAT_TIMEOUT_MS / 5000, on_expired=lambda: expired.append(True))
        heartbeater.start()
        try:
            trader0.place_order(YES, "BUY", "0.22", 1)
            trader0.place_order(YES, "BUY", "0.23", 1)
            # Beating: the orders outlive the timeout.
            time.sleep(2 * HEARTBEAT_TIMEOUT_MS / 1000)
            assert len(trader0.get_orders()["data"]) == 2
            assert heartbeater.beats >= 4 and heartbeater.last_error is None
            # The thread dies without telling the service: the timeout cancels the orders.
            heartbeater.stop(stop_on_service=False)
            wait_until(lambda: trader0.get_orders()["data"] == [], timeout=5)
            cancels = [stream.wait_for(lambda e: e.get("type") == "CANCELLATION", timeout=5) for _ in range(2)]
            assert {c["status"] for c in cancels} == {"canceled"}
            # The next beat learns the heartbeats stopped, says so and starts again.
            heartbeater.beat()
            assert expired == [True] and heartbeater.expiries == 1 and heartbeater.heartbeat_id
        finally:
            heartbeater.stop()
    # Stopped on the service: a beat with the old id is refused, with no id to resume.
    with pytest.raises(LadderError) as e:
        trader0.post_heartbeat("00000000-0000-0000-0000-000000000000")
    assert e.value.status == 400 and e.value.body == {"error": "invalid heartbeat id", "heartbeat_id": None}


def test_stopped_heartbeats_cancel_nothing(trader0: LadderClient, clean_book: None) -> None:
    with trader0.heartbeater(interval_s=0.2):
        trader0.place_order(YES, "BUY", "0.21", 1)
    time.sleep(1.5 * HEARTBEAT_TIMEOUT_MS / 1000)
    assert len(trader0.get_orders()["data"]) == 1

"""The WebSocket clients against the real service: a fill seen on /ws/user, and the market
client repairing its books after a dropped frame."""

from __future__ import annotations

import pytest

from conftest import MARKET, NO, YES, Service
from ladder_client import LadderClient, MarketStream, StreamError, book_hash
from ladder_client.auth import Credentials


def test_fill_is_seen_on_ws_user(trader0: LadderClient, trader1: LadderClient, clean_book: None) -> None:
    with trader0.user_stream([MARKET]) as stream:
        stream.ping()
        placed = trader0.place_order(YES, "BUY", "0.47", 5)
        placement = stream.wait_for(lambda e: e["event_type"] == "order" and e["type"] == "PLACEMENT")
        assert placement["order_hash"] == placed["orderID"] and placement["status"] == "live"
        taker = trader1.place_order(YES, "SELL", "0.45", 5)
        assert taker["status"] == "matched" and taker["takingAmount"] == "2350000"
        update = stream.wait_for(lambda e: e["event_type"] == "order" and e["type"] == "UPDATE")
        assert (update["status"], update["size_matched"]) == ("matched", "5")
        trade = stream.wait_for(lambda e: e["event_type"] == "trade")
        assert trade["trader_side"] == "MAKER" and trade["price"] == "0.47" and trade["size"] == "5"
        assert trade["id"] in taker["tradeIds"]
        # Settlement moves the trade on; each change is an event.
        statuses = [trade["status"]]
        while statuses[-1] != "CONFIRMED":
            statuses.append(stream.wait_for(lambda e: e["event_type"] == "trade" and e["id"] == trade["id"])["status"])
        assert statuses == ["MATCHED", "MINED", "CONFIRMED"]
        assert stream.missed == 0 and stream.last_seq >= 5
        assert stream._socket.pongs == 1


def test_ws_user_refuses_bad_credentials(service: Service, trader0: LadderClient) -> None:
    assert trader0.credentials is not None
    bad = Credentials(trader0.credentials.api_key, trader0.credentials.secret, "0" * 64)
    stream = LadderClient(service.url, credentials=bad).user_stream()
    with stream:
        with pytest.raises(StreamError, match="auth: wrong passphrase"):
            stream.recv(timeout=5)


def test_market_stream_repairs_a_gap(trader0: LadderClient, trader1: LadderClient, clean_book: None) -> None:
    dropped: list[dict] = []
    drop_next = {"armed": False}

    def frame_filter(event: dict) -> bool:
        if drop_next["armed"] and event.get("event_type") == "price_change":
            drop_next["armed"] = False
            dropped.append(event)
            return False
        return True

    with trader0.market_stream([YES, NO], frame_filter=frame_filter) as stream:
        books = [stream.recv(timeout=5), stream.recv(timeout=5)]
        assert {b["event_type"] for b in books} == {"book"}
        assert all(b["hash"] == book_hash(b) for b in books)
        start = stream.seq[MARKET]
        trader0.place_order(YES, "BUY", "0.3", 3)
        first = stream.wait_for(lambda e: e["event_type"] == "price_change", timeout=5)
        assert first["seq"] == start + 1
        drop_next["armed"] = True
        trader0.place_order(YES, "BUY", "0.31", 4)   # this event is dropped: a gap
        trader1.place_order(NO, "BUY", "0.6", 2)     # a Yes ask at 0.4
        repaired = stream.wait_for(lambda e: e["event_type"] == "book_repaired", timeout=5)
        assert len(dropped) == 1 and repaired["missed"][0] == dropped[0]["seq"]
        assert stream.repairs == 1
        # More events apply on top of the repaired books.
        trader1.place_order(YES, "SELL", "0.45", 1)
        stream.wait_for(lambda e: e["event_type"] == "price_change" and any(c["price"] == "0.45" for c in e["price_changes"]), timeout=5)
        for token in (YES, NO):
            rest = trader0.get_book(token)
            assert rest["hash"] == book_hash(rest)
            assert rest["seq"] == stream.seq[MARKET]
            assert stream.books[token].same_levels(rest), (token, stream.books[token].levels(), rest)
        assert stream.books[YES].best_bid() == "0.31" and stream.books[YES].best_ask() == "0.4"
        assert stream.books[NO].best_bid() == "0.6" and stream.books[YES].midpoint() == trader0.get_midpoint(YES)


def test_market_stream_reports_unknown_tokens(trader0: LadderClient) -> None:
    stream: MarketStream
    with trader0.market_stream(["12345"]) as stream:
        event = stream.recv(timeout=5)
        assert "error" in event and stream.errors


def test_cancel_on_disconnect(trader0: LadderClient, clean_book: None) -> None:
    from conftest import wait_until

    stream = trader0.user_stream([MARKET], cancel_on_disconnect=True).connect()
    try:
        trader0.place_order(YES, "BUY", "0.19", 1)
        stream.wait_for(lambda e: e.get("type") == "PLACEMENT", timeout=5)
        assert len(trader0.get_orders()["data"]) == 1
    finally:
        stream.close()
    wait_until(lambda: trader0.get_orders()["data"] == [], timeout=5)

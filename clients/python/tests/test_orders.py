"""Placing and cancelling orders against the real service: every cancel route, batches,
rejections, open-order pages, balances and claimable."""

from __future__ import annotations

import pytest

from conftest import MARKET, NO, YES
from ladder_client import LadderClient, LadderError, OrderType, PostOrder


def test_post_and_cancel_one(trader0: LadderClient, clean_book: None) -> None:
    result = trader0.place_order(YES, "BUY", "0.41", 10)
    assert result["success"] is True and result["status"] == "live"
    assert result["makingAmount"] == "0" and result["errorMsg"] is None
    [order] = trader0.get_orders(market=MARKET)["data"]
    assert order["order_hash"] == result["orderID"]
    assert (order["price"], order["original_size"], order["side"], order["outcome"]) == ("0.41", "10", "BUY", "Yes")
    cancel = trader0.cancel_order(order["id"], MARKET)
    assert cancel == {"canceled": [order["id"]], "notCanceled": {}}
    again = trader0.cancel_order(order["id"], MARKET)
    assert again == {"canceled": [], "notCanceled": {order["id"]: "already canceled"}}
    assert trader0.get_orders()["data"] == []


def test_order_hash_is_computed_locally(trader0: LadderClient, clean_book: None) -> None:
    signed = trader0.build_order(NO, "SELL", "0.7", 3)
    result = trader0.post_order(signed)
    assert result["orderID"] == signed.order_hash()
    duplicate = trader0.post_order(signed)
    assert duplicate["success"] is False and duplicate["errorMsg"].startswith("duplicate order")
    assert duplicate["status"] == "delayed"


def test_batch_and_cancel_several(trader0: LadderClient, clean_book: None) -> None:
    orders = [PostOrder(trader0.build_order(YES, "BUY", f"0.3{i}", 1 + i)) for i in range(4)]
    results = trader0.post_orders(orders)
    assert [r["success"] for r in results] == [True] * 4
    ids = [o["id"] for o in trader0.iter_orders(limit=3)]
    assert len(ids) == 4
    result = trader0.cancel_orders([(ids[0], MARKET), (ids[1], MARKET), (999999, MARKET)])
    assert sorted(result["canceled"]) == sorted(ids[:2])
    assert result["notCanceled"] == {"999999": "not found"}


def test_cancel_market_orders_and_by_token(trader0: LadderClient, clean_book: None) -> None:
    trader0.place_order(YES, "BUY", "0.2", 2)
    trader0.place_order(NO, "BUY", "0.2", 2)
    by_token = trader0.cancel_market_orders(MARKET, token_id=NO)
    assert len(by_token["canceled"]) == 1
    [left] = trader0.get_orders()["data"]
    assert left["asset_id"] == YES
    everything = trader0.cancel_market_orders(MARKET)
    assert everything["canceled"] == [left["id"]]


def test_cancel_all(trader0: LadderClient, clean_book: None) -> None:
    for price in ("0.11", "0.12", "0.13"):
        trader0.place_order(YES, "BUY", price, 1)
    assert len(trader0.cancel_all()["canceled"]) == 3
    assert trader0.cancel_all() == {"canceled": [], "notCanceled": {}}


def test_not_owner(trader0: LadderClient, trader1: LadderClient, clean_book: None) -> None:
    trader0.place_order(YES, "BUY", "0.15", 1)
    [order] = trader0.get_orders()["data"]
    assert trader1.cancel_order(order["id"], MARKET)["notCanceled"] == {order["id"]: "not owner"}


def test_rejections_are_200_with_success_false(trader0: LadderClient, clean_book: None) -> None:
    off_tick = trader0.place_order(YES, "BUY", "0.4321", 1)
    assert off_tick["success"] is False
    assert off_tick["errorMsg"] == "invalid price 0.4321: must be a multiple of the tick size 0.001"
    fok = trader0.place_order(YES, "BUY", "0.5", 1, OrderType.FOK)
    assert fok["errorMsg"] == "order couldn't be fully filled, FOK orders are fully filled or killed"
    rich = trader0.place_order(YES, "BUY", "0.9", 100_000)
    assert rich["errorMsg"] == "not enough balance / allowance"


def test_post_only(trader0: LadderClient, trader1: LadderClient, clean_book: None) -> None:
    with pytest.raises(LadderError) as e:
        trader0.place_order(YES, "BUY", "0.5", 1, OrderType.FAK, post_only=True)
    assert (e.value.status, e.value.error) == (400, "postOnly orders must use orderType GTC or GTD")
    trader1.place_order(YES, "SELL", "0.6", 1)
    with pytest.raises(LadderError) as e:
        trader0.place_order(YES, "BUY", "0.6", 1, post_only=True)
    assert (e.value.status, e.value.error) == (400, "post-only order would cross resting liquidity")
    assert trader0.place_order(YES, "BUY", "0.59", 1, post_only=True)["status"] == "live"


def test_balances_reserve_and_release(trader0: LadderClient, clean_book: None) -> None:
    before = trader0.get_balance_allowance()
    trader0.place_order(YES, "BUY", "0.25", 4)
    during = trader0.get_balance_allowance()
    assert int(before["allowance"]) - int(during["allowance"]) == 1_000_000
    assert during["balance"] == before["balance"]
    trader0.cancel_all()
    assert trader0.get_balance_allowance() == before
    shares = trader0.get_balance_allowance("CONDITIONAL", YES)
    assert int(shares["balance"]) >= 0
    with pytest.raises(LadderError) as e:
        trader0.get_balance_allowance("CONDITIONAL")
    assert e.value.status == 400


def test_claimable_and_public_reads(trader0: LadderClient, clean_book: None) -> None:
    assert trader0.get_claimable() == {"address": trader0.account, "claimable": []}
    trader0.place_order(YES, "BUY", "0.4", 2)
    trader0.place_order(NO, "BUY", "0.4", 2)  # a Yes ask at 0.6
    book = trader0.get_book(YES)
    assert book["bids"][-1] == {"price": "0.4", "size": "2"}
    assert book["asks"][-1] == {"price": "0.6", "size": "2"}
    assert trader0.get_midpoint(YES) == "0.5"
    assert trader0.get_spread(YES) == "0.2"
    assert trader0.get_price(YES, "BUY") == "0.4"
    assert trader0.get_tick_size(YES) == 0.001
    assert [m["condition_id"] for m in trader0.iter_markets(limit=1)][0] == MARKET
    trader0.check_clock()

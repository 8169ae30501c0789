"""docs/openapi.yaml: it is a valid OpenAPI 3.1 document, and every operation it documents,
driven against the live service, answers with a documented status, media type and a body that
validates against the documented schema, error answers included. Schemathesis then fuzzes the
public operations."""

from __future__ import annotations

import secrets
import time
from typing import Any

import pytest
from eth_account import Account
from openapi_spec_validator import validate

from contract import Contract
from conftest import MARKET, NO, TRADERS, YES, Service, wait_until
from ladder_client import LadderClient, cancel_market_orders_body, cancel_order_body

ZERO_MARKET = "0x" + "00" * 32
UNKNOWN_TOKEN = "123456789"


@pytest.fixture(scope="module")
def contract() -> Contract:
    return Contract()


def test_document_is_valid_openapi_31(contract: Contract) -> None:
    assert contract.doc["openapi"].startswith("3.1")
    validate(contract.doc)


def test_every_operation_answers_as_documented(
    contract: Contract, service: Service, trader0: LadderClient, trader1: LadderClient
) -> None:
    c = contract.check
    t0, t1 = trader0, trader1
    t0.cancel_all()
    t1.cancel_all()
    public = LadderClient(service.url)

    # ---------------------------------------------------------------- keys
    fresh = LadderClient(service.url, Account.create().key)
    created = c(fresh.request("POST", "/auth/api-key", auth="l1", nonce=0), "/auth/api-key")
    c(fresh.request("POST", "/auth/api-key", auth="l1", nonce=0), "/auth/api-key")  # 400: nonce taken
    c(fresh.request("POST", "/auth/api-key"), "/auth/api-key")  # 401
    c(fresh.request("GET", "/auth/derive-api-key", auth="l1", nonce=0), "/auth/derive-api-key")
    c(fresh.request("GET", "/auth/derive-api-key", auth="l1", nonce=9), "/auth/derive-api-key")  # 404
    c(fresh.request("GET", "/auth/derive-api-key"), "/auth/derive-api-key")  # 401
    c(fresh.request("GET", "/auth/api-keys", auth="l1"), "/auth/api-keys")
    fresh.create_api_key(nonce=1)
    c(fresh.request("GET", "/auth/api-keys", auth="l2"), "/auth/api-keys")
    c(fresh.request("GET", "/auth/api-keys"), "/auth/api-keys")  # 401
    c(fresh.request("DELETE", "/auth/api-key", auth="l2"), "/auth/api-key")
    c(fresh.request("DELETE", "/auth/api-key", auth="l1", headers={"SVC_API_KEY": created["apiKey"]}), "/auth/api-key")
    c(fresh.request("DELETE", "/auth/api-key", auth="l1", headers={"SVC_API_KEY": created["apiKey"]}), "/auth/api-key")  # 404
    c(fresh.request("DELETE", "/auth/api-key", auth="l1"), "/auth/api-key")  # 401

    # ---------------------------------------------------------------- orders
    body = {"order": t0.build_order(YES, "BUY", "0.44", 3).to_json(), "orderType": "GTC"}
    placed = c(t0.request("POST", "/order", body=body, auth="l2"), "/order")
    assert placed["success"]
    c(t0.request("POST", "/order", body=body, auth="l2"), "/order")  # 200 duplicate rejection
    c(t0.request("POST", "/order", body={"orderType": "GTC"}, auth="l2"), "/order")  # 400
    c(t0.request("POST", "/order", body=body), "/order")  # 401
    batch = [{"order": t1.build_order(NO, "BUY", p, 2).to_json(), "orderType": "GTC", "postOnly": True} for p in ("0.5", "0.51")]
    c(t1.request("POST", "/orders", body=batch, auth="l2"), "/orders")
    c(t1.request("POST", "/orders", body=[], auth="l2"), "/orders")  # 400
    orders = c(t0.request("GET", "/orders", params={"market": MARKET, "limit": 1}, auth="l2"), "/orders")
    assert orders["count"] == 1
    c(t0.request("GET", "/orders", params={"limit": "x"}, auth="l2"), "/orders")  # 400
    c(t0.request("GET", "/orders"), "/orders")  # 401

    # ---------------------------------------------------------------- public reads (with a book)
    c(public.request("GET", "/time"), "/time")
    c(public.request("GET", "/book", params={"token_id": YES}), "/book")
    c(public.request("GET", "/book"), "/book")  # 400
    c(public.request("GET", "/book", params={"token_id": UNKNOWN_TOKEN}), "/book")  # 404
    c(public.request("POST", "/books", body=[{"token_id": YES}, {"token_id": UNKNOWN_TOKEN}]), "/books")
    c(public.request("GET", "/books", body=[{"token_id": NO}]), "/books")
    c(public.request("POST", "/books", body={"token_id": YES}), "/books")  # 400
    c(public.request("GET", "/price", params={"token_id": YES, "side": "BUY"}), "/price")
    c(public.request("GET", "/price", params={"token_id": YES, "side": "UP"}), "/price")  # 400
    c(public.request("GET", "/midpoint", params={"token_id": YES}), "/midpoint")
    c(public.request("GET", "/spread", params={"token_id": YES}), "/spread")
    c(public.request("GET", "/tick-size", params={"token_id": YES}), "/tick-size")
    c(public.request("GET", "/tick-size", params={"token_id": "x"}), "/tick-size")  # 400
    c(public.request("GET", "/tick-size", params={"token_id": UNKNOWN_TOKEN}), "/tick-size")  # 404
    c(public.request("GET", "/neg-risk", params={"token_id": NO}), "/neg-risk")
    c(public.request("GET", "/neg-risk", params={}), "/neg-risk")  # 400
    c(public.request("GET", "/fee-rate", params={"token_id": YES}), "/fee-rate")
    c(public.request("GET", "/fee-rate", params={"token_id": UNKNOWN_TOKEN}), "/fee-rate")  # 404
    c(public.request("GET", "/markets"), "/markets")
    c(public.request("GET", "/markets", params={"next_cursor": "???"}), "/markets")  # 400
    c(public.request("GET", "/sampling-markets", params={"limit": 1}), "/sampling-markets")
    c(public.request("GET", "/sampling-markets", params={"limit": -1}), "/sampling-markets")  # 400
    c(public.request("GET", f"/markets/{MARKET}"), "/markets/{condition_id}")
    c(public.request("GET", f"/markets/{ZERO_MARKET}"), "/markets/{condition_id}")  # 404
    c(public.request("GET", "/markets/0x12"), "/markets/{condition_id}")  # 400
    c(public.request("GET", "/claimable", params={"address": TRADERS[0][1]}), "/claimable")
    c(public.request("GET", "/claimable"), "/claimable")  # 400
    c(public.request("POST", "/bundler", body={"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}), "/bundler")
    c(public.request("POST", "/bundler", body={"jsonrpc": "2.0", "id": 2, "method": "nope", "params": []}), "/bundler")
    c(public.request("GET", "/metrics"), "/metrics")
    c(public.request("GET", "/ws/user"), "/ws/user")  # 400: not an upgrade
    c(public.request("GET", "/ws/market"), "/ws/market")  # 400

    # ---------------------------------------------------------------- a trade
    taker = t1.place_order(YES, "SELL", "0.44", 3, "FAK")
    assert taker["status"] == "matched", taker
    trade_id = taker["tradeIds"][0]
    c(public.request("GET", "/last-trades-prices", body=[{"token_id": YES}, {"token_id": NO}]), "/last-trades-prices")
    c(public.request("POST", "/last-trades-prices", body=[{"token_id": YES}]), "/last-trades-prices")
    c(public.request("POST", "/last-trades-prices", body=[{"token_id": "abc"}]), "/last-trades-prices")  # 400
    c(public.request("GET", "/prices-history", params={"market": YES, "interval": "1d"}), "/prices-history")
    c(public.request("GET", "/prices-history"), "/prices-history")  # 400
    trades = c(t0.request("GET", "/trades", params={"limit": 1}, auth="l2"), "/trades")
    assert trades["data"][0]["id"] == trade_id
    c(t0.request("GET", "/trades", params={"before": "yesterday"}, auth="l2"), "/trades")  # 400
    c(t0.request("GET", "/trades"), "/trades")  # 401
    c(t1.request("GET", "/data/trades", params={"market": MARKET}, auth="l2"), "/data/trades")
    c(t1.request("GET", "/data/trades", params={"market": "0x1"}, auth="l2"), "/data/trades")  # 400
    c(t1.request("GET", "/data/trades"), "/data/trades")  # 401
    c(t0.request("GET", f"/trades/{trade_id}", auth="l2"), "/trades/{id}")
    c(t0.request("GET", f"/trades/0x{'ab' * 32}", auth="l2"), "/trades/{id}")  # 404
    c(t0.request("GET", "/trades/0xzz", auth="l2"), "/trades/{id}")  # 400
    c(t0.request("GET", f"/trades/{trade_id}"), "/trades/{id}")  # 401

    # ---------------------------------------------------------------- balances and heartbeats
    c(t0.request("GET", "/balance-allowance", params={"asset_type": "COLLATERAL"}, auth="l2"), "/balance-allowance")
    c(t0.request("GET", "/balance-allowance", params={"asset_type": "CONDITIONAL", "token_id": YES}, auth="l2"), "/balance-allowance")
    c(t0.request("GET", "/balance-allowance", params={"asset_type": "CONDITIONAL"}, auth="l2"), "/balance-allowance")  # 400
    c(t0.request("GET", "/balance-allowance", params={"asset_type": "COLLATERAL"}), "/balance-allowance")  # 401
    beat = c(t1.request("POST", "/heartbeats", body={"heartbeat_id": None}, auth="l2"), "/heartbeats")
    c(t1.request("POST", "/heartbeats", body={"heartbeat_id": beat["heartbeat_id"]}, auth="l2"), "/heartbeats")
    c(t1.request("POST", "/heartbeats", body={"heartbeat_id": "stale"}, auth="l2"), "/heartbeats")  # 400 with the id
    c(t1.request("POST", "/heartbeats", body={"heartbeat_id": 7}, auth="l2"), "/heartbeats")  # 400 malformed
    c(t1.request("POST", "/heartbeats", body={"heartbeat_id": None}), "/heartbeats")  # 401
    c(t1.request("DELETE", "/heartbeats", auth="l2"), "/heartbeats")
    c(t1.request("DELETE", "/heartbeats"), "/heartbeats")  # 401

    # ---------------------------------------------------------------- cancels
    [mine] = t0.get_orders()["data"] or [None]  # the maker order was filled: nothing open
    assert mine is None
    t0.place_order(YES, "BUY", "0.3", 1)
    t0.place_order(YES, "BUY", "0.31", 1)
    ids = [o["id"] for o in t0.get_orders()["data"]]
    assert t0.signer is not None
    c(t0.request("DELETE", "/order", body=cancel_order_body(t0.signer, int(ids[0]), MARKET), auth="l2"), "/order")
    c(t0.request("DELETE", "/order", body={"orderId": "1"}, auth="l2"), "/order")  # 400
    c(t0.request("DELETE", "/order", body={}), "/order")  # 401
    c(t0.request("DELETE", "/orders", body=[cancel_order_body(t0.signer, int(i), MARKET) for i in ids], auth="l2"), "/orders")
    c(t0.request("DELETE", "/orders", body={"orderId": 1}, auth="l2"), "/orders")  # 400
    c(t0.request("DELETE", "/orders", body=[]), "/orders")  # 401
    c(t1.request("DELETE", "/cancel-market-orders", body=cancel_market_orders_body(t1.signer, MARKET, token_id=NO), auth="l2"), "/cancel-market-orders")  # type: ignore[arg-type]
    c(t1.request("DELETE", "/cancel-market-orders", body={"marketId": MARKET}, auth="l2"), "/cancel-market-orders")  # 400
    c(t1.request("DELETE", "/cancel-market-orders", body={}), "/cancel-market-orders")  # 401
    c(t1.request("DELETE", "/cancel-all", auth="l2"), "/cancel-all")
    c(t1.request("DELETE", "/cancel-all"), "/cancel-all")  # 401

    # ---------------------------------------------------------------- empty-book public reads
    c(public.request("GET", "/price", params={"token_id": YES, "side": "SELL"}), "/price")  # 404 no orders
    c(public.request("GET", "/midpoint", params={"token_id": YES}), "/midpoint")  # 404
    c(public.request("GET", "/spread", params={"token_id": YES}), "/spread")  # 404

    # ---------------------------------------------------------------- admin
    condition = "0x" + secrets.token_hex(32)
    yes_id, no_id = str(secrets.randbits(200)), str(secrets.randbits(200))
    admin = service.admin
    market = {"condition_id": condition, "yes_token_id": yes_id, "no_token_id": no_id, "minimum_tick_size": 0.01}
    c(admin("POST", "/admin/markets", market), "/admin/markets")
    c(admin("POST", "/admin/markets", market), "/admin/markets")  # 400 market already exists
    c(admin("POST", "/admin/markets", {"condition_id": condition}), "/admin/markets")  # 400
    unauthenticated = public.request("POST", "/admin/markets", body=market)
    c(unauthenticated, "/admin/markets")  # 401
    c(admin("POST", f"/admin/markets/{condition}/pause"), "/admin/markets/{condition_id}/pause")
    c(admin("POST", f"/admin/markets/{ZERO_MARKET}/pause"), "/admin/markets/{condition_id}/pause")  # 404
    c(admin("POST", f"/admin/markets/{condition}/resume"), "/admin/markets/{condition_id}/resume")
    c(admin("POST", f"/admin/markets/{condition}/tick-size", {"minimum_tick_size": "0.001"}), "/admin/markets/{condition_id}/tick-size")
    c(admin("POST", f"/admin/markets/{condition}/tick-size", {"minimum_tick_size": 0.05}), "/admin/markets/{condition_id}/tick-size")  # 400
    account = Account.create().address
    c(admin("POST", "/admin/accounts", {"account": account, "owner": TRADERS[0][1]}), "/admin/accounts")
    c(admin("DELETE", "/admin/accounts", {"account": account, "owner": TRADERS[0][1]}), "/admin/accounts")
    c(admin("POST", "/admin/deposits", {"address": account, "asset": yes_id, "amount": "5000000"}), "/admin/deposits")
    c(admin("POST", "/admin/deposits", {"address": account, "asset": "GOLD", "amount": 1}), "/admin/deposits")  # 400
    c(admin("POST", "/admin/withdrawals", {"address": account, "asset": yes_id, "amount": 1000000}), "/admin/withdrawals")
    c(admin("POST", "/admin/withdrawals", {"address": account, "asset": yes_id, "amount": 10**12}), "/admin/withdrawals")  # 400
    c(admin("POST", f"/admin/markets/{condition}/resolve", {"outcome": "Yes"}), "/admin/markets/{condition_id}/resolve")
    claimable = c(public.request("GET", "/claimable", params={"address": account}), "/claimable")
    assert claimable["claimable"][0]["refund_reason"] == "resolved_winner"
    c(admin("POST", "/admin/redemptions", {"address": account, "condition_id": condition}), "/admin/redemptions")
    c(admin("POST", "/admin/redemptions", {"address": account}), "/admin/redemptions")  # 400
    c(admin("GET", "/admin/state-hash"), "/admin/state-hash")
    c(public.request("GET", "/admin/state-hash"), "/admin/state-hash")  # 401
    c(admin("POST", "/admin/snapshot"), "/admin/snapshot")
    c(admin("POST", "/admin/promote"), "/admin/promote")  # 400: already the primary
    c(public.request("GET", "/admin/leader"), "/admin/leader")  # public: the primary itself

    # ---------------------------------------------------------------- request-level statuses
    c(public.request("POST", "/bundler", raw_body=b"[" + b" " * (70 * 1024) + b"]"), "/bundler")  # 413
    c(t0.request("DELETE", "/order", raw_body=b"{" + b" " * (70 * 1024) + b"}", auth="l2"), "/order")  # 413
    c(public.request("GET", "/time", headers={"X-Padding": "x" * (17 * 1024)}), "/time")  # 431

    # ---------------------------------------------------------------- every operation was driven
    driven = {(m, p) for m, p, _ in contract.checked}
    assert contract.operations() - driven == set()
    errors = {(m, p, s) for m, p, s in contract.checked if s.startswith(("4", "5"))}
    assert len(errors) >= 40


def test_every_event_of_the_streams_has_the_documented_shape(trader0: LadderClient, trader1: LadderClient, contract: Contract) -> None:
    """WebSocket events carry the REST resources' fields (OpenOrder, Trade) plus event fields."""
    schemas = contract.doc["components"]["schemas"]
    open_order = dict(schemas["OpenOrder"], additionalProperties=True)
    open_order["properties"] = dict(open_order["properties"], status={"enum": ["live", "delayed", "matched", "canceled"]})
    trade = dict(schemas["Trade"], additionalProperties=True)
    trader0.cancel_all()
    with trader0.user_stream([MARKET]) as stream:
        trader0.place_order(YES, "BUY", "0.43", 1)
        trader1.place_order(YES, "SELL", "0.43", 1)
        order_event = stream.wait_for(lambda e: e["event_type"] == "order" and e["type"] == "UPDATE")
        trade_event = stream.wait_for(lambda e: e["event_type"] == "trade")
    errors = list(contract.schema_validator(open_order).iter_errors(order_event))
    errors += list(contract.schema_validator(trade).iter_errors(trade_event))
    assert not errors, [e.message for e in errors]


def test_schemathesis_fuzzes_the_public_operations(contract: Contract, service: Service) -> None:
    """Generated requests to every public operation (small budget) answer as documented."""
    schemathesis = pytest.importorskip("schemathesis")
    from hypothesis import HealthCheck, given, settings
    from schemathesis.checks import content_type_conformance, not_a_server_error, response_schema_conformance, status_code_conformance

    doc = dict(contract.doc)
    doc["servers"] = [{"url": service.url}]
    doc["paths"] = {p: item for p, item in doc["paths"].items() if all("public" in op.get("tags", []) for m, op in item.items() if m in ("get", "post", "delete"))}
    schema = schemathesis.openapi.from_dict(doc)
    checks = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
    failures: list[str] = []
    started = time.monotonic()
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 18
    for operation in operations:

        @settings(max_examples=12, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def run(case: Any) -> None:
            case.call_and_validate(base_url=service.url, checks=checks)

        try:
            run()
        except Exception as e:  # collect every operation's failure, not only the first
            failures.append(f"{operation.method.upper()} {operation.path}: {str(e)[:800]}")
    assert not failures, "\n\n".join(failures)
    assert time.monotonic() - started < 60

"""Known-answer vectors of protocol/tests/data/signing.json (computed with eth_account,
independently of the service): type hashes, domain separators, struct hashes, digests and
signatures of orders, cancels and ClobAuth, the L2 HMAC and owner ids. No service needed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from eth_account import Account
from eth_account.messages import encode_typed_data

from conftest import DATA_DIR
from ladder_client import (
    AuthDomain,
    ExchangeDomain,
    Order,
    OrderBuilder,
    PostOrder,
    Signer,
    cancel_market_orders_body,
    cancel_order_body,
    l1_headers,
    l2_headers,
    l2_signature,
    owner_uuid,
    ws_user_subscribe,
)
from ladder_client import eip712
from ladder_client.auth import Credentials

VECTORS: dict[str, Any] = json.loads((DATA_DIR / "signing.json").read_text())


def key_of(address: str) -> str:
    for key in VECTORS["keys"].values():
        if key["address"].lower() == address.lower():
            return str(key["private_key"])
    raise KeyError(address)


def test_development_keys_have_their_addresses() -> None:
    for key in VECTORS["keys"].values():
        assert Signer(key["private_key"]).address == key["address"]


@pytest.mark.parametrize("vector", VECTORS["orders"], ids=lambda v: v["name"])
def test_order_vector(vector: dict[str, Any]) -> None:
    expected = vector["expected"]
    domain = ExchangeDomain(vector["chainId"], vector["verifyingContract"])
    order = Order.from_json(vector["order"])
    assert eip712.ORDER_TYPE == expected["type_string"]
    assert "0x" + eip712.type_hash(eip712.ORDER_TYPE).hex() == expected["type_hash"]
    assert "0x" + domain.separator().hex() == expected["domain_separator"]
    assert "0x" + eip712.order_struct_hash(order.message()).hex() == expected["struct_hash"]
    assert order.order_hash(domain) == expected["digest"]
    signed = order.sign(Signer(key_of(order.signer)), domain)
    assert signed.signature == expected["signature"]
    # The wire form is the vector's order, field for field.
    assert signed.to_json() == vector["order"]
    # The builder from (price, size) reproduces the same amounts and signature.
    built = OrderBuilder(
        token_id=vector["order"]["tokenId"],
        side=order.side,
        price=vector["price"],
        size=vector["size_shares"],
        maker=order.maker,
        salt=order.salt,
        expiration=order.expiration,
        nonce=order.nonce,
        identifier=order.identifier,
    ).sign(Signer(key_of(order.signer)), domain)
    assert built.to_json() == vector["order"]


def test_eth_account_typed_data_agrees_with_the_field_by_field_digest() -> None:
    vector = VECTORS["orders"][0]
    order = Order.from_json(vector["order"])
    full = eip712.typed_data(ExchangeDomain(), "Order", order.message())
    assert bytes(encode_typed_data(full_message=full).body) == eip712.order_struct_hash(order.message())
    signed = Account.sign_message(encode_typed_data(full_message=full), key_of(order.signer))
    assert "0x" + bytes(signed.message_hash).hex() == vector["expected"]["digest"]


def test_cancel_order_vector() -> None:
    vector = VECTORS["cancels"][0]
    expected = vector["expected"]
    assert eip712.CANCEL_ORDER_TYPE == expected["type_string"]
    assert "0x" + eip712.type_hash(eip712.CANCEL_ORDER_TYPE).hex() == expected["type_hash"]
    struct = eip712.cancel_order_struct_hash(vector["orderId"], vector["marketId"])
    assert "0x" + struct.hex() == expected["struct_hash"]
    assert "0x" + eip712.digest(ExchangeDomain().separator(), struct).hex() == expected["digest"]
    body = cancel_order_body(Signer(key_of(vector["signer"])), vector["orderId"], vector["marketId"])
    assert body == {
        "orderId": 42,
        "marketId": vector["marketId"],
        "signature": expected["signature"],
        "signatureType": 3,
        "signer": vector["signer"],
    }
    eoa = cancel_order_body(Signer(key_of(vector["signer"])), 42, vector["marketId"], signature_type=0)
    assert "signer" not in eoa and eoa["signature"] == expected["signature"]


def test_cancel_market_orders_vector() -> None:
    vector = VECTORS["cancels"][1]
    expected = vector["expected"]
    assert eip712.CANCEL_MARKET_ORDERS_TYPE == expected["type_string"]
    assert "0x" + eip712.type_hash(eip712.CANCEL_MARKET_ORDERS_TYPE).hex() == expected["type_hash"]
    struct = eip712.cancel_market_orders_struct_hash(vector["marketId"])
    assert "0x" + struct.hex() == expected["struct_hash"]
    assert "0x" + eip712.digest(ExchangeDomain().separator(), struct).hex() == expected["digest"]
    body = cancel_market_orders_body(Signer(key_of(vector["signer"])), vector["marketId"], token_id=5)
    assert body["signature"] == expected["signature"]
    assert body["tokenId"] == "5" and body["signer"] == vector["signer"]


@pytest.mark.parametrize("vector", VECTORS["clob_auth"], ids=lambda v: v["name"])
def test_clob_auth_vector(vector: dict[str, Any]) -> None:
    expected = vector["expected"]
    assert eip712.CLOB_AUTH_TYPE == expected["type_string"]
    assert "0x" + eip712.type_hash(eip712.CLOB_AUTH_TYPE).hex() == expected["type_hash"]
    assert "0x" + AuthDomain().separator().hex() == expected["domain_separator"]
    struct = eip712.clob_auth_struct_hash(vector["address"], vector["timestamp"], vector["nonce"])
    assert "0x" + struct.hex() == expected["struct_hash"]
    assert "0x" + eip712.digest(AuthDomain().separator(), struct).hex() == expected["digest"]
    signer = Signer(key_of(vector.get("owner", vector["address"])))
    headers = l1_headers(signer, vector["address"], nonce=vector["nonce"], timestamp=int(vector["timestamp"]))
    assert headers == {
        "SVC_ADDRESS": vector["address"],
        "SVC_SIGNATURE": expected["signature"],
        "SVC_TIMESTAMP": vector["timestamp"],
        "SVC_NONCE": str(vector["nonce"]),
    }


@pytest.mark.parametrize("vector", VECTORS["hmac"], ids=lambda v: f"{v['method']} {v['path'][:20]}")
def test_hmac_vector(vector: dict[str, Any]) -> None:
    assert l2_signature(vector["secret"], vector["timestamp"], vector["method"], vector["path"], vector["body"]) == vector["signature"]
    credentials = Credentials("00000000-0000-0000-0000-000000000000", vector["secret"], "pass")
    headers = l2_headers(credentials, vector["method"], vector["path"], vector["body"], timestamp=int(vector["timestamp"]))
    assert headers["SVC_SIGNATURE"] == vector["signature"]
    assert headers["SVC_PASSPHRASE"] == "pass" and headers["SVC_TIMESTAMP"] == vector["timestamp"]


def test_hmac_accepts_the_standard_alphabet_and_no_padding() -> None:
    vector = VECTORS["hmac"][0]
    standard = vector["secret"].replace("-", "+").replace("_", "/").rstrip("=")
    assert l2_signature(standard, vector["timestamp"], "GET", vector["path"]) == vector["signature"]


def test_ws_user_subscribe_carries_the_ws_hmac() -> None:
    vector = VECTORS["hmac"][3]
    credentials = Credentials("00000000-0000-0000-0000-000000000000", vector["secret"], "pass")
    message = ws_user_subscribe(credentials, timestamp=int(vector["timestamp"]))
    assert message["type"] == "user" and message["markets"] == []
    assert message["auth"]["signature"] == vector["signature"]
    assert "cancel_on_disconnect" not in message
    assert ws_user_subscribe(credentials, cancel_on_disconnect=True)["cancel_on_disconnect"] is True


@pytest.mark.parametrize("case", VECTORS["owner_uuid"]["cases"], ids=lambda c: c["address"])
def test_owner_uuid_vector(case: dict[str, str]) -> None:
    assert owner_uuid(case["address"]) == case["owner"]


def test_post_order_body_has_the_rust_field_order() -> None:
    vector = VECTORS["orders"][0]
    order = Order.from_json(vector["order"])
    signed = order.sign(Signer(key_of(order.signer)))
    body = PostOrder(signed, "GTD", True).to_json()
    text = json.dumps(body, separators=(",", ":"))
    assert text.startswith('{"order":{"salt":"1234567","maker":')
    assert '"side":0,"signatureType":3,' in text
    assert text.endswith(',"orderType":"GTD","postOnly":true}')

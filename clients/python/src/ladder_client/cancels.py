"""Signed cancel bodies (API.md §10): ``DELETE /order`` (``CancelOrder``), ``DELETE /orders``
(an array of them) and ``DELETE /cancel-market-orders`` (``CancelMarketOrders``)."""

from __future__ import annotations

from typing import Any, Optional, Union

from .eip712 import (
    ExchangeDomain,
    cancel_market_orders_struct_hash,
    cancel_order_struct_hash,
    digest,
    hex_bytes,
)
from .orders import SIGNATURE_TYPE_EOA, SIGNATURE_TYPE_SMART_ACCOUNT
from .signing import Signer


def _market_hex(market_id: Union[str, bytes]) -> str:
    return "0x" + hex_bytes(market_id, 32, "marketId").hex()


def cancel_order_body(
    signer: Signer,
    order_id: int,
    market_id: Union[str, bytes],
    *,
    signature_type: int = SIGNATURE_TYPE_SMART_ACCOUNT,
    domain: ExchangeDomain = ExchangeDomain(),
) -> dict[str, Any]:
    """A ``DELETE /order`` body signed as ``CancelOrder(orderId, marketId)``.

    With ``signature_type`` 3 the body names the ``signer`` (an EOA controlling the maker);
    with 0 the signature must recover to the maker itself and no signer is sent.
    """
    market = hex_bytes(market_id, 32, "marketId")
    expected = digest(domain.separator(), cancel_order_struct_hash(order_id, market))
    signature = signer.sign_typed(
        domain, "CancelOrder", {"orderId": order_id, "marketId": market}, expected
    )
    body: dict[str, Any] = {
        "orderId": order_id,
        "marketId": _market_hex(market),
        "signature": signature,
        "signatureType": signature_type,
    }
    if signature_type != SIGNATURE_TYPE_EOA:
        body["signer"] = signer.address
    return body


def cancel_market_orders_body(
    signer: Signer,
    market_id: Union[str, bytes],
    *,
    token_id: Optional[Union[int, str]] = None,
    signature_type: int = SIGNATURE_TYPE_SMART_ACCOUNT,
    domain: ExchangeDomain = ExchangeDomain(),
) -> dict[str, Any]:
    """A ``DELETE /cancel-market-orders`` body signed as ``CancelMarketOrders(marketId)``,
    optionally limited to one token of the market."""
    market = hex_bytes(market_id, 32, "marketId")
    expected = digest(domain.separator(), cancel_market_orders_struct_hash(market))
    signature = signer.sign_typed(domain, "CancelMarketOrders", {"marketId": market}, expected)
    body: dict[str, Any] = {
        "marketId": _market_hex(market),
        "signature": signature,
        "signatureType": signature_type,
    }
    if signature_type != SIGNATURE_TYPE_EOA:
        body["signer"] = signer.address
    if token_id is not None:
        body["tokenId"] = str(int(token_id))
    return body

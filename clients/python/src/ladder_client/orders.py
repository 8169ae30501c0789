"""Orders: exact amounts from (price, size), the EIP-712 ``Order`` hash and signature, and the
``POST /order`` / ``POST /orders`` bodies (API.md §2.3, §4, §8)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Optional, Sequence, Union

from eth_utils.address import to_checksum_address

from .eip712 import ExchangeDomain, digest, hex_bytes, order_struct_hash
from .signing import Signer
from .units import PriceLike, Side, amounts_from_price_and_size, price_to_ticks, shares_of

#: ``signatureType`` of a smart-account (ERC-1271) signature: the only one orders may use.
SIGNATURE_TYPE_SMART_ACCOUNT = 3
#: ``signatureType`` of a direct EOA signature (accepted on cancels only).
SIGNATURE_TYPE_EOA = 0
ZERO_IDENTIFIER = "0x" + "00" * 16
ZERO_METADATA = "0x" + "00" * 32


class OrderType(str, Enum):
    """``orderType`` of a placement."""

    GTC = "GTC"
    GTD = "GTD"
    FOK = "FOK"
    FAK = "FAK"


@dataclass(frozen=True)
class Order:
    """An unsigned order with the signed fields of API.md §2.3 (integers as Python ``int``)."""

    salt: int
    maker: str
    signer: str
    beneficiary: str
    token_id: int
    maker_amount: int
    taker_amount: int
    expiration: int
    nonce: int
    identifier: str
    metadata: str
    side: Side
    signature_type: int

    def message(self) -> dict[str, Any]:
        """The struct as EIP-712 typed data (the wire names, integers and raw bytes)."""
        return {
            "salt": self.salt,
            "maker": self.maker,
            "signer": self.signer,
            "beneficiary": self.beneficiary,
            "tokenId": self.token_id,
            "makerAmount": self.maker_amount,
            "takerAmount": self.taker_amount,
            "expiration": self.expiration,
            "nonce": self.nonce,
            "identifier": hex_bytes(self.identifier, 16, "identifier"),
            "metadata": hex_bytes(self.metadata, 32, "metadata"),
            "side": self.side.code,
            "signatureType": self.signature_type,
        }

    def digest(self, domain: ExchangeDomain = ExchangeDomain()) -> bytes:
        """The EIP-712 digest: the order hash (``orderID``, ``order_hash``)."""
        return digest(domain.separator(), order_struct_hash(self.message()))

    def order_hash(self, domain: ExchangeDomain = ExchangeDomain()) -> str:
        """The order hash as ``0x`` + 64 lowercase hex digits."""
        return "0x" + self.digest(domain).hex()

    def sign(self, signer: Signer, domain: ExchangeDomain = ExchangeDomain()) -> "SignedOrder":
        """The order signed by ``signer`` (which should be the order's ``signer``)."""
        signature = signer.sign_typed(domain, "Order", self.message(), self.digest(domain))
        return SignedOrder(order=self, signature=signature)

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> "Order":
        """An order from its wire form (``side`` as ``0``/``1`` or ``"BUY"``/``"SELL"``)."""
        return cls(
            salt=int(value["salt"]),
            maker=to_checksum_address(value["maker"]),
            signer=to_checksum_address(value["signer"]),
            beneficiary=to_checksum_address(value["beneficiary"]),
            token_id=int(value["tokenId"]),
            maker_amount=int(value["makerAmount"]),
            taker_amount=int(value["takerAmount"]),
            expiration=int(value["expiration"]),
            nonce=int(value["nonce"]),
            identifier=value["identifier"],
            metadata=value["metadata"],
            side=Side.of(value["side"]),
            signature_type=int(value["signatureType"]),
        )


@dataclass(frozen=True)
class SignedOrder:
    """An order and its signature."""

    order: Order
    signature: str

    def to_json(self) -> dict[str, Any]:
        """The ``order`` object of a ``POST /order`` body, fields in the Rust client's order."""
        o = self.order
        return {
            "salt": str(o.salt),
            "maker": o.maker,
            "signer": o.signer,
            "beneficiary": o.beneficiary,
            "tokenId": str(o.token_id),
            "makerAmount": str(o.maker_amount),
            "takerAmount": str(o.taker_amount),
            "expiration": str(o.expiration),
            "nonce": str(o.nonce),
            "identifier": "0x" + hex_bytes(o.identifier, 16, "identifier").hex(),
            "metadata": "0x" + hex_bytes(o.metadata, 32, "metadata").hex(),
            "side": o.side.code,
            "signatureType": o.signature_type,
            "signature": self.signature,
        }

    def order_hash(self, domain: ExchangeDomain = ExchangeDomain()) -> str:
        """The order hash (see :meth:`Order.order_hash`)."""
        return self.order.order_hash(domain)


@dataclass(frozen=True)
class OrderBuilder:
    """An order to sign: what to trade, at what price, and the order parameters.

    ``price`` is a decimal (``"0.55"``, ``Decimal("0.55")``, ``0.55``) or, as an ``int``, a
    number of 0.0001 ticks (``5500``); ``size`` is a whole number of shares. Defaults as in
    the Rust ``OrderBuilder``: the maker is the signer itself (set ``maker`` to the smart
    account), the beneficiary is the maker, ``signatureType`` 3, a random 64-bit salt, no
    expiration, nonce 0, zero identifier and metadata.
    """

    token_id: Union[int, str]
    side: Union[Side, str, int]
    price: PriceLike
    size: Union[int, str]
    maker: Optional[str] = None
    beneficiary: Optional[str] = None
    salt: Optional[int] = None
    expiration: int = 0
    nonce: int = 0
    identifier: str = ZERO_IDENTIFIER
    metadata: str = ZERO_METADATA
    signature_type: int = SIGNATURE_TYPE_SMART_ACCOUNT

    @property
    def price_ticks(self) -> int:
        """The price in ticks of 0.0001 (exact; raises :class:`AmountError` otherwise)."""
        return price_to_ticks(self.price)

    def amounts(self) -> tuple[int, int]:
        """``(makerAmount, takerAmount)`` in base units, exactly as the Rust client computes."""
        return amounts_from_price_and_size(self.side, self.price_ticks, shares_of(self.size))

    def with_(self, **changes: Any) -> "OrderBuilder":
        """A copy with some fields changed."""
        return replace(self, **changes)

    def build(self, signer_address: str) -> Order:
        """The unsigned order, to be signed by ``signer_address``."""
        maker_amount, taker_amount = self.amounts()
        maker = to_checksum_address(self.maker or signer_address)
        return Order(
            salt=secrets.randbits(64) if self.salt is None else int(self.salt),
            maker=maker,
            signer=to_checksum_address(signer_address),
            beneficiary=to_checksum_address(self.beneficiary or maker),
            token_id=int(self.token_id),
            maker_amount=maker_amount,
            taker_amount=taker_amount,
            expiration=int(self.expiration),
            nonce=int(self.nonce),
            identifier=self.identifier,
            metadata=self.metadata,
            side=Side.of(self.side),
            signature_type=int(self.signature_type),
        )

    def sign(self, signer: Signer, domain: ExchangeDomain = ExchangeDomain()) -> SignedOrder:
        """The order built for ``signer`` and signed by it under ``domain``."""
        return self.build(signer.address).sign(signer, domain)


@dataclass(frozen=True)
class PostOrder:
    """One placement: a signed order, its ``orderType`` and the ``postOnly`` flag."""

    order: SignedOrder
    order_type: Union[OrderType, str] = OrderType.GTC
    post_only: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The ``POST /order`` body (also one element of ``POST /orders``)."""
        body: dict[str, Any] = {
            "order": self.order.to_json(),
            "orderType": OrderType(self.order_type).value,
            "postOnly": self.post_only,
        }
        body.update(self.extra)
        return body


def post_orders_body(requests: Sequence[PostOrder]) -> list[dict[str, Any]]:
    """The ``POST /orders`` body: an array of ``POST /order`` bodies (1 to 15)."""
    return [r.to_json() for r in requests]

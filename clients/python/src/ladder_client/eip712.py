"""EIP-712 hashing of the four signed structs (API.md §4, CONTRACT §2): ``Order``,
``CancelOrder`` and ``CancelMarketOrders`` under the exchange domain, ``ClobAuth`` under the
auth domain.

``digest = keccak256(0x1901 ‖ domainSeparator ‖ hashStruct(message))``. The hashes are computed
here field by field (so that type hashes, domain separators and struct hashes can be checked
against the known answers), and :func:`typed_data` gives the same structs in the form
``eth_account`` signs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

from eth_utils.address import to_checksum_address
from eth_utils.crypto import keccak

#: Chain id of every signature (API.md §1).
CHAIN_ID = 3223
#: Default exchange contract: the exchange domain's ``verifyingContract``.
DEFAULT_EXCHANGE_ADDRESS = "0x000000000000000000000000000000000000C10b"
#: ``name`` of the exchange (order-signing) domain.
EXCHANGE_DOMAIN_NAME = "SVC Market CLOB"
#: ``name`` of the L1 authentication domain.
AUTH_DOMAIN_NAME = "ClobAuthDomain"
#: ``version`` of both domains.
DOMAIN_VERSION = "1"
#: The fixed ``message`` of every ClobAuth struct.
CLOB_AUTH_MESSAGE = "This message attests that I control the given wallet"

EXCHANGE_DOMAIN_TYPE = "EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"
AUTH_DOMAIN_TYPE = "EIP712Domain(string name,string version,uint256 chainId)"
ORDER_TYPE = (
    "Order(uint256 salt,address maker,address signer,address beneficiary,uint256 tokenId,"
    "uint256 makerAmount,uint256 takerAmount,uint256 expiration,uint256 nonce,bytes16 identifier,"
    "bytes32 metadata,uint8 side,uint8 signatureType)"
)
CANCEL_ORDER_TYPE = "CancelOrder(uint256 orderId,bytes32 marketId)"
CANCEL_MARKET_ORDERS_TYPE = "CancelMarketOrders(bytes32 marketId)"
CLOB_AUTH_TYPE = "ClobAuth(address address,string timestamp,uint256 nonce,string message)"

#: Field lists of each struct, in type-string order, as ``eth_account`` takes them.
ORDER_FIELDS = [
    {"name": "salt", "type": "uint256"},
    {"name": "maker", "type": "address"},
    {"name": "signer", "type": "address"},
    {"name": "beneficiary", "type": "address"},
    {"name": "tokenId", "type": "uint256"},
    {"name": "makerAmount", "type": "uint256"},
    {"name": "takerAmount", "type": "uint256"},
    {"name": "expiration", "type": "uint256"},
    {"name": "nonce", "type": "uint256"},
    {"name": "identifier", "type": "bytes16"},
    {"name": "metadata", "type": "bytes32"},
    {"name": "side", "type": "uint8"},
    {"name": "signatureType", "type": "uint8"},
]
CANCEL_ORDER_FIELDS = [{"name": "orderId", "type": "uint256"}, {"name": "marketId", "type": "bytes32"}]
CANCEL_MARKET_ORDERS_FIELDS = [{"name": "marketId", "type": "bytes32"}]
CLOB_AUTH_FIELDS = [
    {"name": "address", "type": "address"},
    {"name": "timestamp", "type": "string"},
    {"name": "nonce", "type": "uint256"},
    {"name": "message", "type": "string"},
]


def type_hash(type_string: str) -> bytes:
    """keccak256 of a type string."""
    return keccak(text=type_string)


def _word(value: int) -> bytes:
    if value < 0 or value >= 2**256:
        raise ValueError(f"{value} does not fit in uint256")
    return value.to_bytes(32, "big")


def _address_word(address: str) -> bytes:
    return bytes(12) + bytes.fromhex(to_checksum_address(address)[2:])


def hex_bytes(value: Union[str, bytes], length: int, field: str) -> bytes:
    """``0x`` hex (or raw bytes) of exactly ``length`` bytes."""
    if isinstance(value, (bytes, bytearray)):
        raw = bytes(value)
    else:
        text = value[2:] if value.startswith(("0x", "0X")) else value
        try:
            raw = bytes.fromhex(text)
        except ValueError:
            raise ValueError(f"{field}: expected 0x followed by {2 * length} hex digits") from None
    if len(raw) != length:
        raise ValueError(f"{field}: expected {length} bytes, found {len(raw)}")
    return raw


@dataclass(frozen=True)
class ExchangeDomain:
    """The order-signing domain: name ``SVC Market CLOB``, version ``1``, chain id and the
    exchange contract as ``verifyingContract``."""

    chain_id: int = CHAIN_ID
    verifying_contract: str = DEFAULT_EXCHANGE_ADDRESS

    def separator(self) -> bytes:
        """The domain separator."""
        return keccak(
            type_hash(EXCHANGE_DOMAIN_TYPE)
            + keccak(text=EXCHANGE_DOMAIN_NAME)
            + keccak(text=DOMAIN_VERSION)
            + _word(self.chain_id)
            + _address_word(self.verifying_contract)
        )

    def as_typed_data(self) -> dict[str, Any]:
        """The domain as ``eth_account`` takes it."""
        return {
            "name": EXCHANGE_DOMAIN_NAME,
            "version": DOMAIN_VERSION,
            "chainId": self.chain_id,
            "verifyingContract": to_checksum_address(self.verifying_contract),
        }


@dataclass(frozen=True)
class AuthDomain:
    """The L1 ClobAuth domain: name ``ClobAuthDomain``, version ``1``, chain id, no contract."""

    chain_id: int = CHAIN_ID

    def separator(self) -> bytes:
        """The domain separator."""
        return keccak(
            type_hash(AUTH_DOMAIN_TYPE)
            + keccak(text=AUTH_DOMAIN_NAME)
            + keccak(text=DOMAIN_VERSION)
            + _word(self.chain_id)
        )

    def as_typed_data(self) -> dict[str, Any]:
        """The domain as ``eth_account`` takes it."""
        return {"name": AUTH_DOMAIN_NAME, "version": DOMAIN_VERSION, "chainId": self.chain_id}


def digest(domain_separator: bytes, struct_hash: bytes) -> bytes:
    """``keccak256(0x1901 ‖ domainSeparator ‖ structHash)``."""
    return keccak(b"\x19\x01" + domain_separator + struct_hash)


def order_struct_hash(message: dict[str, Any]) -> bytes:
    """hashStruct of an ``Order`` given with its wire field names (``salt``, ``maker``, ...)."""
    return keccak(
        type_hash(ORDER_TYPE)
        + _word(int(message["salt"]))
        + _address_word(message["maker"])
        + _address_word(message["signer"])
        + _address_word(message["beneficiary"])
        + _word(int(message["tokenId"]))
        + _word(int(message["makerAmount"]))
        + _word(int(message["takerAmount"]))
        + _word(int(message["expiration"]))
        + _word(int(message["nonce"]))
        + hex_bytes(message["identifier"], 16, "identifier").ljust(32, b"\x00")
        + hex_bytes(message["metadata"], 32, "metadata")
        + _word(int(message["side"]))
        + _word(int(message["signatureType"]))
    )


def cancel_order_struct_hash(order_id: int, market_id: Union[str, bytes]) -> bytes:
    """hashStruct of ``CancelOrder(orderId, marketId)``."""
    return keccak(
        type_hash(CANCEL_ORDER_TYPE) + _word(order_id) + hex_bytes(market_id, 32, "marketId")
    )


def cancel_market_orders_struct_hash(market_id: Union[str, bytes]) -> bytes:
    """hashStruct of ``CancelMarketOrders(marketId)``."""
    return keccak(type_hash(CANCEL_MARKET_ORDERS_TYPE) + hex_bytes(market_id, 32, "marketId"))


def clob_auth_struct_hash(address: str, timestamp: str, nonce: int) -> bytes:
    """hashStruct of ``ClobAuth(address, timestamp, nonce, message)``."""
    return keccak(
        type_hash(CLOB_AUTH_TYPE)
        + _address_word(address)
        + keccak(text=timestamp)
        + _word(nonce)
        + keccak(text=CLOB_AUTH_MESSAGE)
    )


def typed_data(domain: Union[ExchangeDomain, AuthDomain], primary_type: str, message: dict[str, Any]) -> dict[str, Any]:
    """A full EIP-712 typed-data document for ``eth_account.messages.encode_typed_data``."""
    fields = {
        "Order": ORDER_FIELDS,
        "CancelOrder": CANCEL_ORDER_FIELDS,
        "CancelMarketOrders": CANCEL_MARKET_ORDERS_FIELDS,
        "ClobAuth": CLOB_AUTH_FIELDS,
    }[primary_type]
    domain_fields = [
        {"name": "name", "type": "string"},
        {"name": "version", "type": "string"},
        {"name": "chainId", "type": "uint256"},
    ]
    if isinstance(domain, ExchangeDomain):
        domain_fields.append({"name": "verifyingContract", "type": "address"})
    return {
        "types": {"EIP712Domain": domain_fields, primary_type: fields},
        "primaryType": primary_type,
        "domain": domain.as_typed_data(),
        "message": message,
    }

"""ERC-4337 user operations as EntryPoint v0.7 sees them (API.md §13.1, CONTRACT §20): the
``PackedUserOperation`` hash, the EIP-191 signature of a smart account's owner over it, and the
redeem call the service's bundler carries out (``execute(exchange, 0, redeem(conditionId))``).

``userOpHash = keccak256(abi.encode(keccak256(pack(op)), entryPoint, chainId))`` where
``pack(op)`` is the ABI encoding of ``sender``, ``nonce``, ``keccak256(initCode)``,
``keccak256(callData)``, ``accountGasLimits`` (``verificationGasLimit ‖ callGasLimit``, 16 bytes
each), ``preVerificationGas``, ``gasFees`` (``maxPriorityFeePerGas ‖ maxFeePerGas``) and
``keccak256(paymasterAndData)``. Known answers: ``protocol/tests/data/user_operation.json``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping, Optional, Union

from eth_abi.abi import encode as abi_encode
from eth_utils.address import to_checksum_address
from eth_utils.crypto import keccak

from .eip712 import CHAIN_ID, hex_bytes
from .signing import Signer

#: The canonical EntryPoint v0.7 address (the service's ``--entry-point`` by default).
ENTRY_POINT_V07 = "0x0000000071727De22E5E9d8BAf0edAc6f37da032"
#: Selector of the smart account's ``execute(address,uint256,bytes)`` (SimpleAccount's).
EXECUTE_SELECTOR = bytes.fromhex("b61d27f6")
#: Selector of the exchange's ``redeem(bytes32)``.
REDEEM_SELECTOR = bytes.fromhex("eda1122c")

#: Gas limits a redeem operation carries by default (the service's own bundler charges none).
DEFAULT_CALL_GAS_LIMIT = 100_000
DEFAULT_VERIFICATION_GAS_LIMIT = 100_000
DEFAULT_PRE_VERIFICATION_GAS = 50_000
DEFAULT_MAX_FEE_PER_GAS = 1
DEFAULT_MAX_PRIORITY_FEE_PER_GAS = 1

_U128 = 2**128
_U256 = 2**256

BytesLike = Union[str, bytes]


def format_quantity(value: int) -> str:
    """A JSON-RPC quantity: ``0x`` hex without leading zeros (``0x0`` for zero)."""
    if value < 0:
        raise ValueError(f"{value}: a quantity is not negative")
    return hex(value)


def parse_quantity(text: str, field: str = "quantity") -> int:
    """Reads a JSON-RPC quantity (``0x`` and 1 to 64 hex digits)."""
    digits = text[2:] if isinstance(text, str) and text.startswith("0x") else None
    if not digits or len(digits) > 64:
        raise ValueError(f"{field}: expected a 0x hex quantity")
    try:
        return int(digits, 16)
    except ValueError:
        raise ValueError(f"{field}: expected a 0x hex quantity") from None


def _data(value: BytesLike, field: str) -> bytes:
    """``0x`` hex bytes (any length) or raw bytes."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if not value.startswith("0x"):
        raise ValueError(f"{field}: expected 0x hex bytes")
    try:
        return bytes.fromhex(value[2:])
    except ValueError:
        raise ValueError(f"{field}: expected 0x hex bytes") from None


def _hex(data: bytes) -> str:
    return "0x" + data.hex()


def _check_range(value: int, bound: int, field: str) -> int:
    if not 0 <= value < bound:
        raise ValueError(f"{field}: {value} does not fit in {bound.bit_length() - 1} bits")
    return value


def redeem_call_data(condition_id: BytesLike) -> bytes:
    """``redeem(bytes32 conditionId)``'s call data (selector ``0xeda1122c``)."""
    return REDEEM_SELECTOR + hex_bytes(condition_id, 32, "conditionId")


def execute_call_data(dest: str, value: int, func: bytes) -> bytes:
    """``execute(address dest, uint256 value, bytes func)``'s call data (selector ``0xb61d27f6``)."""
    return EXECUTE_SELECTOR + abi_encode(["address", "uint256", "bytes"], [to_checksum_address(dest), value, func])


def execute_redeem_call_data(exchange: str, condition_id: BytesLike) -> bytes:
    """``execute(exchange, 0, redeem(conditionId))``: what a redeem operation's account runs."""
    return execute_call_data(exchange, 0, redeem_call_data(condition_id))


def eip191_digest(user_op_hash: BytesLike) -> bytes:
    """The digest an owner signs: ``keccak256("\\x19Ethereum Signed Message:\\n32" ‖ userOpHash)``."""
    return keccak(b"\x19Ethereum Signed Message:\n32" + hex_bytes(user_op_hash, 32, "userOpHash"))


def sign_user_op_hash(signer: Signer, user_op_hash: BytesLike) -> str:
    """The owner's 65-byte signature (``0x`` + 130 hex) over the EIP-191 message of the hash,
    as SimpleAccount checks it."""
    return signer.sign_eip191(hex_bytes(user_op_hash, 32, "userOpHash"))


@dataclass(frozen=True)
class UserOperation:
    """A user operation in the JSON-RPC form of ERC-4337 v0.7 (unpacked fields).

    Quantities are ``int``; byte fields are raw ``bytes``; addresses are text. ``nonce`` is the
    key (upper 192 bits) and the sequence number (lower 64 bits).
    """

    sender: str
    nonce: int
    call_data: bytes
    call_gas_limit: int = DEFAULT_CALL_GAS_LIMIT
    verification_gas_limit: int = DEFAULT_VERIFICATION_GAS_LIMIT
    pre_verification_gas: int = DEFAULT_PRE_VERIFICATION_GAS
    max_fee_per_gas: int = DEFAULT_MAX_FEE_PER_GAS
    max_priority_fee_per_gas: int = DEFAULT_MAX_PRIORITY_FEE_PER_GAS
    factory: Optional[str] = None
    factory_data: bytes = b""
    paymaster: Optional[str] = None
    paymaster_verification_gas_limit: int = 0
    paymaster_post_op_gas_limit: int = 0
    paymaster_data: bytes = b""
    signature: bytes = b""

    def __post_init__(self) -> None:
        _check_range(self.nonce, _U256, "nonce")
        _check_range(self.pre_verification_gas, _U256, "preVerificationGas")
        for name, value in (
            ("callGasLimit", self.call_gas_limit),
            ("verificationGasLimit", self.verification_gas_limit),
            ("maxFeePerGas", self.max_fee_per_gas),
            ("maxPriorityFeePerGas", self.max_priority_fee_per_gas),
            ("paymasterVerificationGasLimit", self.paymaster_verification_gas_limit),
            ("paymasterPostOpGasLimit", self.paymaster_post_op_gas_limit),
        ):
            _check_range(value, _U128, name)

    # ------------------------------------------------------------------ the packed form

    def init_code(self) -> bytes:
        """``initCode``: the factory and its data (empty without a factory)."""
        if self.factory is None:
            return b""
        return hex_bytes(to_checksum_address(self.factory), 20, "factory") + self.factory_data

    def paymaster_and_data(self) -> bytes:
        """``paymasterAndData``: the paymaster, its two gas limits (16 bytes each) and its data."""
        if self.paymaster is None:
            return b""
        return (
            hex_bytes(to_checksum_address(self.paymaster), 20, "paymaster")
            + self.paymaster_verification_gas_limit.to_bytes(16, "big")
            + self.paymaster_post_op_gas_limit.to_bytes(16, "big")
            + self.paymaster_data
        )

    def account_gas_limits(self) -> bytes:
        """``accountGasLimits``: ``verificationGasLimit ‖ callGasLimit``, 16 bytes each."""
        return self.verification_gas_limit.to_bytes(16, "big") + self.call_gas_limit.to_bytes(16, "big")

    def gas_fees(self) -> bytes:
        """``gasFees``: ``maxPriorityFeePerGas ‖ maxFeePerGas``, 16 bytes each."""
        return self.max_priority_fee_per_gas.to_bytes(16, "big") + self.max_fee_per_gas.to_bytes(16, "big")

    def pack_hash(self) -> bytes:
        """``keccak256(pack(op))``: the operation's fields without its signature."""
        return keccak(
            abi_encode(
                ["address", "uint256", "bytes32", "bytes32", "bytes32", "uint256", "bytes32", "bytes32"],
                [
                    to_checksum_address(self.sender),
                    self.nonce,
                    keccak(self.init_code()),
                    keccak(self.call_data),
                    self.account_gas_limits(),
                    self.pre_verification_gas,
                    self.gas_fees(),
                    keccak(self.paymaster_and_data()),
                ],
            )
        )

    def hash(self, entry_point: str = ENTRY_POINT_V07, chain_id: int = CHAIN_ID) -> bytes:
        """The ``userOpHash`` EntryPoint v0.7 gives the operation:
        ``keccak256(abi.encode(keccak256(pack(op)), entryPoint, chainId))``."""
        return keccak(
            abi_encode(["bytes32", "address", "uint256"], [self.pack_hash(), to_checksum_address(entry_point), chain_id])
        )

    def signed(self, signer: Signer, entry_point: str = ENTRY_POINT_V07, chain_id: int = CHAIN_ID) -> "UserOperation":
        """The same operation with ``signer``'s EIP-191 signature of its ``userOpHash``."""
        signature = sign_user_op_hash(signer, self.hash(entry_point, chain_id))
        return replace(self, signature=_data(signature, "signature"))

    # ------------------------------------------------------------------ JSON-RPC form

    def to_json(self) -> dict[str, str]:
        """The RPC object of v0.7 (quantities as ``0x`` hex; the factory and paymaster fields
        only when there is one)."""
        out: dict[str, str] = {"sender": to_checksum_address(self.sender), "nonce": format_quantity(self.nonce)}
        if self.factory is not None:
            out["factory"] = to_checksum_address(self.factory)
            out["factoryData"] = _hex(self.factory_data)
        out.update(
            {
                "callData": _hex(self.call_data),
                "callGasLimit": format_quantity(self.call_gas_limit),
                "verificationGasLimit": format_quantity(self.verification_gas_limit),
                "preVerificationGas": format_quantity(self.pre_verification_gas),
                "maxFeePerGas": format_quantity(self.max_fee_per_gas),
                "maxPriorityFeePerGas": format_quantity(self.max_priority_fee_per_gas),
            }
        )
        if self.paymaster is not None:
            out["paymaster"] = to_checksum_address(self.paymaster)
            out["paymasterVerificationGasLimit"] = format_quantity(self.paymaster_verification_gas_limit)
            out["paymasterPostOpGasLimit"] = format_quantity(self.paymaster_post_op_gas_limit)
            out["paymasterData"] = _hex(self.paymaster_data)
        out["signature"] = _hex(self.signature)
        return out

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> "UserOperation":
        """Reads the RPC object of v0.7; a ``ValueError`` names the bad field."""

        def quantity(name: str, default: Optional[int] = None) -> int:
            text = value.get(name)
            if text is None:
                if default is None:
                    raise ValueError(f"{name}: required")
                return default
            return parse_quantity(text, name)

        def data(name: str) -> bytes:
            text = value.get(name)
            return b"" if text is None else _data(text, name)

        for name in ("sender", "callData", "signature"):
            if value.get(name) is None:
                raise ValueError(f"{name}: required")
        return cls(
            sender=to_checksum_address(value["sender"]),
            nonce=quantity("nonce"),
            call_data=data("callData"),
            call_gas_limit=quantity("callGasLimit"),
            verification_gas_limit=quantity("verificationGasLimit"),
            pre_verification_gas=quantity("preVerificationGas"),
            max_fee_per_gas=quantity("maxFeePerGas"),
            max_priority_fee_per_gas=quantity("maxPriorityFeePerGas"),
            factory=value.get("factory"),
            factory_data=data("factoryData"),
            paymaster=value.get("paymaster"),
            paymaster_verification_gas_limit=quantity("paymasterVerificationGasLimit", 0),
            paymaster_post_op_gas_limit=quantity("paymasterPostOpGasLimit", 0),
            paymaster_data=data("paymasterData"),
            signature=data("signature"),
        )


def redeem_operation(
    sender: str,
    condition_id: BytesLike,
    sequence: int,
    *,
    exchange: str,
    call_gas_limit: int = DEFAULT_CALL_GAS_LIMIT,
    verification_gas_limit: int = DEFAULT_VERIFICATION_GAS_LIMIT,
    pre_verification_gas: int = DEFAULT_PRE_VERIFICATION_GAS,
    max_fee_per_gas: int = DEFAULT_MAX_FEE_PER_GAS,
    max_priority_fee_per_gas: int = DEFAULT_MAX_PRIORITY_FEE_PER_GAS,
) -> UserOperation:
    """The unsigned redeem operation of ``condition_id`` for smart account ``sender``: nonce key
    0 and ``sequence``, call data ``execute(exchange, 0, redeem(conditionId))``, the given gas
    fields (the service's own bundler charges no gas), no factory, no paymaster."""
    _check_range(sequence, 2**64, "nonce sequence")
    return UserOperation(
        sender=to_checksum_address(sender),
        nonce=sequence,
        call_data=execute_redeem_call_data(exchange, condition_id),
        call_gas_limit=call_gas_limit,
        verification_gas_limit=verification_gas_limit,
        pre_verification_gas=pre_verification_gas,
        max_fee_per_gas=max_fee_per_gas,
        max_priority_fee_per_gas=max_priority_fee_per_gas,
    )

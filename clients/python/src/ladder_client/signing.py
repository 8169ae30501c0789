"""Signing with an EOA key through ``eth_account``: EIP-712 typed data for orders, cancels and
ClobAuth, and EIP-191 messages. Signatures are 65 bytes ``r ‖ s ‖ v`` (low-s, ``v`` 27/28),
written as ``0x`` + 130 hex digits, as the service expects (API.md §4)."""

from __future__ import annotations

from typing import Any, Union

from eth_account import Account
from eth_account.messages import encode_defunct, encode_typed_data
from eth_account.signers.local import LocalAccount

from .eip712 import AuthDomain, ExchangeDomain, typed_data


class Signer:
    """An EOA private key and its address."""

    def __init__(self, key: Union[str, bytes, LocalAccount]) -> None:
        """A signer from a ``0x`` + 64 hex private key, raw key bytes or a ``LocalAccount``."""
        self._account: LocalAccount = key if isinstance(key, LocalAccount) else Account.from_key(key)

    @property
    def address(self) -> str:
        """The EOA's address in EIP-55 form."""
        return str(self._account.address)

    def sign_typed(
        self,
        domain: Union[ExchangeDomain, AuthDomain],
        primary_type: str,
        message: dict[str, Any],
        expected_digest: bytes,
    ) -> str:
        """Signs an EIP-712 struct with ``eth_account`` and returns ``0x`` + 130 hex digits.

        ``expected_digest`` is the digest this package computed itself; signing refuses to go on
        if ``eth_account`` hashed the struct otherwise (they must agree bit for bit).
        """
        signable = encode_typed_data(full_message=typed_data(domain, primary_type, message))
        signed = self._account.sign_message(signable)
        if bytes(signed.message_hash) != expected_digest:
            raise AssertionError(
                f"EIP-712 digest mismatch for {primary_type}: eth_account "
                f"0x{bytes(signed.message_hash).hex()}, computed 0x{expected_digest.hex()}"
            )
        return "0x" + bytes(signed.signature).hex()

    def sign_eip191(self, message: bytes) -> str:
        """Signs ``"\\x19Ethereum Signed Message:\\n" + len + message`` (EIP-191 personal sign)."""
        signed = self._account.sign_message(encode_defunct(primitive=message))
        return "0x" + bytes(signed.signature).hex()

    def __repr__(self) -> str:
        return f"Signer(address={self.address})"

"""Authentication headers (API.md §6, CONTRACT §4): L1 (a ClobAuth signature by the wallet),
L2 (an HMAC of the request with the API secret), and the ``/ws/user`` subscribe message."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
import uuid
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from eth_utils.address import to_checksum_address

from .eip712 import AuthDomain, clob_auth_struct_hash, digest
from .signing import Signer

HEADER_ADDRESS = "SVC_ADDRESS"
HEADER_SIGNATURE = "SVC_SIGNATURE"
HEADER_TIMESTAMP = "SVC_TIMESTAMP"
HEADER_NONCE = "SVC_NONCE"
HEADER_API_KEY = "SVC_API_KEY"
HEADER_PASSPHRASE = "SVC_PASSPHRASE"

#: How far a signed timestamp may be from the server's time, in seconds.
CLOCK_SKEW_MAX_S = 30
#: Namespace of owner ids: the RFC 4122 URL namespace.
OWNER_NAMESPACE = uuid.UUID("6ba7b811-9dad-11d1-80b4-00c04fd430c8")


def unix_now_s() -> int:
    """The current Unix time in whole seconds."""
    return int(time.time())


def owner_uuid(address: str) -> str:
    """The ``owner`` id of an address: UUIDv5 of its lowercase ``0x`` hex (API.md §7)."""
    return str(uuid.uuid5(OWNER_NAMESPACE, address.lower()))


@dataclass(frozen=True)
class Credentials:
    """API credentials: ``apiKey``, the base64 ``secret`` and the ``passphrase``."""

    api_key: str
    secret: str
    passphrase: str

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> "Credentials":
        """Credentials from a ``POST /auth/api-key`` or ``GET /auth/derive-api-key`` answer."""
        return cls(api_key=body["apiKey"], secret=body["secret"], passphrase=body["passphrase"])

    def to_json(self) -> dict[str, str]:
        """The credentials in the service's camelCase form."""
        return {"apiKey": self.api_key, "secret": self.secret, "passphrase": self.passphrase}

    def __repr__(self) -> str:
        return f"Credentials(api_key={self.api_key!r}, secret=..., passphrase=...)"


def decode_secret(secret: str) -> bytes:
    """Decodes an API secret: URL-safe or standard base64, padded or not."""
    text = secret.strip().replace("+", "-").replace("/", "_").rstrip("=")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def l2_signature(secret: str, timestamp: str, method: str, path_with_query: str, body: bytes | str = b"") -> str:
    """URL-safe base64 (padded) HMAC-SHA256 of ``timestamp + METHOD + path-with-query + body``."""
    raw_body = body.encode() if isinstance(body, str) else body
    message = (timestamp + method.upper() + path_with_query).encode() + raw_body
    mac = hmac.new(decode_secret(secret), message, hashlib.sha256)
    return base64.urlsafe_b64encode(mac.digest()).decode()


def l1_headers(
    signer: Signer,
    address: Optional[str] = None,
    *,
    nonce: int = 0,
    timestamp: Optional[int] = None,
    domain: AuthDomain = AuthDomain(),
) -> dict[str, str]:
    """The four L1 headers for ``address`` (the signer's own address, or a smart account it
    controls), signed as ``ClobAuth(address, timestamp, nonce, message)``."""
    address = to_checksum_address(address or signer.address)
    stamp = str(unix_now_s() if timestamp is None else timestamp)
    struct_hash = clob_auth_struct_hash(address, stamp, nonce)
    message = {
        "address": address,
        "timestamp": stamp,
        "nonce": nonce,
        "message": "This message attests that I control the given wallet",
    }
    signature = signer.sign_typed(domain, "ClobAuth", message, digest(domain.separator(), struct_hash))
    return {
        HEADER_ADDRESS: address,
        HEADER_SIGNATURE: signature,
        HEADER_TIMESTAMP: stamp,
        HEADER_NONCE: str(nonce),
    }


def l2_headers(
    credentials: Credentials,
    method: str,
    path_with_query: str,
    body: bytes | str = b"",
    *,
    address: Optional[str] = None,
    timestamp: Optional[int] = None,
) -> dict[str, str]:
    """L2 headers of one request. ``path_with_query`` must be the request target exactly as
    sent; ``body`` the raw body bytes (empty when none). ``address``, when given, is sent as
    ``SVC_ADDRESS`` and must be the key's address."""
    stamp = str(unix_now_s() if timestamp is None else timestamp)
    headers = {
        HEADER_API_KEY: credentials.api_key,
        HEADER_TIMESTAMP: stamp,
        HEADER_PASSPHRASE: credentials.passphrase,
        HEADER_SIGNATURE: l2_signature(credentials.secret, stamp, method, path_with_query, body),
    }
    if address is not None:
        headers[HEADER_ADDRESS] = to_checksum_address(address)
    return headers


def ws_user_subscribe(
    credentials: Credentials,
    markets: Sequence[str] = (),
    *,
    cancel_on_disconnect: bool = False,
    timestamp: Optional[int] = None,
) -> dict[str, Any]:
    """The first ``/ws/user`` message: the L2 HMAC of ``timestamp + "GET" + "/ws/user"`` in
    ``auth``, the condition ids to follow (empty: all) and the dead-man switch flag."""
    stamp = str(unix_now_s() if timestamp is None else timestamp)
    message: dict[str, Any] = {
        "type": "user",
        "auth": {
            "apiKey": credentials.api_key,
            "passphrase": credentials.passphrase,
            "timestamp": stamp,
            "signature": l2_signature(credentials.secret, stamp, "GET", "/ws/user"),
        },
        "markets": list(markets),
    }
    if cancel_on_disconnect:
        message["cancel_on_disconnect"] = True
    return message


def check_clock_skew(local_s: int, server_s: int) -> None:
    """Raises ``RuntimeError`` when the local clock is more than 30 s from the server's:
    signed timestamps would be refused (API.md §18)."""
    skew = abs(local_s - server_s)
    if skew > CLOCK_SKEW_MAX_S:
        direction = "ahead of" if local_s > server_s else "behind"
        raise RuntimeError(
            f"the local clock is {skew} s {direction} the server's (GET /time); signed "
            f"timestamps must be within {CLOCK_SKEW_MAX_S} s of it: set the clock right"
        )

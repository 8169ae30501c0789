"""The service's ERC-4337 bundler (``POST /bundler``, JSON-RPC 2.0, EntryPoint v0.7; API.md
§13.1, CONTRACT §20), and redeeming a resolved market's claimable positions through it.

A redeem is a user operation of the smart account holding the positions, signed by one of its
owners (:mod:`ladder_client.user_ops`). The service publishes its chain id (``eth_chainId``)
and entry point (``eth_supportedEntryPoints``), not the account's nonce: :meth:`Bundler.redeem`
sends sequence 0 first and, when the service answers ``AA25 invalid account nonce`` with
``data.expectedNonce``, signs again with that one (a refused operation changes nothing).
"""

from __future__ import annotations

import itertools
import time
from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

from .eip712 import CHAIN_ID, DEFAULT_EXCHANGE_ADDRESS
from .errors import BundlerError
from .signing import Signer
from .user_ops import ENTRY_POINT_V07, BytesLike, UserOperation, parse_quantity, redeem_operation

if TYPE_CHECKING:
    from .client import LadderClient

Json = Any

#: JSON-RPC code of a refused user operation (``AA24``, ``AA25``, ``nothing to redeem``, ...).
CODE_REFUSED = -32500
#: JSON-RPC code of malformed parameters (the message names the field).
CODE_INVALID_PARAMS = -32602
#: JSON-RPC code of an unknown method.
CODE_METHOD_NOT_FOUND = -32601
#: JSON-RPC code of an invalid request (not JSON, no ``method``).
CODE_INVALID_REQUEST = -32600
#: How many times :meth:`Bundler.redeem` follows an ``AA25`` answer's ``expectedNonce``.
NONCE_RETRIES = 3


def _hash_text(user_op_hash: Union[str, bytes]) -> str:
    if isinstance(user_op_hash, (bytes, bytearray)):
        return "0x" + bytes(user_op_hash).hex()
    return user_op_hash


class Bundler:
    """JSON-RPC calls to ``POST /bundler`` through a :class:`~ladder_client.LadderClient`'s
    HTTP connection (the endpoint is public: no credentials are used).

    A JSON-RPC error raises :class:`~ladder_client.errors.BundlerError` (code, message, data);
    an HTTP status other than 2xx (e.g. the 503 of a standby) raises
    :class:`~ladder_client.errors.LadderError`.
    """

    def __init__(self, client: "LadderClient") -> None:
        self._client = client
        self._ids = itertools.count(1)

    def call(self, method: str, params: Sequence[Any] = ()) -> Json:
        """One JSON-RPC call; its ``result``."""
        request_id = next(self._ids)
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": list(params)}
        answer = self._client.call("POST", "/bundler", body=body)
        if not isinstance(answer, dict):
            raise BundlerError(CODE_INVALID_REQUEST, f"not a JSON-RPC answer: {answer!r}"[:300], method=method)
        error = answer.get("error")
        if error is not None:
            raise BundlerError(
                int(error.get("code", 0)), str(error.get("message", "")), data=error.get("data"), method=method
            )
        if "result" not in answer:
            raise BundlerError(CODE_INVALID_REQUEST, "a JSON-RPC answer without result or error", method=method)
        return answer["result"]

    # ------------------------------------------------------------------ the methods

    def chain_id(self) -> int:
        """``eth_chainId``: the chain id of every ``userOpHash`` (3223 by default)."""
        return parse_quantity(self.call("eth_chainId"), "eth_chainId")

    def supported_entry_points(self) -> list[str]:
        """``eth_supportedEntryPoints``: the service's EntryPoint v0.7 (its ``--entry-point``)."""
        return [str(address) for address in self.call("eth_supportedEntryPoints")]

    def estimate_user_operation_gas(self, op: Union[UserOperation, Json], entry_point: str = ENTRY_POINT_V07) -> Json:
        """``eth_estimateUserOperationGas``: ``{preVerificationGas, verificationGasLimit, callGasLimit}``."""
        return self.call("eth_estimateUserOperationGas", [_op_json(op), entry_point])

    def send_user_operation(self, op: Union[UserOperation, Json], entry_point: str = ENTRY_POINT_V07) -> str:
        """``eth_sendUserOperation``: the operation's ``userOpHash`` once the service took it."""
        return str(self.call("eth_sendUserOperation", [_op_json(op), entry_point]))

    def get_user_operation_receipt(self, user_op_hash: Union[str, bytes]) -> Optional[Json]:
        """``eth_getUserOperationReceipt``: the receipt, or ``None`` for an unknown hash."""
        return self.call("eth_getUserOperationReceipt", [_hash_text(user_op_hash)])

    def get_user_operation_by_hash(self, user_op_hash: Union[str, bytes]) -> Optional[Json]:
        """``eth_getUserOperationByHash``: ``{userOperation, entryPoint, transactionHash,
        blockNumber, blockHash}``, or ``None`` for an unknown hash."""
        return self.call("eth_getUserOperationByHash", [_hash_text(user_op_hash)])

    def wait_for_receipt(self, user_op_hash: Union[str, bytes], timeout_s: float = 30.0, interval_s: float = 0.1) -> Json:
        """Polls :meth:`get_user_operation_receipt` until it answers; ``TimeoutError`` after
        ``timeout_s``. (The service's own bundler answers at once.)"""
        deadline = time.monotonic() + timeout_s
        while True:
            receipt = self.get_user_operation_receipt(user_op_hash)
            if receipt is not None:
                return receipt
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no receipt for user operation {_hash_text(user_op_hash)} after {timeout_s} s")
            time.sleep(interval_s)

    # ------------------------------------------------------------------ redeeming

    def redeem(
        self,
        condition_id: BytesLike,
        smart_account: str,
        owner: Signer,
        *,
        exchange: str = DEFAULT_EXCHANGE_ADDRESS,
        entry_point: Optional[str] = None,
        chain_id: Optional[int] = None,
        nonce: Optional[int] = None,
        wait_timeout_s: float = 30.0,
        **gas: int,
    ) -> Json:
        """Redeems ``smart_account``'s claimable positions in the resolved market
        ``condition_id``: builds ``execute(exchange, 0, redeem(conditionId))``, signs its
        ``userOpHash`` with ``owner`` (one of the account's owners), sends it and returns its
        receipt (``{userOpHash, entryPoint, sender, nonce, success, ..., receipt: {...}}``).

        ``entry_point`` and ``chain_id`` default to what the service publishes; ``nonce`` is the
        sequence number (key 0): without it, 0 is tried and an ``AA25`` answer's
        ``expectedNonce`` followed. ``gas`` may set the fields of
        :func:`~ladder_client.user_ops.redeem_operation`. Raises :class:`BundlerError` when the
        service refuses (``nothing to redeem``, ``market not resolved``, ``AA24 signature
        error``, ``AA20 account not deployed``, ...).
        """
        if entry_point is None:
            points = self.supported_entry_points()
            entry_point = points[0] if points else ENTRY_POINT_V07
        if chain_id is None:
            chain_id = self.chain_id()
        sequence = 0 if nonce is None else nonce
        for attempt in itertools.count():
            op = redeem_operation(smart_account, condition_id, sequence, exchange=exchange, **gas)
            signed = op.signed(owner, entry_point, chain_id)
            try:
                user_op_hash = self.send_user_operation(signed, entry_point)
            except BundlerError as e:
                expected = _expected_sequence(e)
                if nonce is not None or expected is None or expected == sequence or attempt >= NONCE_RETRIES:
                    raise
                sequence = expected
                continue
            return self.wait_for_receipt(user_op_hash, wait_timeout_s)
        raise AssertionError("unreachable")


def _op_json(op: Union[UserOperation, Json]) -> Json:
    return op.to_json() if isinstance(op, UserOperation) else op


def _expected_sequence(error: BundlerError) -> Optional[int]:
    """The sequence number an ``AA25 invalid account nonce`` answer expects (key 0), if given."""
    if error.code != CODE_REFUSED or not error.message.startswith("AA25"):
        return None
    expected = error.data.get("expectedNonce") if isinstance(error.data, dict) else None
    if not isinstance(expected, str):
        return None
    try:
        value = parse_quantity(expected, "expectedNonce")
    except ValueError:
        return None
    return value if value < 2**64 else None

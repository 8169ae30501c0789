"""Redeeming through the service's ERC-4337 bundler (API.md §13.1, CONTRACT §20).

The known answers of protocol/tests/data/user_operation.json (v0.7 userOpHash, the
execute/redeem call data, the owner's EIP-191 signature) without a service; then, against the
live service: a smart account linked to an owner through the admin surface, a winning position
in a fresh market resolved by the admin, the redeem through the client (claimable entry gone,
collateral credited, receipt and by-hash answers), and the refusals as typed JSON-RPC errors.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

import pytest
from eth_account import Account

from conftest import DATA_DIR, Service
from contract import Contract
from ladder_client import (
    CHAIN_ID,
    DEFAULT_EXCHANGE_ADDRESS,
    ENTRY_POINT_V07,
    BundlerError,
    LadderClient,
    Signer,
    UserOperation,
    eip191_digest,
    execute_redeem_call_data,
    redeem_call_data,
    redeem_operation,
    sign_user_op_hash,
)

VECTORS: dict[str, Any] = json.loads((DATA_DIR / "user_operation.json").read_text())


# ---------------------------------------------------------------------- known answers


def test_redeem_and_execute_call_data_vectors() -> None:
    assert "0x" + redeem_call_data(VECTORS["conditionId"]).hex() == VECTORS["redeemCalldata"]
    call_data = execute_redeem_call_data(VECTORS["exchange"], VECTORS["conditionId"])
    assert "0x" + call_data.hex() == VECTORS["executeCalldata"]
    assert VECTORS["exchange"].lower() == DEFAULT_EXCHANGE_ADDRESS.lower()


@pytest.mark.parametrize("case", VECTORS["cases"], ids=["plain", "factory-and-paymaster"])
def test_user_operation_vector(case: dict[str, Any]) -> None:
    op = UserOperation.from_json(case["op"])
    assert op.to_json() == case["op"], "the RPC form round-trips field for field"
    user_op_hash = op.hash(case["entryPoint"], case["chainId"])
    assert "0x" + user_op_hash.hex() == case["userOpHash"]
    assert "0x" + eip191_digest(user_op_hash).hex() == case["eip191Digest"]
    owner = Signer(case["ownerKey"])
    assert owner.address == case["owner"]
    assert sign_user_op_hash(owner, user_op_hash) == case["signature"]
    signed = op.signed(owner, case["entryPoint"], case["chainId"])
    assert signed.to_json()["signature"] == case["signature"]
    # The signature is not part of the hash.
    assert signed.hash(case["entryPoint"], case["chainId"]) == user_op_hash
    # Recovered by eth_account from the EIP-191 message: the owner.
    from eth_account.messages import encode_defunct

    recovered = Account.recover_message(encode_defunct(primitive=user_op_hash), signature=case["signature"])
    assert recovered == case["owner"]


def test_the_redeem_operation_builder_gives_the_first_vector() -> None:
    case = VECTORS["cases"][0]
    op = redeem_operation(
        case["op"]["sender"],
        VECTORS["conditionId"],
        0,
        exchange=VECTORS["exchange"],
        call_gas_limit=0x186A0,
        verification_gas_limit=0x249F0,
        pre_verification_gas=0xC350,
        max_fee_per_gas=0x3B9ACA00,
        max_priority_fee_per_gas=0x3B9ACA00,
    )
    signed = op.signed(Signer(case["ownerKey"]), ENTRY_POINT_V07, CHAIN_ID)
    assert "0x" + signed.hash().hex() == case["userOpHash"]
    assert signed.to_json() == dict(case["op"], signature=case["signature"])


@pytest.mark.parametrize(
    "field, value, why",
    [
        ("nonce", "seven", "nonce: expected a 0x hex quantity"),
        ("callData", "0xabc", "callData: expected 0x hex bytes"),
        ("callGasLimit", "0x1" + "0" * 32, "callGasLimit"),
        ("signature", None, "signature: required"),
    ],
)
def test_a_malformed_operation_is_refused_before_sending(field: str, value: Any, why: str) -> None:
    op = dict(VECTORS["cases"][0]["op"])
    if value is None:
        del op[field]
    else:
        op[field] = value
    with pytest.raises(ValueError, match=why):
        UserOperation.from_json(op)


# ---------------------------------------------------------------------- the live service


def _fresh_market(service: Service) -> tuple[str, str, str]:
    """A new market (condition id, Yes token, No token) created through the admin surface."""
    condition = "0x" + secrets.token_hex(32)
    yes, no = str(secrets.randbits(200)), str(secrets.randbits(200))
    body = {"condition_id": condition, "yes_token_id": yes, "no_token_id": no, "minimum_tick_size": 0.01}
    r = service.admin("POST", "/admin/markets", body)
    assert r.status_code == 200, r.text
    return condition, yes, no


def _linked_smart_account(service: Service) -> tuple[str, Any]:
    """A new smart account linked to a new owner EOA: (account address, owner's LocalAccount)."""
    owner = Account.create()
    account = Account.create().address  # any address: the registry makes it a smart account
    r = service.admin("POST", "/admin/accounts", {"account": account, "owner": owner.address})
    assert r.status_code == 200, r.text
    return account, owner


def _collateral(client: LadderClient) -> int:
    return int(client.get_balance_allowance("COLLATERAL")["balance"])


def test_redeem_through_the_bundler_pays_the_winning_position_once(service: Service) -> None:
    condition, yes, no = _fresh_market(service)
    account, owner = _linked_smart_account(service)
    for asset, amount in ((yes, 7_000_000), (no, 3_000_000)):
        r = service.admin("POST", "/admin/deposits", {"address": account, "asset": asset, "amount": str(amount)})
        assert r.status_code == 200, r.text
    client = LadderClient(service.url, owner.key, account=account)
    client.create_or_derive_api_key()  # the owner's L1 for the smart account
    bundler = client.bundler()
    assert bundler.chain_id() == CHAIN_ID
    assert [a.lower() for a in bundler.supported_entry_points()] == [ENTRY_POINT_V07.lower()]

    # Not resolved yet: refused, nothing changes.
    with pytest.raises(BundlerError) as refused:
        client.redeem(condition)
    assert (refused.value.code, refused.value.message) == (-32500, "market not resolved")
    assert refused.value.method == "eth_sendUserOperation"

    r = service.admin("POST", f"/admin/markets/{condition}/resolve", {"outcome": "Yes"})
    assert r.status_code == 200, r.text
    [entry] = client.get_claimable()["claimable"]
    assert (entry["market_id"], entry["token_id"], entry["balance"], entry["refund_reason"]) == (
        condition, yes, "7000000", "resolved_winner"
    )
    before = _collateral(client)

    # A signature by a key that is not the account's owner.
    with pytest.raises(BundlerError) as wrong:
        client.redeem(condition, owner_key=Account.create().key)
    assert (wrong.value.code, wrong.value.message) == (-32500, "AA24 signature error")

    receipt = client.redeem(condition)
    expected_op = redeem_operation(account, condition, 0, exchange=DEFAULT_EXCHANGE_ADDRESS)
    expected_hash = "0x" + expected_op.hash(ENTRY_POINT_V07, CHAIN_ID).hex()
    assert receipt["userOpHash"] == expected_hash, receipt
    assert receipt["success"] is True
    assert receipt["sender"].lower() == account.lower()
    assert int(receipt["nonce"], 16) == 0
    assert receipt["entryPoint"].lower() == ENTRY_POINT_V07.lower()
    assert receipt["actualGasCost"] == "0x0" and receipt["actualGasUsed"] == "0x0"
    tx = receipt["receipt"]["transactionHash"]
    assert tx.startswith("0x") and len(tx) == 66, receipt
    # docs/openapi.yaml's receipt example has the live receipt's fields.
    documented = Contract().doc["paths"]["/bundler"]["post"]["responses"]["200"]["content"]["application/json"]
    example = documented["examples"]["receipt"]["value"]["result"]
    assert set(example) == set(receipt) and set(example["receipt"]) == set(receipt["receipt"])

    # The claimable entry left the list; each winning unit paid one collateral unit.
    assert client.get_claimable()["claimable"] == []
    assert _collateral(client) - before == 7_000_000

    # The receipt and the operation, by hash.
    assert client.get_user_operation_receipt(expected_hash) == receipt
    by_hash = client.get_user_operation_by_hash(expected_hash)
    assert by_hash is not None
    assert by_hash["userOperation"]["callData"] == "0x" + expected_op.call_data.hex()
    assert by_hash["userOperation"]["sender"].lower() == account.lower()
    assert by_hash["transactionHash"] == tx
    unknown = "0x" + "ab" * 32
    assert client.get_user_operation_receipt(unknown) is None
    assert client.get_user_operation_by_hash(unknown) is None

    # Nonce 0 is spent: the service names the next one; following it finds nothing to redeem.
    with pytest.raises(BundlerError) as spent:
        client.redeem(condition, nonce=0)
    assert (spent.value.code, spent.value.message) == (-32500, "AA25 invalid account nonce")
    assert spent.value.data["expectedNonce"] == "0x1"
    with pytest.raises(BundlerError) as again:
        client.redeem(condition)
    assert (again.value.code, again.value.message) == (-32500, "nothing to redeem")
    assert _collateral(client) - before == 7_000_000


def test_refusals_are_typed_json_rpc_errors(service: Service) -> None:
    condition, _, _ = _fresh_market(service)
    account, owner = _linked_smart_account(service)
    client = LadderClient(service.url)
    contract = Contract()
    op = redeem_operation(account, condition, 0, exchange=DEFAULT_EXCHANGE_ADDRESS).signed(Signer(owner.key))

    # A malformed field: -32602, the message names it.
    for field, value in (("nonce", "seven"), ("sender", "0x12"), ("callData", "0xabc")):
        bad = dict(op.to_json(), **{field: value})
        with pytest.raises(BundlerError) as refused:
            client.send_user_operation(bad, ENTRY_POINT_V07)
        assert refused.value.code == -32602, refused.value
        assert refused.value.message.startswith(field), refused.value
    missing = op.to_json()
    del missing["signature"]
    with pytest.raises(BundlerError) as refused:
        client.send_user_operation(missing)
    assert (refused.value.code, refused.value.message) == (-32602, "signature: required")
    # A call that is not a redeem on this exchange, another entry point.
    other = redeem_operation(account, condition, 0, exchange="0x" + "11" * 20).signed(Signer(owner.key))
    with pytest.raises(BundlerError) as refused:
        client.send_user_operation(other)
    assert refused.value.code == -32602 and refused.value.message.startswith("callData"), refused.value
    with pytest.raises(BundlerError) as refused:
        client.send_user_operation(op, "0x" + "22" * 20)
    assert refused.value.code == -32602, refused.value
    # An account no registry knows; an unknown method.
    stranger = redeem_operation(Account.create().address, condition, 0, exchange=DEFAULT_EXCHANGE_ADDRESS)
    with pytest.raises(BundlerError) as refused:
        client.send_user_operation(stranger.signed(Signer(owner.key)))
    assert (refused.value.code, refused.value.message) == (-32500, "AA20 account not deployed")
    with pytest.raises(BundlerError) as refused:
        client.bundler().call("eth_sendBundle", [])
    assert refused.value.code == -32601

    # The raw answers have the documented /bundler shapes (docs/openapi.yaml).
    raw = {"jsonrpc": "2.0", "id": 3, "method": "eth_sendUserOperation", "params": [dict(op.to_json(), nonce="seven"), ENTRY_POINT_V07]}
    answer = contract.check(client.request("POST", "/bundler", body=raw), "/bundler")
    assert answer["id"] == 3 and answer["error"]["code"] == -32602
    raw = {"jsonrpc": "2.0", "id": 4, "method": "eth_getUserOperationReceipt", "params": ["0x" + "cd" * 32]}
    assert contract.check(client.request("POST", "/bundler", body=raw), "/bundler")["result"] is None
    estimate = client.bundler().estimate_user_operation_gas(op, ENTRY_POINT_V07)
    assert {"preVerificationGas", "verificationGasLimit", "callGasLimit"} <= set(estimate)

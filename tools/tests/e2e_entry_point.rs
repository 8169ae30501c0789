//! ERC-4337 on a real chain: EntryPoint v0.7 (compiled from `@account-abstraction/contracts`
//! 0.7.0 by `contracts/build.sh`) at its canonical address on anvil, and the SmartAccount
//! fixture as an ERC-4337 account. The EntryPoint gives an operation the hash Ladder computes
//! (`UserOperation::hash`, what the built-in bundler checks signatures against); an operation
//! signed by an owner is carried out through `execute` and uses up its nonce; a foreign
//! signature and a wrong nonce are refused with the AA24 and AA25 reasons the built-in
//! bundler gives.
//!
//! Without anvil the test says so and passes, unless `LADDER_REQUIRE_CHAIN=1` (set by
//! `.ci/run`), where a missing node is a failure.

mod support;

use ladder_chain::abi::{address_word, encode_call, selector, word_as_usize, Arg};
use ladder_chain::entry_point::{get_nonce_call, get_user_op_hash_call, handle_ops_call};
use ladder_chain::rpc::to_hex;
use ladder_chain::RpcError;
use ladder_client::Wallet;
use ladder_protocol::user_op::{eip191_digest, UserOperation};
use ladder_protocol::{Address, B256, CHAIN_ID, U256};
use serde_json::json;
use support::anvil::Anvil;

/// A SmartAccount owned by `owner`, with 1 ETH for its gas.
fn account_of(anvil: &Anvil, owner: &Wallet) -> Address {
    let account = anvil.deploy("SmartAccount", &[address_word(&owner.address())]);
    anvil.fund(&account);
    account
}

/// An operation of `account` that adds `new_owner` through `execute(account, 0,
/// addOwner(new_owner))`, with gas limits and fees that anvil's blocks take.
fn add_owner_op(account: &Address, new_owner: &Address, sequence: u64) -> UserOperation {
    let add_owner = encode_call(
        selector("addOwner(address)"),
        &[Arg::Word(address_word(new_owner))],
    );
    UserOperation {
        sender: *account,
        nonce: U256::from(sequence),
        call_data: encode_call(
            selector("execute(address,uint256,bytes)"),
            &[
                Arg::Word(address_word(account)),
                Arg::Word([0; 32]),
                Arg::Bytes(&add_owner),
            ],
        ),
        call_gas_limit: 200_000,
        verification_gas_limit: 200_000,
        pre_verification_gas: U256::from(50_000u64),
        max_fee_per_gas: 10_000_000_000,
        max_priority_fee_per_gas: 1_000_000_000,
        ..UserOperation::default()
    }
}

/// `op` signed by `signer` over the EIP-191 message of its hash, as SimpleAccount checks it.
fn sign(mut op: UserOperation, signer: &Wallet, entry_point: &Address) -> UserOperation {
    let hash = op.hash(entry_point, CHAIN_ID);
    op.signature = signer
        .sign_digest(&eip191_digest(&hash))
        .as_bytes()
        .to_vec();
    op
}

/// The reason of an EntryPoint `FailedOp(uint256 opIndex, string reason)` revert.
fn failed_op_reason(error: &RpcError) -> String {
    let RpcError::Node {
        data: Some(data), ..
    } = error
    else {
        panic!("not a revert with data: {error:?}");
    };
    let data = hex::decode(data.trim_start_matches("0x")).expect("revert data hex");
    let body = data
        .strip_prefix(&selector("FailedOp(uint256,string)"))
        .unwrap_or_else(|| panic!("not FailedOp: 0x{}", hex::encode(&data)));
    let offset = word_as_usize(&body[32..64]).expect("offset");
    let length = word_as_usize(&body[offset..offset + 32]).expect("length");
    String::from_utf8_lossy(&body[offset + 32..offset + 32 + length]).into_owned()
}

fn is_owner(anvil: &Anvil, account: &Address, who: &Address) -> bool {
    let call = encode_call(
        selector("isOwner(address)"),
        &[Arg::Word(address_word(who))],
    );
    anvil.call_word(account, &call) == 1
}

#[test]
fn the_entry_point_hashes_validates_and_executes_like_the_built_in_bundler() {
    let Some(anvil) = Anvil::start() else { return };
    let entry_point = anvil.place_entry_point();
    let entry_point_hex = entry_point.to_lowercase_hex();
    let owner = Wallet::random();
    let account = account_of(&anvil, &owner);
    let new_owner = Wallet::random().address();
    let beneficiary = Address::parse_ignoring_checksum(&anvil.operator()).expect("operator");

    // The hash: the EntryPoint's own, for the operation signed and for another.
    let op = sign(add_owner_op(&account, &new_owner, 0), &owner, &entry_point);
    for candidate in [&op, &add_owner_op(&account, &beneficiary, 7)] {
        let on_chain = anvil
            .rpc
            .eth_call(&entry_point_hex, &get_user_op_hash_call(candidate))
            .expect("getUserOpHash");
        assert_eq!(
            B256::from(<[u8; 32]>::try_from(on_chain.as_slice()).expect("one word")),
            candidate.hash(&entry_point, CHAIN_ID),
            "the EntryPoint's userOpHash"
        );
    }

    // Refused before anything changes: a foreign signer (AA24), a wrong nonce (AA25).
    let foreign = sign(
        add_owner_op(&account, &new_owner, 0),
        &Wallet::random(),
        &entry_point,
    );
    let skipped = sign(add_owner_op(&account, &new_owner, 1), &owner, &entry_point);
    for (bad, reason) in [
        (&foreign, "AA24 signature error"),
        (&skipped, "AA25 invalid account nonce"),
    ] {
        let refused = anvil
            .rpc
            .call(
                "eth_call",
                json!([{"from": anvil.operator(), "to": entry_point_hex,
                        "data": to_hex(&handle_ops_call(std::slice::from_ref(bad), &beneficiary))}, "latest"]),
            )
            .expect_err("handleOps refused");
        assert_eq!(failed_op_reason(&refused), reason);
    }
    assert!(!is_owner(&anvil, &account, &new_owner));

    // Carried out: the account's call ran, the nonce is used up, the event says success.
    let receipt = anvil.transact(
        Some(&entry_point_hex),
        &handle_ops_call(std::slice::from_ref(&op), &beneficiary),
    );
    assert!(
        is_owner(&anvil, &account, &new_owner),
        "execute ran addOwner"
    );
    let nonce = anvil.call_word(&entry_point, &get_nonce_call(&account, U256::ZERO));
    assert_eq!(nonce, 1, "the account's next sequence");
    let event =
        selector("UserOperationEvent(bytes32,address,address,uint256,bool,uint256,uint256)");
    let log = receipt["logs"]
        .as_array()
        .expect("logs")
        .iter()
        .find(|log| {
            log["topics"][0]
                .as_str()
                .is_some_and(|t| t.trim_start_matches("0x").starts_with(&hex::encode(event)))
        })
        .unwrap_or_else(|| panic!("no UserOperationEvent in {receipt}"));
    let hash = op.hash(&entry_point, CHAIN_ID);
    assert_eq!(
        log["topics"][1].as_str().expect("userOpHash topic"),
        hash.to_string(),
        "the event's userOpHash"
    );
    let data = hex::decode(log["data"].as_str().expect("data").trim_start_matches("0x"))
        .expect("data hex");
    assert_eq!(word_as_usize(&data[32..64]), Some(1), "success");

    // The same operation again: its nonce is spent.
    let again = anvil
        .rpc
        .call(
            "eth_call",
            json!([{"from": anvil.operator(), "to": entry_point_hex,
                    "data": to_hex(&handle_ops_call(&[op], &beneficiary))}, "latest"]),
        )
        .expect_err("a replay refused");
    assert_eq!(failed_op_reason(&again), "AA25 invalid account nonce");
}

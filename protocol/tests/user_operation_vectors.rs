//! The ERC-4337 v0.7 known answers of `protocol/tests/data/user_operation.json` (computed with
//! viem and independently in Python): the redeem call data, the userOpHash of each case, the
//! EIP-191 digest the owner signs, and the owner's signature.

use ladder_protocol::user_op::{
    eip191_digest, execute_redeem_call_data, parse_user_operation, redeem_call_data,
    redeemed_market,
};
use ladder_protocol::{sign_digest, Address, SecretKey, Signature, B256};
use serde_json::Value;

const VECTORS_PATH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/user_operation.json"
);

fn vectors() -> Value {
    let text = std::fs::read_to_string(VECTORS_PATH)
        .unwrap_or_else(|e| panic!("cannot read {VECTORS_PATH}: {e}"));
    serde_json::from_str(&text).expect("JSON")
}

fn hex_bytes(v: &Value) -> Vec<u8> {
    hex::decode(v.as_str().unwrap().trim_start_matches("0x")).unwrap()
}

#[test]
fn the_redeem_call_data_is_reproduced_and_read_back() {
    let root = vectors();
    let condition: B256 = root["conditionId"].as_str().unwrap().parse().unwrap();
    let exchange = Address::parse_ignoring_checksum(root["exchange"].as_str().unwrap()).unwrap();
    assert_eq!(
        redeem_call_data(&condition),
        hex_bytes(&root["redeemCalldata"])
    );
    let execute = execute_redeem_call_data(&exchange, &condition);
    assert_eq!(execute, hex_bytes(&root["executeCalldata"]));
    assert_eq!(redeemed_market(&execute, &exchange), Ok(condition));
    let elsewhere = Address([9; 20]);
    assert!(redeemed_market(&execute, &elsewhere).is_err());
    assert!(redeemed_market(&execute[..execute.len() - 1], &exchange).is_err());
}

#[test]
fn user_op_hashes_digests_and_signatures_are_reproduced() {
    let root = vectors();
    let cases = root["cases"].as_array().expect("cases");
    assert!(!cases.is_empty());
    for (i, case) in cases.iter().enumerate() {
        let op = parse_user_operation(&case["op"]).unwrap_or_else(|e| panic!("case {i}: {e}"));
        let entry_point =
            Address::parse(case["entryPoint"].as_str().unwrap()).expect("entry point");
        let chain_id = case["chainId"].as_u64().unwrap();
        let hash = op.hash(&entry_point, chain_id);
        assert_eq!(
            hash.to_string(),
            case["userOpHash"].as_str().unwrap().to_lowercase(),
            "case {i}"
        );
        let digest = eip191_digest(&hash);
        assert_eq!(
            format!("0x{}", hex::encode(digest)),
            case["eip191Digest"].as_str().unwrap(),
            "case {i}"
        );
        let key = SecretKey::from_slice(&hex_bytes(&case["ownerKey"])).unwrap();
        let signature = sign_digest(&key, &digest);
        assert_eq!(
            signature.as_bytes().to_vec(),
            hex_bytes(&case["signature"]),
            "case {i}"
        );
        let owner = Address::parse(case["owner"].as_str().unwrap()).unwrap();
        let given = Signature::from_bytes(hex_bytes(&case["signature"]).try_into().unwrap());
        assert_eq!(given.recover_address(&digest), Ok(owner), "case {i}");
    }
}

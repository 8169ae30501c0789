//! The service's ERC-4337 bundler end to end (API.md §13): `POST /bundler` JSON-RPC, a redeem
//! user operation signed by the smart account's owner (the known-answer vector's own
//! operation and signature), claimable entries paid out to collateral, the receipt, and every
//! refusal (`AA20`, `AA24`, `AA25`, nothing to redeem, market not resolved, -32601, -32602).

mod helpers;
mod support;

use helpers::*;
use ladder_protocol::user_op::{eip191_digest, parse_user_operation, UserOperation};
use ladder_protocol::{sign_digest, Address, SecretKey};
use serde_json::{json, Value};
use support::*;

const ENTRY_POINT: &str = "0x0000000071727De22E5E9d8BAf0edAc6f37da032";

fn vectors() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../protocol/tests/data/user_operation.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// One JSON-RPC call; its whole answer.
fn rpc(service: &Service, method: &str, params: Value) -> Value {
    let body = json!({ "jsonrpc": "2.0", "id": 7, "method": method, "params": params });
    let r = public(service, "POST", "/bundler", Some(&body.to_string()));
    assert_eq!(r.status, 200, "{}", r.body);
    let answer = r.json();
    assert_eq!(answer["id"], 7, "{answer}");
    answer
}

fn error_of(answer: &Value) -> (i64, String) {
    (
        answer["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("no error: {answer}")),
        answer["error"]["message"].as_str().unwrap().to_string(),
    )
}

/// `op` with its nonce set and signed by `key` (hex private key) for the entry point.
fn signed(op: &Value, nonce: &str, key: &str) -> Value {
    let mut op = op.clone();
    op["nonce"] = json!(nonce);
    let parsed: UserOperation = parse_user_operation(&op).unwrap();
    let hash = parsed.hash(&Address::parse(ENTRY_POINT).unwrap(), 3223);
    let secret =
        SecretKey::from_slice(&hex::decode(key.trim_start_matches("0x")).unwrap()).unwrap();
    let signature = sign_digest(&secret, &eip191_digest(&hash));
    op["signature"] = json!(format!("0x{}", hex::encode(signature.as_bytes())));
    op
}

fn claimable(service: &Service, address: &str) -> Vec<Value> {
    let (status, body) = get(service, &format!("/claimable?address={address}"));
    assert_eq!(status, 200, "{body}");
    body["claimable"].as_array().unwrap().clone()
}

#[test]
fn a_redeem_operation_pays_the_claimable_positions_out_once_with_a_receipt() {
    let replication = free_port();
    let mut service =
        Service::start(&["--replication-listen", &format!("127.0.0.1:{replication}")]);
    let v = vectors();
    let case = &v["cases"][0];
    let mut op = case["op"].clone();
    op["signature"] = case["signature"].clone();
    let sender = op["sender"].as_str().unwrap().to_string();

    assert_eq!(rpc(&service, "eth_chainId", json!([]))["result"], "0xc97");
    assert_eq!(
        rpc(&service, "eth_supportedEntryPoints", json!([]))["result"],
        json!([ENTRY_POINT])
    );
    let estimate = rpc(
        &service,
        "eth_estimateUserOperationGas",
        json!([op, ENTRY_POINT]),
    );
    assert!(estimate["result"]["callGasLimit"].is_string(), "{estimate}");

    // Before the market resolves: refused, nothing changes.
    let early = rpc(&service, "eth_sendUserOperation", json!([op, ENTRY_POINT]));
    assert_eq!(error_of(&early), (-32500, "market not resolved".into()));

    let r = service.admin(
        "POST",
        &format!("/admin/markets/{CONDITION_ID}/resolve"),
        Some(r#"{"outcome": "Yes"}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let entries = claimable(&service, &sender);
    assert!(!entries.is_empty(), "the demo account holds Yes shares");
    let mut alice = service.trader(0);
    let before = balance(&mut alice, "asset_type=COLLATERAL")["balance"]
        .as_str()
        .unwrap()
        .parse::<u64>()
        .unwrap();

    // The vector's own operation and owner signature: carried out, its hash the vector's.
    let sent = rpc(&service, "eth_sendUserOperation", json!([op, ENTRY_POINT]));
    assert_eq!(
        sent["result"],
        json!(case["userOpHash"].as_str().unwrap().to_lowercase()),
        "{sent}"
    );
    assert!(
        claimable(&service, &sender).is_empty(),
        "the entries left /claimable"
    );
    let after = balance(&mut alice, "asset_type=COLLATERAL")["balance"]
        .as_str()
        .unwrap()
        .parse::<u64>()
        .unwrap();
    let paid: u64 = entries
        .iter()
        .filter(|e| e["refund_reason"] == "resolved_winner")
        .map(|e| e["balance"].as_str().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(
        after - before,
        paid,
        "each winning share pays one collateral unit per unit"
    );

    // The same operation again: its nonce is spent. The next nonce finds nothing to redeem.
    let again = rpc(&service, "eth_sendUserOperation", json!([op, ENTRY_POINT]));
    assert_eq!(
        error_of(&again),
        (-32500, "AA25 invalid account nonce".into())
    );
    assert_eq!(again["error"]["data"]["expectedNonce"], "0x1");
    let (owner_key, _) = KEYS[0];
    let next = signed(&case["op"], "0x1", owner_key);
    let nothing = rpc(
        &service,
        "eth_sendUserOperation",
        json!([next, ENTRY_POINT]),
    );
    assert_eq!(error_of(&nothing), (-32500, "nothing to redeem".into()));

    // The receipt, also after a restart (it is journaled state).
    let hash = case["userOpHash"].as_str().unwrap().to_lowercase();
    let receipt = rpc(&service, "eth_getUserOperationReceipt", json!([hash]))["result"].clone();
    assert_eq!(receipt["success"], true, "{receipt}");
    assert_eq!(receipt["sender"], json!(sender));
    assert_eq!(receipt["actualGasCost"], "0x0");
    let tx = receipt["receipt"]["transactionHash"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(tx.starts_with("0x") && tx.len() == 66, "{receipt}");
    let by_hash = rpc(&service, "eth_getUserOperationByHash", json!([hash]))["result"].clone();
    assert_eq!(by_hash["userOperation"]["callData"], op["callData"]);
    // Its "block" is its journal sequence; the block hash is keccak256 of that number.
    let block = &receipt["receipt"]["blockNumber"];
    assert_eq!(by_hash["blockNumber"], *block);
    let number = u64::from_str_radix(block.as_str().unwrap().trim_start_matches("0x"), 16).unwrap();
    let mut word = [0u8; 32];
    word[24..].copy_from_slice(&number.to_be_bytes());
    let block_hash = format!(
        "0x{}",
        hex::encode(ladder_protocol::keccak::keccak256(&word))
    );
    assert_eq!(by_hash["blockHash"], json!(block_hash), "{by_hash}");
    assert_eq!(
        receipt["receipt"]["blockHash"],
        json!(block_hash),
        "{receipt}"
    );
    service.kill_and_restart();
    let receipt_again =
        rpc(&service, "eth_getUserOperationReceipt", json!([hash]))["result"].clone();
    assert_eq!(receipt_again, receipt);

    // A standby that follows the primary holds the same state and answers the same receipt.
    let standby = start_standby(replication);
    let (_, state_hash) = admin_at(&service.url, "GET", "/admin/state-hash");
    wait_for_hash(&standby.url, &state_hash);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_getUserOperationReceipt", "params": [hash]});
    let on_standby = ladder_client::HttpClient::new(&standby.url)
        .unwrap()
        .request("POST", "/bundler", &[], Some(&body.to_string()))
        .unwrap();
    assert_eq!(on_standby.status, 200, "{}", on_standby.body);
    assert_eq!(
        on_standby.json()["result"],
        receipt,
        "the standby's receipt"
    );
    let unknown = rpc(
        &service,
        "eth_getUserOperationReceipt",
        json!([format!("0x{}", "ab".repeat(32))]),
    );
    assert_eq!(unknown["result"], Value::Null);
}

#[test]
fn refusals_are_json_rpc_errors_that_change_nothing() {
    let service = Service::start(&[]);
    let v = vectors();
    let op = v["cases"][0]["op"].clone();
    let r = service.admin(
        "POST",
        &format!("/admin/markets/{CONDITION_ID}/resolve"),
        Some(r#"{"outcome": "No"}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let seq_before = service.admin("GET", "/admin/state-hash", None).json()["seq"].clone();

    // Signed by another key than the account's owner.
    let (other_key, _) = KEYS[1];
    let wrong = signed(&op, "0x0", other_key);
    let refused = rpc(
        &service,
        "eth_sendUserOperation",
        json!([wrong, ENTRY_POINT]),
    );
    assert_eq!(error_of(&refused), (-32500, "AA24 signature error".into()));
    // From an account no registry knows.
    let mut stranger = op.clone();
    stranger["sender"] = json!("0x00000000000000000000000000000000000000aa");
    let (owner_key, _) = KEYS[0];
    let stranger = signed(&stranger, "0x0", owner_key);
    let refused = rpc(
        &service,
        "eth_sendUserOperation",
        json!([stranger, ENTRY_POINT]),
    );
    assert_eq!(
        error_of(&refused),
        (-32500, "AA20 account not deployed".into())
    );
    // A malformed field, another entry point, an unknown method.
    let mut bad = op.clone();
    bad["nonce"] = json!("seven");
    let refused = rpc(&service, "eth_sendUserOperation", json!([bad, ENTRY_POINT]));
    assert_eq!(error_of(&refused).0, -32602);
    assert!(error_of(&refused).1.starts_with("nonce"), "{refused}");
    // A signature that is not 65 bytes is a malformed parameter, not a wrong signer.
    let mut short = wrong.clone();
    short["signature"] = json!("0x01");
    let refused = rpc(
        &service,
        "eth_sendUserOperation",
        json!([short, ENTRY_POINT]),
    );
    assert_eq!(
        error_of(&refused),
        (
            -32602,
            "signature: expected 65 bytes (r, s, v), found 1".into()
        )
    );
    let refused = rpc(
        &service,
        "eth_sendUserOperation",
        json!([op, "0x1111111111111111111111111111111111111111"]),
    );
    assert_eq!(error_of(&refused).0, -32602);
    assert_eq!(
        error_of(&rpc(&service, "eth_sendBundle", json!([]))).0,
        -32601
    );
    // A mixed-case sender must carry its EIP-55 checksum (CONTRACT 1), signed or not.
    let checksummed = Address::parse(op["sender"].as_str().unwrap())
        .unwrap()
        .to_string();
    let flip = checksummed[2..]
        .find(|c: char| c.is_ascii_alphabetic())
        .expect("a letter in the sender")
        + 2;
    let mut miscased = checksummed.clone().into_bytes();
    miscased[flip] ^= 0x20;
    // Signed over the right bytes: only the text of the address is wrong.
    let mut miscased_op = signed(&op, "0x0", owner_key);
    miscased_op["sender"] = json!(String::from_utf8(miscased).unwrap());
    let refused = rpc(
        &service,
        "eth_sendUserOperation",
        json!([miscased_op, ENTRY_POINT]),
    );
    assert_eq!(
        error_of(&refused),
        (
            -32602,
            format!(
                "sender: mixed-case address fails the EIP-55 checksum (expected {checksummed})"
            )
        )
    );
    // JSON-RPC 2.0's codes for a body that is not JSON, a batch, and a body that is no call.
    for (body, code, message) in [
        ("{not json", -32700, "body: not JSON"),
        (
            r#"[{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}]"#,
            -32600,
            "batch requests are not supported: send one call per request",
        ),
        ("5", -32600, "body: expected a JSON-RPC call object"),
        (
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"eth_chainId","params":[]}"#,
            -32600,
            "id: expected a string, an integer or null",
        ),
        (
            r#"{"jsonrpc":"2.0","id":18446744073709551617,"method":"eth_chainId","params":[]}"#,
            -32600,
            "id: expected a string, an integer or null",
        ),
    ] {
        let r = public(&service, "POST", "/bundler", Some(body));
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.json()["id"], Value::Null, "{}", r.body);
        assert_eq!(error_of(&r.json()), (code, message.to_string()), "{body}");
    }
    let seq_after = service.admin("GET", "/admin/state-hash", None).json()["seq"].clone();
    assert_eq!(seq_after, seq_before, "nothing journaled");
}

#[test]
fn ladder_client_redeem_sends_a_signed_operation_and_prints_its_receipt() {
    let service = Service::start(&[]);
    let r = service.admin(
        "POST",
        &format!("/admin/markets/{CONDITION_ID}/resolve"),
        Some(r#"{"outcome": "void"}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let (_, sender) = KEYS[1];
    assert!(!claimable(&service, sender).is_empty());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ladder"))
        .args(["client", "--url", &service.url, "--trader", "1", "redeem"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let receipt: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(receipt["success"], true, "{receipt}");
    assert!(claimable(&service, sender).is_empty());
    // A second redeem finds nothing.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ladder"))
        .args(["client", "--url", &service.url, "--trader", "1", "redeem"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to redeem"));
}

//! `POST /bundler`'s operation parser (`ladder_protocol::user_op`) on arbitrary bytes: a
//! JSON-RPC body whose `params[0]` is read as a user operation, as the service reads it.
//!
//! Besides never panicking: an operation that parses writes (`to_json`) a body that parses
//! back to the same operation, and its hash, nonce split and redeem check run without a panic.

use ladder_protocol::user_op::{parse_user_operation, redeemed_market};
use ladder_protocol::Address;

/// Checks one input.
pub fn check(data: &[u8]) {
    let Ok(call) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let Some(op_value) = call.get("params").and_then(|p| p.get(0)) else {
        return;
    };
    let Ok(op) = parse_user_operation(op_value) else {
        return;
    };
    let json = op.to_json();
    assert_eq!(
        parse_user_operation(&json).as_ref(),
        Ok(&op),
        "round trip of {json}"
    );
    let _ = op.hash(&Address::ZERO, 3223);
    let _ = op.nonce_key_and_sequence();
    let _ = redeemed_market(&op.call_data, &Address::ZERO);
}

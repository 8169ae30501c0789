//! Redeeming claimable positions through the service's bundler (API.md §13): a redeem user
//! operation for the trader's smart account, signed by its owner EOA, sent to `POST /bundler`
//! with the account's next nonce (learnt from the `AA25` answer when it is not 0), then its
//! receipt.

use ladder_protocol::user_op::{
    eip191_digest, execute_redeem_call_data, format_quantity, UserOperation, ENTRY_POINT_V07,
};
use ladder_protocol::{Address, CHAIN_ID, U256};
use serde_json::{json, Value};

use crate::client::session::Trader;

/// Gas limits put in the operation (the service's bundler charges none).
const GAS_LIMIT: u128 = 100_000;

impl Trader {
    /// One JSON-RPC call to `POST /bundler`: the answer's `result`, or its error as text
    /// (`code: message`) with its `data`.
    pub fn bundler_call(
        &mut self,
        method: &str,
        params: Value,
    ) -> Result<Result<Value, (String, Value)>, String> {
        let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
        let response = self
            .http
            .request("POST", "/bundler", &[], Some(&body.to_string()))?;
        if response.status != 200 {
            return Err(format!(
                "POST /bundler: HTTP {}: {}",
                response.status, response.body
            ));
        }
        let answer = response.json();
        Ok(match answer.get("error") {
            Some(error) => Err((
                format!(
                    "{}: {}",
                    error["code"],
                    error["message"].as_str().unwrap_or("")
                ),
                error.get("data").cloned().unwrap_or(Value::Null),
            )),
            None => Ok(answer["result"].clone()),
        })
    }

    /// Redeems the trader's positions in `condition_id`; the operation's receipt.
    pub fn redeem(&mut self, condition_id: &ladder_protocol::B256) -> Result<Value, String> {
        // The service's own entry point (its --entry-point), the canonical one failing that.
        let entry_point = match self.bundler_call("eth_supportedEntryPoints", json!([]))? {
            Ok(points) => points[0]
                .as_str()
                .and_then(|text| Address::parse_ignoring_checksum(text).ok()),
            Err(_) => None,
        };
        let entry_point = match entry_point {
            Some(address) => address,
            None => Address::parse(ENTRY_POINT_V07).map_err(|e| e.to_string())?,
        };
        let mut nonce = 0u64;
        for _ in 0..2 {
            let op = self.redeem_operation(condition_id, nonce, &entry_point);
            match self.bundler_call(
                "eth_sendUserOperation",
                json!([op, entry_point.to_string()]),
            )? {
                Ok(hash) => {
                    return match self.bundler_call("eth_getUserOperationReceipt", json!([hash]))? {
                        Ok(receipt) => Ok(receipt),
                        Err((why, _)) => Err(why),
                    }
                }
                Err((why, data)) if why.contains("AA25") => {
                    let expected = data["expectedNonce"]
                        .as_str()
                        .and_then(ladder_protocol::user_op::parse_quantity)
                        .ok_or(why)?;
                    let bytes = expected.to_be_bytes();
                    let mut low = [0u8; 8];
                    low.copy_from_slice(&bytes[24..]);
                    nonce = u64::from_be_bytes(low);
                }
                Err((why, _)) => return Err(why),
            }
        }
        Err("the account's nonce kept moving".into())
    }

    /// The signed redeem operation of `condition_id` with sequence number `nonce`.
    fn redeem_operation(
        &self,
        condition_id: &ladder_protocol::B256,
        nonce: u64,
        entry_point: &Address,
    ) -> Value {
        let op = UserOperation {
            sender: self.account,
            nonce: U256::from(nonce),
            call_data: execute_redeem_call_data(&self.exchange.verifying_contract(), condition_id),
            call_gas_limit: GAS_LIMIT,
            verification_gas_limit: GAS_LIMIT,
            pre_verification_gas: U256::from(50_000u64),
            max_fee_per_gas: 1,
            max_priority_fee_per_gas: 1,
            ..UserOperation::default()
        };
        let hash = op.hash(entry_point, CHAIN_ID);
        let signature = self.wallet.sign_digest(&eip191_digest(&hash));
        let quantity = |v: u128| format_quantity(&U256::from(v));
        json!({
            "sender": op.sender.to_string(),
            "nonce": format_quantity(&op.nonce),
            "callData": format!("0x{}", hex::encode(&op.call_data)),
            "callGasLimit": quantity(op.call_gas_limit),
            "verificationGasLimit": quantity(op.verification_gas_limit),
            "preVerificationGas": format_quantity(&op.pre_verification_gas),
            "maxFeePerGas": quantity(op.max_fee_per_gas),
            "maxPriorityFeePerGas": quantity(op.max_priority_fee_per_gas),
            "signature": format!("0x{}", hex::encode(signature.as_bytes())),
        })
    }
}

//! Redeeming claimable positions through the service's bundler (API.md §13): a redeem user
//! operation for the trader's smart account, signed by its owner EOA, sent to `POST /bundler`
//! with the account's next nonce (learnt from the `AA25` answer when it is not 0) and the gas
//! the bundler estimates, then its receipt (with `--rpc-url`, the chain's bundler's).

use std::time::{Duration, Instant};

use ladder_protocol::user_op::{
    eip191_digest, execute_redeem_call_data, parse_quantity, u128_of, UserOperation,
    ENTRY_POINT_V07,
};
use ladder_protocol::{Address, CHAIN_ID, U256};
use serde_json::{json, Value};

use crate::client::session::Trader;

/// Gas limits put in the operation before the estimate.
const GAS_LIMIT: u128 = 100_000;
/// A signature of the right form for the estimate, signed over nothing: r = s = 1, v = 27
/// (a low s, so that the account's check goes as far as `ecrecover`, as for the real one,
/// and the estimate covers its gas).
const PLACEHOLDER_SIGNATURE: [u8; 65] = {
    let mut signature = [0u8; 65];
    signature[31] = 1;
    signature[63] = 1;
    signature[64] = 27;
    signature
};
/// How long a redeem waits for its receipt.
const RECEIPT_WAIT: Duration = Duration::from_secs(60);
/// How often it asks.
const RECEIPT_POLL: Duration = Duration::from_millis(200);

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

    /// Redeems the trader's positions in `condition_id`; the operation's receipt. The gas
    /// limits and fees are the bundler's estimate (the service's own bundler charges none; a
    /// chain's asks for real ones); the nonce is learnt from an `AA25` refusal when it is not
    /// 0; the receipt is waited for (a chain's bundler carries operations out in its next
    /// bundle).
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
        let chain_id = match self.bundler_call("eth_chainId", json!([]))? {
            Ok(id) => id
                .as_str()
                .and_then(parse_quantity)
                .and_then(|id| u64_of(&id))
                .unwrap_or(CHAIN_ID),
            Err(_) => CHAIN_ID,
        };
        let mut nonce = 0u64;
        for _ in 0..2 {
            let mut op = self.redeem_operation(condition_id, nonce);
            let estimate = match self.bundler_call(
                "eth_estimateUserOperationGas",
                json!([op.to_json(), entry_point.to_string()]),
            )? {
                Ok(estimate) => estimate,
                Err((why, _)) => return Err(why),
            };
            apply_estimate(&mut op, &estimate);
            let hash = op.hash(&entry_point, chain_id);
            op.signature = self
                .wallet
                .sign_digest(&eip191_digest(&hash))
                .as_bytes()
                .to_vec();
            match self.bundler_call(
                "eth_sendUserOperation",
                json!([op.to_json(), entry_point.to_string()]),
            )? {
                Ok(hash) => return self.wait_for_receipt(&hash),
                Err((why, data)) if why.contains("AA25") => {
                    nonce = data["expectedNonce"]
                        .as_str()
                        .and_then(parse_quantity)
                        .and_then(|n| u64_of(&n))
                        .ok_or(why)?;
                }
                Err((why, _)) => return Err(why),
            }
        }
        Err("the account's nonce kept moving".into())
    }

    /// Asks for the receipt of `hash` until there is one.
    fn wait_for_receipt(&mut self, hash: &Value) -> Result<Value, String> {
        let deadline = Instant::now() + RECEIPT_WAIT;
        loop {
            match self.bundler_call("eth_getUserOperationReceipt", json!([hash]))? {
                Ok(receipt) if !receipt.is_null() => return Ok(receipt),
                Ok(_) if Instant::now() < deadline => std::thread::sleep(RECEIPT_POLL),
                Ok(_) => return Err(format!("no receipt for {hash} after {RECEIPT_WAIT:?}")),
                Err((why, _)) => return Err(why),
            }
        }
    }

    /// The unsigned redeem operation of `condition_id` with sequence number `nonce` (gas
    /// fields for the estimate; its signature a placeholder of the right form).
    fn redeem_operation(&self, condition_id: &ladder_protocol::B256, nonce: u64) -> UserOperation {
        UserOperation {
            sender: self.account,
            nonce: U256::from(nonce),
            call_data: execute_redeem_call_data(&self.exchange.verifying_contract(), condition_id),
            call_gas_limit: GAS_LIMIT,
            verification_gas_limit: GAS_LIMIT,
            pre_verification_gas: U256::from(50_000u64),
            max_fee_per_gas: 1,
            max_priority_fee_per_gas: 1,
            signature: PLACEHOLDER_SIGNATURE.to_vec(),
            ..UserOperation::default()
        }
    }
}

/// Takes the estimate's gas limits and fees (the fields it has) into `op`.
fn apply_estimate(op: &mut UserOperation, estimate: &Value) {
    let field = |key: &str| {
        estimate[key]
            .as_str()
            .and_then(parse_quantity)
            .and_then(|v| u128_of(&v))
    };
    if let Some(v) = field("callGasLimit") {
        op.call_gas_limit = with_margin(v);
    }
    if let Some(v) = field("verificationGasLimit") {
        op.verification_gas_limit = with_margin(v);
    }
    if let Some(v) = field("preVerificationGas") {
        op.pre_verification_gas = U256::from(v);
    }
    if let Some(v) = field("maxFeePerGas") {
        op.max_fee_per_gas = v;
    }
    if let Some(v) = field("maxPriorityFeePerGas") {
        op.max_priority_fee_per_gas = v;
    }
}

/// A gas limit with half again as much: an estimate is made against the state of its
/// moment, and an operation short of gas fails on the chain (and costs its sender).
fn with_margin(gas: u128) -> u128 {
    gas.saturating_add(gas / 2)
}

fn u64_of(value: &U256) -> Option<u64> {
    u128_of(value).and_then(|v| u64::try_from(v).ok())
}

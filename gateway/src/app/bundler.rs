//! `POST /bundler` (public, JSON-RPC 2.0; API.md §13): the service is an ERC-4337 bundler
//! (EntryPoint v0.7) for redeeming claimable positions. Without `--rpc-url` it bundles on its
//! own ledger: a valid redeem operation is one journaled command, applied at once, and its
//! receipt is kept. Refusals are JSON-RPC errors and change nothing.

use ladder_engine::{Command, Engine, Reject, Reply, UserOpReceipt};
use ladder_protocol::user_op::{
    eip191_digest, execute_redeem_call_data, format_quantity, parse_user_operation,
    redeemed_market, UserOperation,
};
use ladder_protocol::{Address, Signature, B256, CHAIN_ID, U256};
use serde_json::{json, Value};

use super::{command, query, App};
use crate::convert::{engine_address, engine_b256};
use crate::handler::Outcome;
use crate::http::{Method, Request, Response, Status};

/// JSON-RPC: the request is not valid JSON-RPC.
const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: no such method.
const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC: malformed parameters.
const INVALID_PARAMS: i64 = -32602;
/// ERC-4337: the operation was refused (validation).
const REJECTED: i64 = -32500;

/// Gas the service asks for (it charges none): what `eth_estimateUserOperationGas` answers.
const GAS_ESTIMATE: (u64, u64, u64) = (50_000, 150_000, 100_000);

/// Routes `POST /bundler`; `None` for any other path.
pub(super) fn route(app: &App, method: Method, path: &str, request: &Request) -> Option<Outcome> {
    if path != "/bundler" || method != Method::Post {
        return None;
    }
    Some(match serde_json::from_slice::<Value>(&request.body) {
        Ok(call) => dispatch(app, &call),
        Err(_) => answer(
            &Value::Null,
            Err((INVALID_REQUEST, "body: not JSON".into(), None)),
        ),
    })
}

/// A JSON-RPC result, or an error (code, message, data).
type RpcResult = Result<Value, (i64, String, Option<Value>)>;

fn answer(id: &Value, result: RpcResult) -> Outcome {
    Outcome::Respond(rpc_response(id, result))
}

fn rpc_response(id: &Value, result: RpcResult) -> Response {
    let body = match result {
        Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
        Err((code, message, data)) => {
            let mut error = json!({ "code": code, "message": message });
            if let Some(data) = data {
                error["data"] = data;
            }
            json!({ "jsonrpc": "2.0", "id": id, "error": error })
        }
    };
    Response::json(Status::Ok, body.to_string().into_bytes())
}

fn params_error(message: impl Into<String>) -> (i64, String, Option<Value>) {
    (INVALID_PARAMS, message.into(), None)
}

fn dispatch(app: &App, call: &Value) -> Outcome {
    let id = call.get("id").cloned().unwrap_or(Value::Null);
    let Some(method) = call.get("method").and_then(Value::as_str) else {
        return answer(&id, Err((INVALID_REQUEST, "method: required".into(), None)));
    };
    let params = call
        .get("params")
        .cloned()
        .unwrap_or(Value::Array(Vec::new()));
    let entry_point = app.config.entry_point;
    match method {
        "eth_chainId" => answer(&id, Ok(json!(format_quantity(&U256::from(CHAIN_ID))))),
        "eth_supportedEntryPoints" => answer(&id, Ok(json!([entry_point.to_string()]))),
        "eth_estimateUserOperationGas" => {
            let estimate = parse_operation(app, &params).map(|_| {
                let (pre, verification, call) = GAS_ESTIMATE;
                json!({
                    "preVerificationGas": format_quantity(&U256::from(pre)),
                    "verificationGasLimit": format_quantity(&U256::from(verification)),
                    "callGasLimit": format_quantity(&U256::from(call)),
                })
            });
            answer(&id, estimate)
        }
        "eth_sendUserOperation" => match parse_operation(app, &params) {
            Err(error) => answer(&id, Err(error)),
            Ok(checked) => send(app, id, checked),
        },
        "eth_getUserOperationReceipt" | "eth_getUserOperationByHash" => {
            let hash = match params
                .get(0)
                .and_then(Value::as_str)
                .map(str::parse::<B256>)
            {
                Some(Ok(hash)) => hash,
                _ => {
                    return answer(
                        &id,
                        Err(params_error("params[0]: expected a 0x userOpHash")),
                    )
                }
            };
            let receipt_form = method == "eth_getUserOperationReceipt";
            let exchange = app.config.exchange.verifying_contract();
            query(
                move |engine: &Engine| engine.user_op_receipt(&engine_b256(&hash)),
                move |found| {
                    let result = found.map_or(Value::Null, |receipt| {
                        if receipt_form {
                            receipt_json(&hash, &entry_point, &receipt)
                        } else {
                            by_hash_json(&entry_point, &exchange, &receipt)
                        }
                    });
                    rpc_response(&id, Ok(result))
                },
            )
        }
        other => answer(
            &id,
            Err((METHOD_NOT_FOUND, format!("method not found: {other}"), None)),
        ),
    }
}

/// A redeem operation whose form, entry point, call and signature check out.
struct Checked {
    hash: B256,
    sender: Address,
    signer: Address,
    nonce: u64,
    condition_id: B256,
}

fn parse_operation(app: &App, params: &Value) -> Result<Checked, (i64, String, Option<Value>)> {
    let op_value = params
        .get(0)
        .ok_or_else(|| params_error("params[0]: the user operation is required"))?;
    let op: UserOperation = parse_user_operation(op_value).map_err(params_error)?;
    let entry_point = match params.get(1).and_then(Value::as_str) {
        Some(text) => Address::parse_ignoring_checksum(text)
            .map_err(|_| params_error("params[1]: expected the entry point's address"))?,
        None => return Err(params_error("params[1]: the entry point is required")),
    };
    if entry_point != app.config.entry_point {
        return Err(params_error(format!(
            "params[1]: entry point {entry_point} is not supported; use {}",
            app.config.entry_point
        )));
    }
    let exchange = app.config.exchange.verifying_contract();
    let condition_id = redeemed_market(&op.call_data, &exchange).map_err(params_error)?;
    let (keyed, nonce) = op.nonce_key_and_sequence();
    if keyed {
        return Err((
            REJECTED,
            Reject::UserOpNonce { expected: 0 }.to_string(),
            None,
        ));
    }
    let hash = op.hash(&entry_point, CHAIN_ID);
    let signature: [u8; 65] = op
        .signature
        .as_slice()
        .try_into()
        .map_err(|_| (REJECTED, Reject::UserOpSignature.to_string(), None))?;
    let signer = Signature::from_bytes(signature)
        .recover_address(&eip191_digest(&hash))
        .map_err(|_| (REJECTED, Reject::UserOpSignature.to_string(), None))?;
    Ok(Checked {
        hash,
        sender: op.sender,
        signer,
        nonce,
        condition_id,
    })
}

fn send(app: &App, id: Value, checked: Checked) -> Outcome {
    if let Err(refused) = app.writable() {
        return refused;
    }
    let hash = checked.hash;
    command(
        Command::RedeemUserOp {
            user_op_hash: engine_b256(&hash),
            sender: engine_address(&checked.sender),
            signer: engine_address(&checked.signer),
            nonce: checked.nonce,
            condition_id: engine_b256(&checked.condition_id),
        },
        move |_, reply| {
            let result = match reply {
                Reply::Ok => Ok(json!(hash.to_string())),
                Reply::Rejected(Reject::UserOpNonce { expected }) => Err((
                    REJECTED,
                    Reject::UserOpNonce { expected }.to_string(),
                    Some(json!({ "expectedNonce": format_quantity(&U256::from(expected)) })),
                )),
                Reply::Rejected(Reject::MarketNotResolved) => {
                    Err((REJECTED, "market not resolved".to_string(), None))
                }
                Reply::Rejected(reject) => Err((REJECTED, reject.to_string(), None)),
                _ => Err((REJECTED, "internal error".to_string(), None)),
            };
            rpc_response(&id, result)
        },
    )
}

/// `eth_getUserOperationReceipt`'s answer.
fn receipt_json(hash: &B256, entry_point: &Address, receipt: &UserOpReceipt) -> Value {
    let transaction_hash = B256::from(receipt.transaction_hash.0).to_string();
    json!({
        "userOpHash": hash.to_string(),
        "entryPoint": entry_point.to_string(),
        "sender": Address(receipt.sender.0).to_string(),
        "nonce": format_quantity(&U256::from(receipt.nonce)),
        "paymaster": Address::ZERO.to_string(),
        "success": true,
        "actualGasCost": "0x0",
        "actualGasUsed": "0x0",
        "logs": [],
        "receipt": {
            "transactionHash": transaction_hash,
            "transactionIndex": "0x0",
            "blockNumber": format_quantity(&U256::from(receipt.seq)),
            "status": "0x1",
            "logs": [],
        },
    })
}

/// `eth_getUserOperationByHash`'s answer: the operation's sender, nonce and call (the gas
/// fields and the signature are not kept).
fn by_hash_json(entry_point: &Address, exchange: &Address, receipt: &UserOpReceipt) -> Value {
    let call_data = execute_redeem_call_data(exchange, &B256::from(receipt.condition_id.0));
    json!({
        "userOperation": {
            "sender": Address(receipt.sender.0).to_string(),
            "nonce": format_quantity(&U256::from(receipt.nonce)),
            "callData": format!("0x{}", hex::encode(call_data)),
        },
        "entryPoint": entry_point.to_string(),
        "transactionHash": B256::from(receipt.transaction_hash.0).to_string(),
        "blockNumber": format_quantity(&U256::from(receipt.seq)),
        "blockHash": Value::Null,
    })
}

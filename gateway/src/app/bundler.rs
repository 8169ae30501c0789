//! `POST /bundler` (public, JSON-RPC 2.0; API.md §13): the service is an ERC-4337 bundler
//! (EntryPoint v0.7) for redeeming claimable positions. Without `--rpc-url` it bundles on its
//! own ledger: a valid redeem operation is one journaled command, applied at once, and its
//! receipt is kept. With `--rpc-url` ([`ChainBundler`]) an operation whose form and ledger
//! check out goes to the bundler beside the node (`--bundler-url`), which answers it, its
//! gas estimate and its receipt; the chain's EntryPoint checks signature and nonce, and the
//! service marks the entries redeemed when the exchange's redemption event is final.
//! Refusals are JSON-RPC errors and change nothing.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ladder_chain::{RpcClient, RpcError};
use ladder_engine::{Command, Engine, Reject, Reply, UserOpReceipt};
use ladder_protocol::user_op::{
    eip191_digest, execute_redeem_call_data, format_quantity, parse_user_operation,
    redeemed_market, UserOperation,
};
use ladder_protocol::{Address, AddressError, Signature, B256, CHAIN_ID, U256};
use serde_json::{json, Value};

use super::refusals::Worded;
use super::{command, query, App};
use crate::handler::{unexpected, Outcome};
use crate::http::{Method, Request, Response, Status};

/// JSON-RPC: the body is not JSON.
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: the request is not valid JSON-RPC.
const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: no such method.
const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC: malformed parameters.
const INVALID_PARAMS: i64 = -32602;
/// ERC-4337: the operation was refused (validation).
const REJECTED: i64 = -32500;
/// ERC-4337 (bundlers such as Alto): the account's signature check failed; answered as
/// [`REJECTED`] (CONTRACT 20: `-32500` with `AA24 signature error`).
const SIGNATURE_CHECK_FAILED: i64 = -32507;
/// JSON-RPC: the call could not be carried out (the bundler beside the node did not answer).
const INTERNAL_ERROR: i64 = -32603;

/// With `--rpc-url`: the node's chain and the ERC-4337 bundler run beside it.
pub struct ChainBundler {
    /// `--bundler-url`'s client; without one, operations are refused with a message that
    /// says so.
    pub bundler: Option<RpcClient>,
    /// The node's client (`--rpc-url`): the EntryPoint's nonces, gas prices.
    pub node: RpcClient,
    /// The node's chain id (the userOpHash's).
    pub chain_id: u64,
    /// The exchange contract (`--exchange-address`), whose `Redeemed` events say what was
    /// redeemed on the chain.
    pub exchange: Address,
    /// The first block whose redemptions the service has not journaled yet (the redemption
    /// watch moves it): a redemption from there on is on the chain, but its entries are still
    /// in the ledger until it is final.
    pub redemptions_unrecorded_from: Arc<AtomicU64>,
}

/// Gas the service asks for (it charges none): what `eth_estimateUserOperationGas` answers.
const GAS_ESTIMATE: (u64, u64, u64) = (50_000, 150_000, 100_000);

/// Routes `POST /bundler`; `None` for any other path.
pub(super) fn route(app: &App, method: Method, path: &str, request: &Request) -> Option<Outcome> {
    if path != "/bundler" || method != Method::Post {
        return None;
    }
    Some(match serde_json::from_slice::<Value>(&request.body) {
        Ok(call @ Value::Object(_)) => dispatch(app, &call),
        Ok(Value::Array(_)) => answer(
            &Value::Null,
            Err((
                INVALID_REQUEST,
                "batch requests are not supported: send one call per request".into(),
                None,
            )),
        ),
        Ok(_) => answer(
            &Value::Null,
            Err((
                INVALID_REQUEST,
                "body: expected a JSON-RPC call object".into(),
                None,
            )),
        ),
        Err(_) => answer(
            &Value::Null,
            Err((PARSE_ERROR, "body: not JSON".into(), None)),
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
    // JSON-RPC 2.0: an id is a string, a number or null; one that is not (or a number past
    // 64 bits, which would not come back as sent) cannot be echoed.
    let echoable = match &id {
        Value::Null | Value::String(_) => true,
        Value::Number(n) => n.is_i64() || n.is_u64(),
        _ => false,
    };
    if !echoable {
        return answer(
            &Value::Null,
            Err((
                INVALID_REQUEST,
                "id: expected a string, an integer or null".into(),
                None,
            )),
        );
    }
    let Some(method) = call.get("method").and_then(Value::as_str) else {
        return answer(&id, Err((INVALID_REQUEST, "method: required".into(), None)));
    };
    let params = call
        .get("params")
        .cloned()
        .unwrap_or(Value::Array(Vec::new()));
    let entry_point = app.config.entry_point;
    if let Some(chain) = &app.config.chain_bundler {
        return dispatch_on_chain(app, chain, id, method, params);
    }
    match method {
        "eth_chainId" => answer(&id, Ok(json!(format_quantity(&U256::from(CHAIN_ID))))),
        "eth_supportedEntryPoints" => answer(&id, Ok(json!([entry_point.to_string()]))),
        "eth_estimateUserOperationGas" => {
            // An estimate is asked before signing: the form is checked, not the signature.
            let estimate = parse_form(app, &params).map(|_| {
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
                move |engine: &Engine| engine.user_op_receipt(&hash),
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

impl std::fmt::Debug for ChainBundler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChainBundler")
            .field("bundler", &self.bundler.as_ref().map(RpcClient::url))
            .field("node", &self.node.url())
            .field("chain_id", &self.chain_id)
            .finish()
    }
}

/// The methods with `--rpc-url`: the chain's id; operations checked for form and against
/// the ledger, then sent, estimated and looked up at the bundler beside the node.
fn dispatch_on_chain(
    app: &App,
    chain: &Arc<ChainBundler>,
    id: Value,
    method: &str,
    params: Value,
) -> Outcome {
    match method {
        "eth_chainId" => answer(&id, Ok(json!(format_quantity(&U256::from(chain.chain_id))))),
        "eth_supportedEntryPoints" => answer(&id, Ok(json!([app.config.entry_point.to_string()]))),
        "eth_estimateUserOperationGas" => match parse_form(app, &params) {
            Err(error) => answer(&id, Err(error)),
            Ok(_) => forward(
                chain,
                id,
                method,
                params,
                Before::Nothing,
                After::SuggestFees,
            ),
        },
        "eth_sendUserOperation" => match parse_form(app, &params) {
            Err(error) => answer(&id, Err(error)),
            Ok(form) => {
                let (sender, condition_id) = (form.op.sender, form.condition_id);
                // Read before the ledger check: a redemption journaled after this read is
                // in a block from here on, so the chain check below still finds it when the
                // ledger check ran before its entries left.
                let unrecorded_from = chain.redemptions_unrecorded_from.load(Ordering::Acquire);
                let chain = chain.clone();
                let (query, checked) = ladder_sequencer::query(move |engine: &Engine| {
                    engine.check_redeemable(&sender, &condition_id)
                });
                let work = ladder_sequencer::Work::Query(query);
                let method = method.to_string();
                let entry_point = app.config.entry_point;
                let nonce = form.op.nonce_key_and_sequence().1;
                let check_nonce = Before::CheckRedeem {
                    entry_point,
                    sender,
                    nonce,
                    condition_id,
                    unrecorded_from,
                };
                Outcome::then(work, move |completion| {
                    let ladder_sequencer::Completion::Answered { .. } = completion else {
                        return Outcome::Respond(unexpected(completion));
                    };
                    match checked.take() {
                        Some(Ok(())) => {
                            forward(&chain, id, &method, params, check_nonce, After::Nothing)
                        }
                        Some(Err(Reject::MarketNotResolved)) => {
                            answer(&id, Err((REJECTED, "market not resolved".into(), None)))
                        }
                        Some(Err(reject)) => {
                            answer(&id, Err((REJECTED, reject.words().to_string(), None)))
                        }
                        None => answer(&id, Err((INTERNAL_ERROR, "internal error".into(), None))),
                    }
                })
            }
        },
        "eth_getUserOperationReceipt" | "eth_getUserOperationByHash" => {
            match params
                .get(0)
                .and_then(Value::as_str)
                .map(str::parse::<B256>)
            {
                Some(Ok(_)) => forward(chain, id, method, params, Before::Nothing, After::Nothing),
                _ => answer(
                    &id,
                    Err(params_error("params[0]: expected a 0x userOpHash")),
                ),
            }
        }
        other => answer(
            &id,
            Err((METHOD_NOT_FOUND, format!("method not found: {other}"), None)),
        ),
    }
}

/// What a forwarded call checks at the node first.
enum Before {
    Nothing,
    /// A redeem: the operation's sequence must be the EntryPoint's next for its sender (key
    /// 0), else the refusal says which (`data.expectedNonce`), as the built-in bundler's does;
    /// and the sender must not have redeemed the market already in a block whose redemptions
    /// are not journaled yet (not final): a second redeem finds nothing to redeem (CONTRACT
    /// 20), though the ledger keeps the entries until the first is final.
    CheckRedeem {
        entry_point: Address,
        sender: Address,
        nonce: u64,
        condition_id: B256,
        /// The first block whose redemptions were not journaled when the ledger was asked.
        unrecorded_from: u64,
    },
}

/// What a forwarded call adds to the bundler's answer.
enum After {
    Nothing,
    /// Fees the bundler would take (`maxFeePerGas`, `maxPriorityFeePerGas`), beside the
    /// gas limits of an estimate, unless the bundler gave them.
    SuggestFees,
}

/// Sends the call to the bundler beside the node (off the event loop) and answers with what
/// it answers: its result, or its error (code, message and data as it gave them).
fn forward(
    chain: &Arc<ChainBundler>,
    id: Value,
    method: &str,
    params: Value,
    before: Before,
    after: After,
) -> Outcome {
    if chain.bundler.is_none() {
        return answer(
            &id,
            Err((
                INTERNAL_ERROR,
                "no bundler: the service was started with --rpc-url but without --bundler-url"
                    .into(),
                None,
            )),
        );
    }
    let (chain, method) = (chain.clone(), method.to_string());
    Outcome::defer(move || {
        let Some(bundler) = &chain.bundler else {
            unreachable!("checked before deferring");
        };
        if let Before::CheckRedeem {
            entry_point,
            sender,
            nonce,
            condition_id,
            unrecorded_from,
        } = before
        {
            if let Err(refusal) = check_redeem_on_chain(
                &chain,
                &entry_point,
                &sender,
                nonce,
                &condition_id,
                unrecorded_from,
            ) {
                return answer(&id, Err(refusal));
            }
        }
        let result = match bundler.call(&method, params) {
            Ok(mut result) => {
                if let (After::SuggestFees, Some(fields)) = (&after, result.as_object_mut()) {
                    if !fields.contains_key("maxFeePerGas") {
                        if let Some((max_fee, priority)) = fees(bundler, &chain.node) {
                            fields.insert("maxFeePerGas".into(), json!(max_fee));
                            fields.insert("maxPriorityFeePerGas".into(), json!(priority));
                        }
                    }
                }
                Ok(result)
            }
            // A refusal is CONTRACT 20's rejection, worded from its EntryPoint code on
            // (ERC-4337's code for a failed signature check too).
            Err(RpcError::Node {
                code: SIGNATURE_CHECK_FAILED | REJECTED,
                message,
                data,
            }) => Err((
                REJECTED,
                entry_point_words(message),
                data.map(Value::String),
            )),
            Err(RpcError::Node {
                code,
                message,
                data,
            }) => Err((code, message, data.map(Value::String))),
            Err(other) => Err((
                INTERNAL_ERROR,
                format!("the bundler did not answer: {other}"),
                None,
            )),
        };
        answer(&id, result)
    })
}

/// A bundler's refusal as CONTRACT 20 words it: from the EntryPoint's `AAnn ` code on
/// (bundlers such as Alto say `UserOperation reverted with reason: AA24 signature error`);
/// a message without such a code as given.
fn entry_point_words(message: String) -> String {
    let bytes = message.as_bytes();
    let code_at = (0..bytes.len().saturating_sub(4)).find(|&i| {
        bytes[i..i + 2] == *b"AA"
            && bytes[i + 2].is_ascii_digit()
            && bytes[i + 3].is_ascii_digit()
            && bytes[i + 4] == b' '
            && (i == 0 || !bytes[i - 1].is_ascii_alphanumeric())
    });
    match code_at {
        Some(i) => message[i..].to_string(),
        None => message,
    }
}

/// What a redeem needs of the chain before it goes to the bundler: no `Redeemed` event of
/// `sender` in `condition_id` from `unrecorded_from` on (a redemption not final yet, whose
/// entries the ledger still lists), and `nonce` the EntryPoint's next for `sender`. The
/// JSON-RPC error otherwise (`-32603` when the node does not answer).
fn check_redeem_on_chain(
    chain: &ChainBundler,
    entry_point: &Address,
    sender: &Address,
    nonce: u64,
    condition_id: &B256,
    unrecorded_from: u64,
) -> Result<(), (i64, String, Option<Value>)> {
    let node_silent = |e: RpcError| {
        (
            INTERNAL_ERROR,
            format!("the node did not answer: {e}"),
            None,
        )
    };
    let redeemed = ladder_chain::redemptions::redeemed_since(
        &chain.node,
        &chain.exchange,
        sender,
        condition_id,
        unrecorded_from,
    )
    .map_err(node_silent)?;
    if redeemed {
        return Err((REJECTED, Reject::NothingToRedeem.words().to_string(), None));
    }
    let expected = chain_nonce(&chain.node, entry_point, sender).map_err(node_silent)?;
    if expected != nonce {
        return Err((
            REJECTED,
            Reject::UserOpNonce { expected }.words().to_string(),
            Some(json!({ "expectedNonce": format_quantity(&U256::from(expected)) })),
        ));
    }
    Ok(())
}

/// The sequence number the EntryPoint expects next from `sender` under key 0.
fn chain_nonce(node: &RpcClient, entry_point: &Address, sender: &Address) -> Result<u64, RpcError> {
    let out = node.eth_call(
        &entry_point.to_lowercase_hex(),
        &ladder_chain::entry_point::get_nonce_call(sender, U256::ZERO),
    )?;
    let word: [u8; 32] = out
        .get(..32)
        .and_then(|w| w.try_into().ok())
        .ok_or_else(|| RpcError::Malformed("getNonce: short answer".into()))?;
    let mut low = [0u8; 8];
    low.copy_from_slice(&word[24..]);
    Ok(u64::from_be_bytes(low))
}

/// Fees an operation needs to be taken now, as `0x` quantities: the bundler's own
/// (`pimlico_getUserOperationGasPrice`, its "fast" tier) when it has that method, else twice
/// the node's gas price and its priority fee.
fn fees(bundler: &RpcClient, node: &RpcClient) -> Option<(String, String)> {
    if let Ok(prices) = bundler.call("pimlico_getUserOperationGasPrice", json!([])) {
        let fast = &prices["fast"];
        if let (Some(max_fee), Some(priority)) = (
            fast["maxFeePerGas"].as_str(),
            fast["maxPriorityFeePerGas"].as_str(),
        ) {
            return Some((max_fee.to_string(), priority.to_string()));
        }
    }
    let gas_price =
        ladder_chain::rpc::quantity(&node.call("eth_gasPrice", json!([])).ok()?).ok()?;
    let priority = node
        .call("eth_maxPriorityFeePerGas", json!([]))
        .ok()
        .and_then(|v| ladder_chain::rpc::quantity(&v).ok())
        .unwrap_or(gas_price);
    Some((
        format_quantity(&U256::from(gas_price.saturating_mul(2))),
        format_quantity(&U256::from(priority)),
    ))
}

/// An operation's form: parsed strictly, for the served entry point, a redeem call of the
/// exchange, nonce key 0.
struct Form {
    op: UserOperation,
    entry_point: Address,
    condition_id: B256,
}

fn parse_form(app: &App, params: &Value) -> Result<Form, (i64, String, Option<Value>)> {
    let op_value = params
        .get(0)
        .ok_or_else(|| params_error("params[0]: the user operation is required"))?;
    let op: UserOperation = parse_user_operation(op_value).map_err(params_error)?;
    let entry_point = match params.get(1).and_then(Value::as_str) {
        Some(text) => Address::parse(text).map_err(|e| match e {
            AddressError::Malformed => {
                params_error("params[1]: expected the entry point's address")
            }
            checksum => params_error(format!("params[1]: {checksum}")),
        })?,
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
    let (keyed, _) = op.nonce_key_and_sequence();
    if keyed {
        return Err((
            REJECTED,
            Reject::UserOpNonce { expected: 0 }.words().to_string(),
            None,
        ));
    }
    Ok(Form {
        op,
        entry_point,
        condition_id,
    })
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
    let Form {
        op,
        entry_point,
        condition_id,
    } = parse_form(app, params)?;
    let (_, nonce) = op.nonce_key_and_sequence();
    let hash = op.hash(&entry_point, CHAIN_ID);
    // A signature of another length is a malformed parameter (CONTRACT 20), not a wrong
    // signer: an estimate may carry a placeholder, a sent operation must be signed.
    let signature: [u8; 65] = op.signature.as_slice().try_into().map_err(|_| {
        params_error(format!(
            "signature: expected 65 bytes (r, s, v), found {}",
            op.signature.len()
        ))
    })?;
    let signer = Signature::from_bytes(signature)
        .recover_address(&eip191_digest(&hash))
        .map_err(|_| (REJECTED, Reject::UserOpSignature.words().to_string(), None))?;
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
            user_op_hash: hash,
            sender: checked.sender,
            signer: checked.signer,
            nonce: checked.nonce,
            condition_id: checked.condition_id,
        },
        move |_, reply| {
            let result = match reply {
                Reply::Ok => Ok(json!(hash.to_string())),
                Reply::Rejected(Reject::UserOpNonce { expected }) => Err((
                    REJECTED,
                    Reject::UserOpNonce { expected }.words().to_string(),
                    Some(json!({ "expectedNonce": format_quantity(&U256::from(expected)) })),
                )),
                Reply::Rejected(Reject::MarketNotResolved) => {
                    Err((REJECTED, "market not resolved".to_string(), None))
                }
                Reply::Rejected(reject) => Err((REJECTED, reject.words().to_string(), None)),
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
            "blockHash": ledger_block_hash(receipt.seq).to_string(),
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
        "blockHash": ledger_block_hash(receipt.seq).to_string(),
    })
}

/// The "block" of an operation carried out on the service's own ledger: its journal sequence
/// is its number, and its hash is keccak256 of that number as a 32-byte big-endian word (no
/// chain block holds it; ERC-4337 clients expect a 32-byte hash there, not null).
fn ledger_block_hash(seq: u64) -> B256 {
    B256::from(ladder_protocol::keccak::keccak256(
        &U256::from(seq).to_be_bytes(),
    ))
}

#[cfg(test)]
mod tests {
    use super::entry_point_words;

    #[test]
    fn a_bundlers_refusal_is_worded_from_its_entry_point_code_on() {
        for (given, words) in [
            (
                "UserOperation reverted with reason: AA24 signature error",
                "AA24 signature error",
            ),
            ("AA20 account not deployed", "AA20 account not deployed"),
            (
                "UserOperation reverted during simulation with reason: AA25 invalid account nonce",
                "AA25 invalid account nonce",
            ),
            ("nothing to redeem", "nothing to redeem"),
            ("AAA", "AAA"),
        ] {
            assert_eq!(entry_point_words(given.to_string()), words);
        }
    }
}

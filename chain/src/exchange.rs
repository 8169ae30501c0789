//! The exchange contract's settlement surface (contracts/TestExchange.sol):
//! `matchOrders(bytes32 batchId, Fill[] fills)` sent by the operator account, the batch's
//! receipt, and `settledAt(batchId)`, which tells a restarted service whether a batch already
//! went through.

use ladder_protocol::Address;
use serde_json::{json, Value};

use crate::abi::{address_word, encode_call, revert_reason, selector, uint_word, Arg, Word};
use crate::rpc::{bytes, quantity, to_hex, RpcClient, RpcError};

/// The Solidity signature of the settlement call.
pub const MATCH_ORDERS: &str = "matchOrders(bytes32,(bytes32,bytes32,bytes32,address,address,uint256,uint8,uint64,uint64,uint8)[])";
/// Gas offered per batch at most: a fixed base and a share per fill (generous; unused gas is
/// refunded). The node's estimate with a quarter more is offered when it is lower, and never
/// more than a block holds.
const GAS_BASE: u64 = 120_000;
const GAS_PER_FILL: u64 = 60_000;
/// Above this much gas the latest block's limit is read, so that the offer fits in a block.
const GAS_CHECKED_AGAINST_BLOCK: u64 = 8_000_000;
/// What nodes say when a call needs more gas than a block holds (estimation).
const GAS_OVER_BLOCK: [&str; 3] = [
    "gas required exceeds",
    "exceeds block gas limit",
    "intrinsic gas too high",
];

/// One fill of a batch, as the contract's `Fill` struct.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fill {
    /// The trade id.
    pub trade_id: [u8; 32],
    /// The taker order's hash.
    pub taker_order_hash: [u8; 32],
    /// The maker order's hash.
    pub maker_order_hash: [u8; 32],
    /// The taker's account.
    pub taker: Address,
    /// The maker's account.
    pub maker: Address,
    /// The token the taker traded (uint256, big-endian).
    pub token_id: [u8; 32],
    /// The taker's side: 0 BUY, 1 SELL.
    pub side: u8,
    /// Price in ticks of 0.0001.
    pub price_ticks: u64,
    /// Size in base units.
    pub size: u64,
    /// 0 COMPLEMENTARY, 1 MINT, 2 MERGE.
    pub match_type: u8,
}

impl Fill {
    /// The struct's ten words.
    pub fn words(&self) -> Vec<Word> {
        vec![
            self.trade_id,
            self.taker_order_hash,
            self.maker_order_hash,
            address_word(&self.taker),
            address_word(&self.maker),
            self.token_id,
            uint_word(u64::from(self.side)),
            uint_word(self.price_ticks),
            uint_word(self.size),
            uint_word(u64::from(self.match_type)),
        ]
    }
}

/// The calldata of `matchOrders(batch_id, fills)`.
pub fn match_orders_calldata(batch_id: &[u8; 32], fills: &[Fill]) -> Vec<u8> {
    let tuples: Vec<Vec<Word>> = fills.iter().map(Fill::words).collect();
    encode_call(
        selector(MATCH_ORDERS),
        &[Arg::Word(*batch_id), Arg::StaticTuples(&tuples)],
    )
}

/// A mined transaction's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Receipt {
    /// The block it was mined in.
    pub block_number: u64,
    /// Whether it succeeded (`false`: it reverted).
    pub success: bool,
}

/// Why a submission did not produce a transaction hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SubmitError {
    /// The call reverts (the node refused it at estimation, before anything was sent):
    /// retrying will not help, unless the state it ran on already holds the batch.
    Reverted(String),
    /// The estimate failed otherwise (the node unreachable, say): nothing was sent; retry
    /// later.
    Rpc(RpcError),
    /// `eth_sendTransaction` failed or its answer was lost: the node may have taken the
    /// transaction (a timeout after it did, a refusal such as "already known" or "nonce too
    /// low"), so the batch may be on its way to the chain.
    Unanswered(RpcError),
}

impl std::fmt::Display for SubmitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SubmitError::Reverted(why) => write!(f, "reverted: {why}"),
            SubmitError::Rpc(e) => e.fmt(f),
            SubmitError::Unanswered(e) => write!(f, "sent, answer unknown: {e}"),
        }
    }
}

/// Talks to one exchange contract from one operator account.
pub struct ExchangeClient {
    rpc: RpcClient,
    exchange: Address,
    from: Address,
}

impl ExchangeClient {
    /// A client of `exchange` sending as `from` (an account the node signs for:
    /// an unlocked development account, or a signing proxy such as Web3Signer or Clef).
    pub fn new(rpc: RpcClient, exchange: Address, from: Address) -> ExchangeClient {
        ExchangeClient {
            rpc,
            exchange,
            from,
        }
    }

    /// The node's first account (`eth_accounts`), the default sender.
    pub fn first_account(rpc: &RpcClient) -> Result<Address, RpcError> {
        let accounts = rpc.call("eth_accounts", json!([]))?;
        let first = accounts
            .as_array()
            .and_then(|a| a.first())
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::Malformed("the node manages no account".into()))?;
        Address::parse_ignoring_checksum(first)
            .map_err(|e| RpcError::Malformed(format!("eth_accounts: {e}")))
    }

    /// The RPC client.
    pub fn rpc(&self) -> &RpcClient {
        &self.rpc
    }

    /// Sends `matchOrders(batch_id, fills)`; the transaction hash.
    pub fn submit(&self, batch_id: &[u8; 32], fills: &[Fill]) -> Result<[u8; 32], SubmitError> {
        let data = match_orders_calldata(batch_id, fills);
        let call = json!({
            "from": self.from.to_lowercase_hex(),
            "to": self.exchange.to_lowercase_hex(),
            "data": to_hex(&data),
        });
        // Estimation first: a batch the contract refuses is known now, not after mining.
        let estimate = self
            .rpc
            .call("eth_estimateGas", json!([call]))
            .and_then(|answer| quantity(&answer))
            .map_err(classify)?;
        let mut gas = (GAS_BASE + GAS_PER_FILL * fills.len() as u64)
            .min(estimate.saturating_add(estimate / 4).saturating_add(25_000));
        if gas > GAS_CHECKED_AGAINST_BLOCK {
            let block = self
                .rpc
                .call("eth_getBlockByNumber", json!(["latest", false]))
                .and_then(|block| quantity(&block["gasLimit"]))
                .map_err(SubmitError::Rpc)?;
            if estimate > block {
                return Err(SubmitError::Reverted(format!(
                    "the batch needs {estimate} gas, more than a block holds ({block})"
                )));
            }
            gas = gas.min(block);
        }
        let mut params = json!([call]);
        params[0]["gas"] = json!(format!("0x{gas:x}"));
        let hash = self
            .rpc
            .call("eth_sendTransaction", params)
            .map_err(SubmitError::Unanswered)?;
        let raw = bytes(&hash).map_err(SubmitError::Unanswered)?;
        <[u8; 32]>::try_from(raw.as_slice()).map_err(|_| {
            SubmitError::Unanswered(RpcError::Malformed("transaction hash length".into()))
        })
    }

    /// The receipt of `tx`, once mined.
    pub fn receipt(&self, tx: &[u8; 32]) -> Result<Option<Receipt>, RpcError> {
        let receipt = self
            .rpc
            .call("eth_getTransactionReceipt", json!([to_hex(tx)]))?;
        if receipt.is_null() {
            return Ok(None);
        }
        let block_number = quantity(&receipt["blockNumber"])?;
        let success = quantity(&receipt["status"])? == 1;
        Ok(Some(Receipt {
            block_number,
            success,
        }))
    }

    /// The block at which the contract recorded `batch_id` (0: not settled).
    pub fn settled_at(&self, batch_id: &[u8; 32]) -> Result<u64, RpcError> {
        self.settled_at_block(batch_id, "latest")
    }

    /// Whether `batch_id` is settled in the node's pending state: mined, or in a transaction
    /// waiting in the node's pool (one whose sender did not see the answer, say).
    pub fn settled_pending(&self, batch_id: &[u8; 32]) -> Result<bool, RpcError> {
        Ok(self.settled_at_block(batch_id, "pending")? > 0)
    }

    /// Whether the node knows transaction `tx` (pending or mined): `false` once its pool has
    /// dropped it, or after a restart of the node that lost it.
    pub fn transaction_known(&self, tx: &[u8; 32]) -> Result<bool, RpcError> {
        let found = self
            .rpc
            .call("eth_getTransactionByHash", json!([to_hex(tx)]))?;
        Ok(!found.is_null())
    }

    /// `settledAt(batch_id)` at `block` (a tag).
    fn settled_at_block(&self, batch_id: &[u8; 32], block: &str) -> Result<u64, RpcError> {
        let data = encode_call(selector("settledAt(bytes32)"), &[Arg::Word(*batch_id)]);
        let returned = self
            .rpc
            .eth_call_at(&self.exchange.to_lowercase_hex(), &data, block)?;
        let word = returned
            .get(..32)
            .ok_or_else(|| RpcError::Malformed("settledAt: short answer".into()))?;
        crate::abi::word_as_usize(word)
            .map(|n| n as u64)
            .ok_or_else(|| RpcError::Malformed("settledAt: not a block number".into()))
    }

    /// Whether a contract lives at the exchange address (an address without code accepts
    /// any call and records nothing).
    pub fn has_code(&self) -> Result<bool, RpcError> {
        let code = self.rpc.call(
            "eth_getCode",
            json!([self.exchange.to_lowercase_hex(), "latest"]),
        )?;
        Ok(!bytes(&code)?.is_empty())
    }

    /// The chain's newest block number.
    pub fn block_number(&self) -> Result<u64, RpcError> {
        self.rpc.block_number()
    }
}

/// A revert is final; anything else may pass on a retry.
fn classify(error: RpcError) -> SubmitError {
    if let RpcError::Node { message, .. } = &error {
        let lower = message.to_ascii_lowercase();
        if GAS_OVER_BLOCK.iter().any(|says| lower.contains(says)) {
            // The same on every retry: the batch does not fit in a block.
            return SubmitError::Reverted(format!("the batch does not fit in a block: {message}"));
        }
    }
    if !error.is_revert() {
        return SubmitError::Rpc(error);
    }
    let reason = match &error {
        RpcError::Node { data: Some(d), .. } => crate::rpc::bytes(&json!(d))
            .ok()
            .and_then(|data| revert_reason(&data)),
        _ => None,
    };
    let message = match &error {
        RpcError::Node { message, .. } => message.clone(),
        other => other.to_string(),
    };
    SubmitError::Reverted(reason.unwrap_or(message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_that_does_not_fit_in_a_block_is_a_final_refusal_not_a_retry() {
        let node = |message: &str| RpcError::Node {
            code: -32000,
            message: message.into(),
            data: None,
        };
        for message in [
            "gas required exceeds allowance (30000000)",
            "intrinsic gas too high -- tx.gas_limit > env.block.gas_limit",
            "exceeds block gas limit",
        ] {
            assert!(
                matches!(classify(node(message)), SubmitError::Reverted(_)),
                "{message}"
            );
        }
        assert!(matches!(
            classify(node("header not found")),
            SubmitError::Rpc(_)
        ));
    }

    #[test]
    fn the_calldata_is_the_selector_the_batch_id_then_the_fills() {
        let fill = Fill {
            trade_id: [1; 32],
            taker_order_hash: [2; 32],
            maker_order_hash: [3; 32],
            taker: Address([4; 20]),
            maker: Address([5; 20]),
            token_id: [6; 32],
            side: 1,
            price_ticks: 4_500,
            size: 10_000_000,
            match_type: 2,
        };
        let data = match_orders_calldata(&[9; 32], &[fill.clone(), fill]);
        assert_eq!(data[..4], selector(MATCH_ORDERS));
        let words: Vec<&[u8]> = data[4..].chunks(32).collect();
        assert_eq!(words.len(), 2 + 1 + 20);
        assert_eq!(words[0], [9; 32]);
        assert_eq!(words[1], uint_word(64));
        assert_eq!(words[2], uint_word(2));
        assert_eq!(words[3], [1; 32]);
        assert_eq!(&words[6][12..], &[4; 20]);
        assert_eq!(words[10], uint_word(4_500));
        assert_eq!(words[12], uint_word(2));
        assert_eq!(words[13], [1; 32]);
    }

    #[test]
    fn a_revert_is_final_and_names_its_reason() {
        let mut data = selector("Error(string)").to_vec();
        data.extend_from_slice(&crate::abi::encode(&[Arg::Bytes(
            b"exchange is rejecting batches",
        )]));
        let revert = RpcError::Node {
            code: 3,
            message: "execution reverted".into(),
            data: Some(to_hex(&data)),
        };
        assert_eq!(
            classify(revert),
            SubmitError::Reverted("exchange is rejecting batches".into())
        );
        let down = RpcError::Transport("refused".into());
        assert_eq!(classify(down.clone()), SubmitError::Rpc(down));
    }
}

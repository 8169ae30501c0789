//! The exchange contract's `Redeemed(address indexed account, bytes32 indexed conditionId,
//! uint256 payout)` events: which accounts redeemed which market on the chain, read with
//! `eth_getLogs` over a range of blocks.

use ladder_protocol::{Address, B256};
use serde_json::{json, Value};

use crate::rpc::{quantity, RpcClient, RpcError};

/// The event's signature.
pub const REDEEMED_EVENT: &str = "Redeemed(address,bytes32,uint256)";

/// One redemption the chain recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Redemption {
    /// The block that holds it.
    pub block: u64,
    /// The redeeming account (a smart account, through its `execute`).
    pub account: Address,
    /// The market.
    pub condition_id: B256,
}

/// The event's topic 0: the keccak-256 of its signature.
fn redeemed_topic() -> String {
    let hash = ladder_protocol::keccak::keccak256(REDEEMED_EVENT.as_bytes());
    format!("0x{}", hex::encode(hash))
}

/// The `Redeemed` events of `exchange` in blocks `from..=to`, in chain order.
pub fn redemptions_in(
    rpc: &RpcClient,
    exchange: &Address,
    from: u64,
    to: u64,
) -> Result<Vec<Redemption>, RpcError> {
    let logs = rpc.call(
        "eth_getLogs",
        json!([{
            "address": exchange.to_lowercase_hex(),
            "fromBlock": format!("0x{from:x}"),
            "toBlock": format!("0x{to:x}"),
            "topics": [redeemed_topic()],
        }]),
    )?;
    let logs = logs
        .as_array()
        .ok_or_else(|| RpcError::Malformed("eth_getLogs: not a list".into()))?;
    logs.iter().map(parse_log).collect()
}

/// The most blocks [`redeemed_since`] reads back from the newest (providers cap the range of
/// one `eth_getLogs`, often at 10,000 blocks).
pub const REDEEMED_LOOKBACK_BLOCKS: u64 = 9_000;

/// Whether `account` redeemed `condition_id` on the chain in a block from `from` on (up to
/// the newest, final or not; at most [`REDEEMED_LOOKBACK_BLOCKS`] back from the newest):
/// `eth_blockNumber`, then one `eth_getLogs` filtered by both indexed topics.
pub fn redeemed_since(
    rpc: &RpcClient,
    exchange: &Address,
    account: &Address,
    condition_id: &B256,
    from: u64,
) -> Result<bool, RpcError> {
    let head = rpc.block_number()?;
    // Nothing newer than the head yet (a range that starts past it is an error to geth).
    if from > head {
        return Ok(false);
    }
    let from = from.max(head.saturating_sub(REDEEMED_LOOKBACK_BLOCKS));
    let logs = rpc.call(
        "eth_getLogs",
        json!([{
            "address": exchange.to_lowercase_hex(),
            "fromBlock": format!("0x{from:x}"),
            "toBlock": "latest",
            "topics": [
                redeemed_topic(),
                format!("0x{}{}", "00".repeat(12), hex::encode(account.0)),
                format!("0x{}", hex::encode(condition_id.0)),
            ],
        }]),
    )?;
    let logs = logs
        .as_array()
        .ok_or_else(|| RpcError::Malformed("eth_getLogs: not a list".into()))?;
    Ok(!logs.is_empty())
}

/// One log as a redemption.
fn parse_log(log: &Value) -> Result<Redemption, RpcError> {
    let malformed = |what: &str| RpcError::Malformed(format!("Redeemed log: {what}: {log}"));
    let topic = |i: usize| -> Result<[u8; 32], RpcError> {
        let text = log["topics"][i]
            .as_str()
            .ok_or_else(|| malformed("topics"))?;
        hex::decode(text.trim_start_matches("0x"))
            .ok()
            .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
            .ok_or_else(|| malformed("topic"))
    };
    let account_word = topic(1)?;
    let mut account = [0u8; 20];
    account.copy_from_slice(&account_word[12..]);
    Ok(Redemption {
        block: quantity(&log["blockNumber"]).map_err(|_| malformed("blockNumber"))?,
        account: Address(account),
        condition_id: B256::from(topic(2)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::selector;

    #[test]
    fn the_topic_is_the_events_signature_hash() {
        assert_eq!(
            redeemed_topic()[2..10],
            hex::encode(selector(REDEEMED_EVENT))
        );
    }

    #[test]
    fn a_log_gives_its_block_account_and_market() {
        let log = json!({
            "blockNumber": "0x1f",
            "topics": [
                redeemed_topic(),
                format!("0x{}{}", "00".repeat(12), "ab".repeat(20)),
                format!("0x{}", "cd".repeat(32)),
            ],
            "data": format!("0x{}", "00".repeat(32)),
        });
        assert_eq!(
            parse_log(&log).unwrap(),
            Redemption {
                block: 31,
                account: Address([0xab; 20]),
                condition_id: B256::from([0xcd; 32]),
            }
        );
        let mut short = log.clone();
        short["topics"] = json!([redeemed_topic()]);
        assert!(parse_log(&short).is_err());
    }
}

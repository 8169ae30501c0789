//! The trade log: every fill, its settlement batch, and deterministic ids.
//!
//! A trade id is a fixed tag followed by the trade's index; a batch's transaction hash is the
//! first 24 bytes of its taker order's hash followed by the batch's number. Both are unique,
//! deterministic from the journal, and their own index (a lookup reads one entry, no table).
//! The taker's hash makes transaction hashes unique across deployments too, which matters
//! because the chain backend keys batches by them (`settledAt(batchId)`): a new data
//! directory against the same exchange contract must not find its batches already settled.
//! Both were keccak256 digests once, the costliest steps of a taker order (about a
//! microsecond of an aggressive order's two). The log itself is what a snapshot stores.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::command::TradeStatus;
use crate::event::{FillParty, TradeView};
use crate::room::vec_with_room;
use crate::types::{Bytes32, Hash32, MatchType, Outcome, Side};

/// A settlement batch: the trades of one taker order's matching, one transaction hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch {
    /// Index of the first trade.
    pub first_trade: u64,
    /// Number of trades (contiguous).
    pub trade_count: u32,
}

/// Every trade, in match order.
#[derive(Clone, Debug, Default)]
pub struct TradeLog {
    trades: Vec<TradeView>,
    /// Every batch, in closing order.
    batches: Vec<Batch>,
}

/// The first 24 bytes of every trade id (`ladder:trade:v2`, zero-padded).
const TRADE_ID_TAG: [u8; 24] = *b"ladder:trade:v2\0\0\0\0\0\0\0\0\0";

/// The tag, then `number` as 8 big-endian bytes.
fn tagged(tag: &[u8; 24], number: u64) -> Hash32 {
    let mut id = [0u8; 32];
    id[..24].copy_from_slice(tag);
    id[24..].copy_from_slice(&number.to_be_bytes());
    Bytes32(id)
}

/// The number `id` carries after `tag`, if it starts with it.
fn untagged(tag: &[u8; 24], id: &Hash32) -> Option<u64> {
    let (head, number) = id.0.split_at(24);
    if head != tag {
        return None;
    }
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(number);
    Some(u64::from_be_bytes(bytes))
}

/// The id of the trade at `index`.
pub fn trade_id(index: u64) -> Hash32 {
    tagged(&TRADE_ID_TAG, index)
}

/// The index `id` names, if it has the form of a trade id.
pub fn trade_index(id: &Hash32) -> Option<u64> {
    untagged(&TRADE_ID_TAG, id)
}

/// The transaction hash of batch `number` (batches are numbered 0, 1, ... as they close)
/// whose taker order has the hash `taker_order_hash`.
pub fn batch_hash(number: u64, taker_order_hash: &Hash32) -> Hash32 {
    let mut prefix = [0u8; 24];
    prefix.copy_from_slice(&taker_order_hash.0[..24]);
    tagged(&prefix, number)
}

/// The batch number a transaction hash carries (its last 8 bytes); only the log can tell
/// whether that batch has this hash.
pub fn batch_number(transaction_hash: &Hash32) -> u64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&transaction_hash.0[24..]);
    u64::from_be_bytes(bytes)
}

impl TradeLog {
    /// An empty log with room for `trades` trades (pages touched when `prefault`).
    pub fn with_room(trades: usize, prefault: bool) -> TradeLog {
        TradeLog {
            trades: vec_with_room(trades, blank_trade(), prefault),
            batches: vec_with_room(
                trades,
                Batch {
                    first_trade: 0,
                    trade_count: 0,
                },
                prefault,
            ),
        }
    }

    /// Index the next trade will get.
    pub fn next_index(&self) -> u64 {
        self.trades.len() as u64
    }

    /// The id of the next trade.
    pub fn next_id(&self) -> Hash32 {
        trade_id(self.next_index())
    }

    /// Appends a trade (its `transaction_hash` is set by `close_batch`).
    pub fn push(&mut self, trade: TradeView) {
        debug_assert_eq!(trade.index, self.next_index());
        debug_assert_eq!(trade.id, trade_id(trade.index));
        self.trades.push(trade);
    }

    /// Seals the trades from `first_trade` on as one batch and returns its hash.
    pub fn close_batch(&mut self, first_trade: u64) -> Option<Hash32> {
        let batch_trades = &mut self.trades[first_trade as usize..];
        if batch_trades.is_empty() {
            return None;
        }
        let hash = batch_hash(self.batches.len() as u64, &batch_trades[0].taker.order_hash);
        for trade in batch_trades.iter_mut() {
            trade.transaction_hash = hash;
        }
        let trade_count = batch_trades.len() as u32;
        self.batches.push(Batch {
            first_trade,
            trade_count,
        });
        Some(hash)
    }

    /// The trade at `index`.
    pub fn get(&self, index: u64) -> &TradeView {
        &self.trades[index as usize]
    }

    /// The trade at `index`, mutably.
    pub fn get_mut(&mut self, index: u64) -> &mut TradeView {
        &mut self.trades[index as usize]
    }

    /// The trade with this id.
    pub fn find(&self, id: &Hash32) -> Option<&TradeView> {
        self.trades.get(usize::try_from(trade_index(id)?).ok()?)
    }

    /// The batch with this transaction hash.
    pub fn batch(&self, transaction_hash: &Hash32) -> Option<Batch> {
        let number = usize::try_from(batch_number(transaction_hash)).ok()?;
        let batch = *self.batches.get(number)?;
        let first = self.trades.get(usize::try_from(batch.first_trade).ok()?)?;
        (first.transaction_hash == *transaction_hash).then_some(batch)
    }

    /// Every trade in match order.
    pub fn all(&self) -> &[TradeView] {
        &self.trades
    }
}

/// A trade of zeros, to touch the log's pages with.
fn blank_trade() -> TradeView {
    let party = FillParty {
        order_id: 0,
        order_hash: Bytes32::default(),
        address: crate::types::Address::default(),
        outcome: Outcome::Yes,
        side: Side::Buy,
        price_ticks: 0,
    };
    TradeView {
        index: 0,
        id: Bytes32::default(),
        transaction_hash: Bytes32::default(),
        condition_id: Bytes32::default(),
        yes_token_id: Bytes32::default(),
        no_token_id: Bytes32::default(),
        match_type: MatchType::Complementary,
        taker: party,
        maker: party,
        size_units: 0,
        taker_fee_units: 0,
        match_time_ns: 0,
        last_update_ns: 0,
        status: TradeStatus::Matched,
    }
}

/// What a snapshot stores of the log (the indexes are rebuilt from it).
#[derive(Serialize)]
struct Stored<'a> {
    trades: &'a [TradeView],
    batches: &'a [Batch],
}

/// The owned form of `Stored`, for decoding.
#[derive(Deserialize)]
struct Loaded {
    trades: Vec<TradeView>,
    batches: Vec<Batch>,
}

impl Serialize for TradeLog {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Stored {
            trades: &self.trades,
            batches: &self.batches,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for TradeLog {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let Loaded { trades, batches } = Loaded::deserialize(deserializer)?;
        let log = TradeLog { trades, batches };
        let trades = &log.trades;
        if let Some((at, _)) = trades
            .iter()
            .enumerate()
            .find(|(at, trade)| trade.index != *at as u64 || trade.id != trade_id(trade.index))
        {
            return Err(serde::de::Error::custom(format!(
                "trade {at} has another index or id than its place gives"
            )));
        }
        for (number, batch) in log.batches.iter().enumerate() {
            let range = batch.first_trade..batch.first_trade + u64::from(batch.trade_count);
            let fits = usize::try_from(range.end).is_ok_and(|end| end <= trades.len())
                && !range.is_empty()
                && {
                    let first = &trades[range.start as usize];
                    let expected = batch_hash(number as u64, &first.taker.order_hash);
                    range
                        .clone()
                        .all(|i| trades[i as usize].transaction_hash == expected)
                };
            if !fits {
                return Err(serde::de::Error::custom(format!(
                    "batch {number} does not match its trades"
                )));
            }
        }
        Ok(log)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trade_id_names_its_index_and_nothing_else_passes_for_one() {
        for index in [0, 1, 255, 1 << 40, u64::MAX] {
            assert_eq!(trade_index(&trade_id(index)), Some(index));
        }
        assert_ne!(trade_id(1), trade_id(2));
        let mut other = trade_id(7);
        other.0[0] ^= 1;
        assert_eq!(trade_index(&other), None);
        assert_eq!(trade_index(&Bytes32([0; 32])), None);
        let taker = Bytes32([0x5a; 32]);
        assert_eq!(batch_number(&batch_hash(9, &taker)), 9);
        assert_ne!(
            batch_hash(9, &taker),
            batch_hash(9, &Bytes32([0x5b; 32])),
            "another deployment's batch 9 has another taker, so another hash"
        );
        assert_eq!(
            trade_index(&batch_hash(9, &taker)),
            None,
            "a batch hash is no trade id"
        );
    }

    #[test]
    fn the_log_finds_its_trades_by_id_only() {
        let mut log = TradeLog::default();
        for index in 0..3 {
            log.push(TradeView {
                index,
                id: trade_id(index),
                ..blank_trade()
            });
        }
        assert_eq!(log.find(&trade_id(2)).map(|t| t.index), Some(2));
        let taker = Bytes32::default();
        assert_eq!(log.close_batch(0), Some(batch_hash(0, &taker)));
        let batch = log.batch(&batch_hash(0, &taker)).expect("the closed batch");
        assert_eq!((batch.first_trade, batch.trade_count), (0, 3));
        assert!(
            log.batch(&batch_hash(1, &taker)).is_none(),
            "not closed yet"
        );
        assert!(
            log.batch(&batch_hash(0, &Bytes32([1; 32]))).is_none(),
            "batch 0 of another taker"
        );
        assert!(log
            .all()
            .iter()
            .all(|t| t.transaction_hash == batch_hash(0, &taker)));
        assert!(log.find(&trade_id(3)).is_none(), "not made yet");
        let mut forged = trade_id(1);
        forged.0[3] ^= 0x20;
        assert!(log.find(&forged).is_none());
    }
}

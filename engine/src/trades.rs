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

use crate::event::TradeView;
use std::collections::BTreeMap;

use crate::forgetful_log::ForgetfulLog;
use crate::types::{FixedBytes, Hash32};

/// A settlement batch: the trades of one taker order's matching, one transaction hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch {
    /// Index of the first trade.
    pub first_trade: u64,
    /// Number of trades (contiguous).
    pub trade_count: u32,
}

/// The trades not yet forgotten (final trades leave once the history store holds them), in
/// match order, and the batches that still have trades here.
#[derive(Clone, Debug, Default)]
pub struct TradeLog {
    trades: ForgetfulLog<TradeView>,
    /// Batches with trades held, by number.
    batches: BTreeMap<u64, Batch>,
    /// The number the next batch gets.
    next_batch: u64,
}

/// The first 24 bytes of every trade id (`ladder:trade:v2`, zero-padded).
const TRADE_ID_TAG: [u8; 24] = *b"ladder:trade:v2\0\0\0\0\0\0\0\0\0";

/// The tag, then `number` as 8 big-endian bytes.
fn tagged(tag: &[u8; 24], number: u64) -> Hash32 {
    let mut id = [0u8; 32];
    id[..24].copy_from_slice(tag);
    id[24..].copy_from_slice(&number.to_be_bytes());
    FixedBytes(id)
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
    /// An empty log with room made for `trades` trades.
    pub fn with_room(trades: usize) -> TradeLog {
        TradeLog {
            trades: ForgetfulLog::with_room(trades),
            ..TradeLog::default()
        }
    }

    /// Index the next trade will get.
    pub fn next_index(&self) -> u64 {
        self.trades.len()
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
        let end = self.next_index();
        let first = self.trades.get(first_trade)?;
        let number = self.next_batch;
        let hash = batch_hash(number, &first.taker.order_hash);
        for index in first_trade..end {
            if let Some(trade) = self.trades.get_mut(index) {
                trade.transaction_hash = hash;
            }
        }
        self.batches.insert(
            number,
            Batch {
                first_trade,
                trade_count: (end - first_trade) as u32,
            },
        );
        self.next_batch += 1;
        Some(hash)
    }

    /// The trade at `index`, which is held (the engine's own references are to held trades).
    pub fn get(&self, index: u64) -> &TradeView {
        self.trades.get(index).expect("a held trade")
    }

    /// The trade at `index`, mutably.
    pub fn get_mut(&mut self, index: u64) -> &mut TradeView {
        self.trades.get_mut(index).expect("a held trade")
    }

    /// The held trade with this id.
    pub fn find(&self, id: &Hash32) -> Option<&TradeView> {
        self.trades.get(trade_index(id)?)
    }

    /// The batch with this transaction hash, while it has trades here.
    pub fn batch(&self, transaction_hash: &Hash32) -> Option<Batch> {
        let batch = *self.batches.get(&batch_number(transaction_hash))?;
        let first = self.trades.get(batch.first_trade)?;
        (first.transaction_hash == *transaction_hash).then_some(batch)
    }

    /// Whether a batch of this number was made, held or forgotten since (its hash cannot be
    /// checked once its trades are gone: settlement updates come only from the service's own
    /// settlement threads).
    pub fn made_batch(&self, transaction_hash: &Hash32) -> bool {
        batch_number(transaction_hash) < self.next_batch
    }

    /// Forgets batch `number` and its trades; returns them.
    pub fn forget_batch(&mut self, number: u64) -> Vec<TradeView> {
        let Some(batch) = self.batches.remove(&number) else {
            return Vec::new();
        };
        (batch.first_trade..batch.first_trade + u64::from(batch.trade_count))
            .filter_map(|index| self.trades.forget(index))
            .collect()
    }

    /// Every held trade in match order.
    pub fn iter(&self) -> impl Iterator<Item = &TradeView> + '_ {
        self.trades.iter().map(|(_, trade)| trade)
    }

    /// Trades ever made.
    pub fn count(&self) -> u64 {
        self.trades.len()
    }

    /// Trades held.
    pub fn held(&self) -> u64 {
        self.trades.held()
    }
}

/// What a snapshot stores of the log.
#[derive(Serialize)]
struct Stored<'a> {
    trades: &'a ForgetfulLog<TradeView>,
    next_batch: u64,
    batches: &'a BTreeMap<u64, Batch>,
}

/// The owned form of `Stored`, for decoding.
#[derive(Deserialize)]
struct Loaded {
    trades: ForgetfulLog<TradeView>,
    next_batch: u64,
    batches: BTreeMap<u64, Batch>,
}

impl Serialize for TradeLog {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Stored {
            trades: &self.trades,
            next_batch: self.next_batch,
            batches: &self.batches,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for TradeLog {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let Loaded {
            trades,
            next_batch,
            batches,
        } = Loaded::deserialize(deserializer)?;
        if let Some((at, _)) = trades
            .iter()
            .find(|(at, t)| t.index != *at || t.id != trade_id(*at))
        {
            return Err(serde::de::Error::custom(format!(
                "trade {at} has another index or id than its place gives"
            )));
        }
        let log = TradeLog {
            trades,
            batches,
            next_batch,
        };
        for (&number, batch) in &log.batches {
            let range = batch.first_trade..batch.first_trade + u64::from(batch.trade_count);
            let fits = number < log.next_batch
                && !range.is_empty()
                && log.trades.get(range.start).is_some_and(|first| {
                    let expected = batch_hash(number, &first.taker.order_hash);
                    range.clone().all(|i| {
                        log.trades
                            .get(i)
                            .is_some_and(|t| t.transaction_hash == expected)
                    })
                });
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
    use crate::command::TradeStatus;
    use crate::event::FillParty;
    use crate::types::Bytes32;
    use crate::types::{MatchType, Outcome, Side};

    /// A trade of zeros.
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

    #[test]
    fn a_trade_id_names_its_index_and_nothing_else_passes_for_one() {
        for index in [0, 1, 255, 1 << 40, u64::MAX] {
            assert_eq!(trade_index(&trade_id(index)), Some(index));
        }
        assert_ne!(trade_id(1), trade_id(2));
        let mut other = trade_id(7);
        other.0[0] ^= 1;
        assert_eq!(trade_index(&other), None);
        assert_eq!(trade_index(&FixedBytes([0; 32])), None);
        let taker = FixedBytes([0x5a; 32]);
        assert_eq!(batch_number(&batch_hash(9, &taker)), 9);
        assert_ne!(
            batch_hash(9, &taker),
            batch_hash(9, &FixedBytes([0x5b; 32])),
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
            log.batch(&batch_hash(0, &FixedBytes([1; 32]))).is_none(),
            "batch 0 of another taker"
        );
        assert!(log
            .iter()
            .all(|t| t.transaction_hash == batch_hash(0, &taker)));
        assert_eq!(log.forget_batch(0).len(), 3);
        assert!(log.find(&trade_id(2)).is_none(), "forgotten");
        assert!(log.batch(&batch_hash(0, &taker)).is_none());
        assert!(log.find(&trade_id(3)).is_none(), "not made yet");
        let mut forged = trade_id(1);
        forged.0[3] ^= 0x20;
        assert!(log.find(&forged).is_none());
    }
}

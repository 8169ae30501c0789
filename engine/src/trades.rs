//! The trade log: every fill, its settlement batch, and deterministic ids.
//!
//! Trades and batches are found by id and transaction hash through `HashIndex`es (no
//! rehash pauses as the log grows); the log itself is what a snapshot stores.
//!
//! A trade id is a keccak256, the costliest step of a fill (a few hundred nanoseconds).
//! Since it depends only on the trade's index, the log computes a few ids ahead, one per
//! command that makes no trade, so that a taker order mostly finds its ids ready.

use std::collections::VecDeque;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha3::{Digest, Keccak256};

use crate::command::TradeStatus;
use crate::event::{FillParty, TradeView};
use crate::hash_index::{key_digest, HashIndex};
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
    /// Trade ids to trade indices.
    by_id: HashIndex,
    /// Transaction hashes to batch numbers.
    by_transaction: HashIndex,
    /// Ids of the next trades, computed ahead (not stored in snapshots).
    ids_ahead: IdsAhead,
}

/// Ids computed ahead: at most this many.
const IDS_AHEAD_MAX: usize = 8;

/// The ids of the trades at indices `first`, `first + 1`, ...
#[derive(Clone, Debug, Default)]
struct IdsAhead {
    first: u64,
    ids: VecDeque<Hash32>,
}

/// The id of the trade at `index`: keccak256 of a tag and the index, unique and replayable.
pub fn trade_id(index: u64) -> Hash32 {
    let mut hasher = Keccak256::new();
    hasher.update(b"ladder:trade:v1");
    hasher.update(index.to_be_bytes());
    Bytes32(hasher.finalize().into())
}

/// The transaction hash of a batch: keccak256 of its canonical encoding (taker order hash,
/// then each trade's id, maker order hash, size and price).
pub fn batch_hash(trades: &[TradeView]) -> Hash32 {
    let mut hasher = Keccak256::new();
    hasher.update(b"ladder:batch:v1");
    if let Some(first) = trades.first() {
        hasher.update(first.taker.order_hash.0);
    }
    for trade in trades {
        hasher.update(trade.id.0);
        hasher.update(trade.maker.order_hash.0);
        hasher.update(trade.size_units.to_be_bytes());
        hasher.update(trade.maker.price_ticks.to_be_bytes());
    }
    Bytes32(hasher.finalize().into())
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
            by_id: HashIndex::with_room(trades, prefault),
            by_transaction: HashIndex::with_room(trades, prefault),
            ids_ahead: IdsAhead::default(),
        }
    }

    /// Index the next trade will get.
    pub fn next_index(&self) -> u64 {
        self.trades.len() as u64
    }

    /// The id of the next trade (`trade_id(self.next_index())`).
    pub fn next_id(&mut self) -> Hash32 {
        let index = self.next_index();
        let ahead = &mut self.ids_ahead;
        if ahead.first == index {
            if let Some(id) = ahead.ids.pop_front() {
                ahead.first += 1;
                debug_assert_eq!(id, trade_id(index));
                return id;
            }
        }
        trade_id(index)
    }

    /// Computes one more id ahead, unless enough are ready.
    pub fn prepare_id(&mut self) {
        let next = self.next_index();
        let ahead = &mut self.ids_ahead;
        if ahead.first != next {
            ahead.ids.clear();
            ahead.first = next;
        }
        if ahead.ids.len() < IDS_AHEAD_MAX {
            let index = ahead.first + ahead.ids.len() as u64;
            ahead.ids.push_back(trade_id(index));
        }
    }

    /// Appends a trade (its `transaction_hash` is set by `close_batch`).
    pub fn push(&mut self, trade: TradeView) {
        debug_assert_eq!(trade.index, self.next_index());
        debug_assert_eq!(self.by_id.len(), self.next_index());
        let trades = &self.trades;
        self.by_id.push(key_digest(&trade.id.0), |i| {
            key_digest(&trades[i as usize].id.0)
        });
        self.trades.push(trade);
    }

    /// Seals the trades from `first_trade` on as one batch and returns its hash.
    pub fn close_batch(&mut self, first_trade: u64) -> Option<Hash32> {
        let batch_trades = &mut self.trades[first_trade as usize..];
        if batch_trades.is_empty() {
            return None;
        }
        let hash = batch_hash(batch_trades);
        for trade in batch_trades.iter_mut() {
            trade.transaction_hash = hash;
        }
        let trade_count = batch_trades.len() as u32;
        debug_assert_eq!(self.by_transaction.len(), self.batches.len() as u64);
        let (trades, batches) = (&self.trades, &self.batches);
        self.by_transaction.push(key_digest(&hash.0), |n| {
            let first = batches[n as usize].first_trade;
            key_digest(&trades[first as usize].transaction_hash.0)
        });
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
        let index = self
            .by_id
            .find(key_digest(&id.0), |i| self.trades[i as usize].id == *id)?;
        Some(&self.trades[index as usize])
    }

    /// The batch with this transaction hash.
    pub fn batch(&self, transaction_hash: &Hash32) -> Option<Batch> {
        let number = self
            .by_transaction
            .find(key_digest(&transaction_hash.0), |n| {
                let first = self.batches[n as usize].first_trade;
                self.trades[first as usize].transaction_hash == *transaction_hash
            })?;
        Some(self.batches[number as usize])
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
        let mut log = TradeLog {
            trades,
            batches,
            ..TradeLog::default()
        };
        let trades = &log.trades;
        for trade in trades {
            log.by_id.push(key_digest(&trade.id.0), |i| {
                key_digest(&trades[i as usize].id.0)
            });
        }
        let batches = &log.batches;
        let transaction_of = |n: u64| {
            let first = batches[n as usize].first_trade;
            key_digest(&trades[first as usize].transaction_hash.0)
        };
        for batch in batches {
            let first = trades
                .get(batch.first_trade as usize)
                .ok_or_else(|| serde::de::Error::custom("a batch starts past the last trade"))?;
            log.by_transaction
                .push(key_digest(&first.transaction_hash.0), transaction_of);
        }
        Ok(log)
    }
}

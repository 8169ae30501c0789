//! The trade log: every fill, its settlement batch, and deterministic ids.

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use sha3::{Digest, Keccak256};

use crate::event::TradeView;
use crate::types::{Bytes32, Hash32};

/// A settlement batch: the trades of one taker order's matching, one transaction hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch {
    /// Index of the first trade.
    pub first_trade: u64,
    /// Number of trades (contiguous).
    pub trade_count: u32,
}

/// Every trade, in match order.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TradeLog {
    trades: Vec<TradeView>,
    by_id: FxHashMap<Hash32, u64>,
    batches: FxHashMap<Hash32, Batch>,
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
    /// Index the next trade will get.
    pub fn next_index(&self) -> u64 {
        self.trades.len() as u64
    }

    /// Appends a trade (its `transaction_hash` is set by `close_batch`).
    pub fn push(&mut self, trade: TradeView) {
        debug_assert_eq!(trade.index, self.next_index());
        self.by_id.insert(trade.id, trade.index);
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
        self.batches.insert(
            hash,
            Batch {
                first_trade,
                trade_count,
            },
        );
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
        self.by_id.get(id).map(|&i| &self.trades[i as usize])
    }

    /// The batch with this transaction hash.
    pub fn batch(&self, transaction_hash: &Hash32) -> Option<Batch> {
        self.batches.get(transaction_hash).copied()
    }

    /// Every trade in match order.
    pub fn all(&self) -> &[TradeView] {
        &self.trades
    }
}

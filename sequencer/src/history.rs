//! What the engine has forgotten, read back from the history store (API.md §19, "History and bounded state").
//!
//! The engine holds live state. A final trade stays in it until the history store has it,
//! and leaves it only with a journaled `ForgetHistory` command that names how far the store
//! holds. So a read that asks the engine first (on the sequencer thread) and the store after
//! (on the gateway thread) misses nothing: whatever the engine had forgotten by then was
//! already stored. A closed order's fate and hash leave the same way (its hash a grace of
//! `HASH_GRACE_RECORDS` later: see the engine's `seen_hashes`). The store itself lives in its own crate (`ladder-history`, SQLite); this
//! trait is all the gateway sees of it.

use ladder_engine::{
    Address, ConditionId, Hash32, OrderId, OrderStatus, Outcome, TradeFilter, TradeView,
};

use crate::board::PriceBucket;

/// Reads of the history store, from any thread.
pub trait HistoryReads: Send + Sync + std::fmt::Debug {
    /// The stored trade at `index` (the trade log's position), if it is stored.
    fn trade(&self, index: u64) -> Result<Option<TradeView>, String>;

    /// The newest `limit` stored trades `address` took part in that pass `filter`, newest
    /// first.
    fn trades_of(
        &self,
        address: &Address,
        filter: &TradeFilter,
        limit: usize,
    ) -> Result<Vec<TradeView>, String>;

    /// The owner and fate (`Matched` or `Canceled`) of a closed order, if it is stored.
    fn closed_order(&self, id: OrderId) -> Result<Option<(Address, OrderStatus)>, String>;

    /// Whether an order with this hash is stored (it was accepted, and closed since).
    fn order_hash_stored(&self, hash: &Hash32) -> Result<bool, String>;

    /// The stored price history of `outcome`'s token of a market: for each `bucket_s`-second
    /// bucket (aligned to multiples of it) holding trades of that token from `start_s` to
    /// `end_s` inclusive, its last such trade's Yes price, oldest first, at most `limit`
    /// buckets.
    fn price_buckets(
        &self,
        market: &ConditionId,
        outcome: Outcome,
        start_s: u64,
        end_s: u64,
        bucket_s: u64,
        limit: usize,
    ) -> Result<Vec<PriceBucket>, String>;

    /// The last journal sequence whose history is stored.
    fn stored_through(&self) -> u64;

    /// `Err` (why) while the store cannot answer for what the engine forgot at all (it lacks
    /// records the journal no longer holds), as opposed to being a moment behind.
    fn usable(&self) -> Result<(), String> {
        Ok(())
    }

    /// How many records the sequencer released that the store does not hold yet.
    fn lag(&self) -> u64;
}

/// Newest-first trades of the engine and of the store as one list, newest first, each
/// trade once (a trade still in the engine may be stored already: the engine's copy is
/// kept, both are final).
pub fn merge_newest_first(engine: Vec<TradeView>, stored: Vec<TradeView>) -> Vec<TradeView> {
    let mut merged = Vec::with_capacity(engine.len() + stored.len());
    let (mut a, mut b) = (engine.into_iter().peekable(), stored.into_iter().peekable());
    loop {
        let next = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) if x.index == y.index => {
                b.next();
                a.next()
            }
            (Some(x), Some(y)) if x.index > y.index => a.next(),
            (Some(_), Some(_)) | (None, Some(_)) => b.next(),
            (Some(_), None) => a.next(),
            (None, None) => break,
        };
        merged.extend(next);
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use ladder_engine::trade_id;

    fn trades(indexes: &[u64]) -> Vec<TradeView> {
        let template = blank();
        indexes
            .iter()
            .map(|&index| TradeView {
                index,
                id: trade_id(index),
                ..template
            })
            .collect()
    }

    fn blank() -> TradeView {
        let party = ladder_engine::FillParty {
            order_id: 0,
            order_hash: Default::default(),
            address: Default::default(),
            outcome: ladder_engine::Outcome::Yes,
            side: ladder_engine::Side::Buy,
            price_ticks: 0,
        };
        TradeView {
            index: 0,
            id: Default::default(),
            transaction_hash: Default::default(),
            condition_id: Default::default(),
            yes_token_id: Default::default(),
            no_token_id: Default::default(),
            match_type: ladder_engine::MatchType::Complementary,
            taker: party,
            maker: party,
            size_units: 0,
            taker_fee_units: 0,
            match_time_ns: 0,
            last_update_ns: 0,
            status: ladder_engine::TradeStatus::Confirmed,
        }
    }

    fn indexes(list: &[TradeView]) -> Vec<u64> {
        list.iter().map(|t| t.index).collect()
    }

    #[test]
    fn the_merge_is_newest_first_and_keeps_each_trade_once() {
        let merged = merge_newest_first(trades(&[9, 7, 4]), trades(&[8, 7, 3, 1]));
        assert_eq!(indexes(&merged), [9, 8, 7, 4, 3, 1]);
        assert_eq!(
            indexes(&merge_newest_first(vec![], trades(&[2, 1]))),
            [2, 1]
        );
        assert_eq!(indexes(&merge_newest_first(trades(&[5]), vec![])), [5]);
    }
}

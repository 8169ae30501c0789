//! Reads answered from engine state: what the gateway's endpoints show.

use crate::claims::ClaimReason;
use crate::command::Asset;
use crate::engine::{ApiKeyRecord, Engine};
use crate::event::{OrderStatus, OrderView, TradeView};
use crate::ledger::Balance;
use crate::market::{LastTrade, MarketState};
use crate::orders::{OrderPlace, NIL};
use crate::types::{
    axis_price, Address, AxisSide, ConditionId, Hash32, OrderId, Outcome, PriceTicks, Side,
    TokenId, Units, NANOS_PER_SECOND,
};

/// Filters of the open-orders list (API.md §11).
#[derive(Clone, Debug, Default)]
pub struct OrderFilter {
    /// Only this market.
    pub market: Option<ConditionId>,
    /// Only this token.
    pub token_id: Option<TokenId>,
    /// Only this order.
    pub id: Option<OrderId>,
}

/// Filters of the trades list (API.md §11).
#[derive(Clone, Debug, Default)]
pub struct TradeFilter {
    /// Only this trade.
    pub id: Option<Hash32>,
    /// Only this market.
    pub market: Option<ConditionId>,
    /// Only trades in which either side traded this token.
    pub token_id: Option<TokenId>,
    /// Only trades in which this address took part.
    pub maker_address: Option<Address>,
    /// Matched strictly before this Unix second.
    pub before_s: Option<u64>,
    /// Matched strictly after this Unix second.
    pub after_s: Option<u64>,
}

/// A market as the public reads show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MarketView {
    /// Creation index.
    pub index: u32,
    /// Condition id.
    pub condition_id: ConditionId,
    /// Yes token.
    pub yes_token_id: TokenId,
    /// No token.
    pub no_token_id: TokenId,
    /// Tick in price ticks.
    pub tick_size_ticks: PriceTicks,
    /// Minimum order size in base units.
    pub min_order_size_units: Units,
    /// Neg-risk flag.
    pub neg_risk: bool,
    /// Taker delay.
    pub taker_delay_ms: u64,
    /// Taker fee.
    pub fee_rate_bps: u32,
    /// State.
    pub state: MarketState,
    /// Last trade per outcome (index 0 Yes, 1 No).
    pub last_trade: [Option<LastTrade>; 2],
    /// The market's event sequence.
    pub event_seq: u64,
}

impl MarketView {
    /// The token id of `outcome`.
    pub fn token_id(&self, outcome: Outcome) -> TokenId {
        match outcome {
            Outcome::Yes => self.yes_token_id,
            Outcome::No => self.no_token_id,
        }
    }
}

/// One token's view of its market's book: prices on that token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BookView {
    /// The market.
    pub market: MarketView,
    /// The token the book is seen from.
    pub outcome: Outcome,
    /// Bids, best first, as `(price, size)`.
    pub bids: Vec<(PriceTicks, Units)>,
    /// Asks, best first.
    pub asks: Vec<(PriceTicks, Units)>,
}

/// A claimable position (API.md §2.9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClaimableView {
    /// The market.
    pub condition_id: ConditionId,
    /// The outcome held.
    pub outcome: Outcome,
    /// Its token.
    pub token_id: TokenId,
    /// Base units held.
    pub balance_units: Units,
    /// Why it is claimable.
    pub reason: ClaimReason,
}

impl Engine {
    fn market_view(&self, index: u32) -> MarketView {
        let market = self.markets.get(index);
        MarketView {
            index,
            condition_id: market.spec.condition_id,
            yes_token_id: market.spec.yes_token_id,
            no_token_id: market.spec.no_token_id,
            tick_size_ticks: market.spec.tick_size_ticks,
            min_order_size_units: market.spec.min_order_size_units,
            neg_risk: market.spec.neg_risk,
            taker_delay_ms: market.spec.taker_delay_ms,
            fee_rate_bps: market.spec.fee_rate_bps,
            state: market.state,
            last_trade: market.last_trade,
            event_seq: market.event_seq,
        }
    }

    /// Bytes the books' price ladders hold: a market holds them from its first resting
    /// order until it is resolved.
    pub fn book_ladder_bytes(&self) -> usize {
        self.markets
            .all()
            .iter()
            .map(|m| m.book.ladder_bytes())
            .sum()
    }

    /// Markets in creation order.
    pub fn markets(&self) -> impl Iterator<Item = MarketView> + '_ {
        (0..self.markets.len() as u32).map(|i| self.market_view(i))
    }

    /// Number of markets.
    pub fn market_count(&self) -> usize {
        self.markets.len()
    }

    /// The market at creation index `index`.
    pub fn market_at(&self, index: u32) -> Option<MarketView> {
        ((index as usize) < self.markets.len()).then(|| self.market_view(index))
    }

    /// The creation index of a market, by condition id (no view built).
    pub fn market_index(&self, condition_id: &ConditionId) -> Option<u32> {
        self.markets.find(condition_id)
    }

    /// A market by condition id.
    pub fn market(&self, condition_id: &ConditionId) -> Option<MarketView> {
        self.markets.find(condition_id).map(|i| self.market_view(i))
    }

    /// The market and outcome of a token.
    pub fn token(&self, token_id: &TokenId) -> Option<(MarketView, Outcome)> {
        let (index, outcome) = self.markets.find_token(token_id)?;
        Some((self.market_view(index), outcome))
    }

    /// The caller's open orders (live or delayed), oldest first.
    pub fn open_orders(&self, address: &Address, filter: &OrderFilter) -> Vec<OrderView> {
        let mut out = Vec::new();
        let Some(account) = self.ledger.find(address) else {
            return out;
        };
        let mut slot = self.ledger.account(account).open_head;
        while slot != NIL {
            let order = self.orders.get(slot);
            slot = self.orders.links(slot).account_next;
            let view = self.order_view_of(order);
            let keep = filter.market.is_none_or(|m| m == view.condition_id)
                && filter.token_id.is_none_or(|t| t == view.token_id)
                && filter.id.is_none_or(|i| i == view.id);
            if keep {
                out.push(view);
            }
        }
        out.sort_by_key(|o| o.id);
        out
    }

    /// An open order by id.
    pub fn open_order(&self, id: OrderId) -> Option<OrderView> {
        let slot = self.orders.slot_of(id)?;
        Some(self.order_view_of(self.orders.get(slot)))
    }

    fn order_view_of(&self, order: &crate::orders::Order) -> OrderView {
        let status = match order.place {
            OrderPlace::Delayed => OrderStatus::Delayed,
            OrderPlace::Resting | OrderPlace::Taking => OrderStatus::Live,
        };
        let slot = self
            .orders
            .slot_of(order.id)
            .expect("open order has a slot");
        self.order_view(slot, status)
    }

    /// Number of open orders.
    pub fn open_order_count(&self) -> usize {
        self.orders.len()
    }

    /// Trades the address took part in, newest first.
    pub fn trades_of(&self, address: &Address, filter: &TradeFilter) -> Vec<TradeView> {
        let Some(account) = self.ledger.find(address) else {
            return Vec::new();
        };
        self.ledger
            .account(account)
            .trades
            .iter()
            .rev()
            .map(|&i| *self.trades.get(i))
            .filter(|t| filter.matches(t))
            .collect()
    }

    /// A trade by id.
    pub fn trade(&self, id: &Hash32) -> Option<TradeView> {
        self.trades.find(id).copied()
    }

    /// Every trade the engine holds (not yet final, or final and not yet in the history
    /// store), oldest first.
    pub fn held_trades(&self) -> impl Iterator<Item = &TradeView> + '_ {
        self.trades.iter()
    }

    /// Trades ever made (the index the next one gets).
    pub fn trade_count(&self) -> u64 {
        self.trades.count()
    }

    /// Trades the engine holds.
    pub fn held_trade_count(&self) -> u64 {
        self.trades.held()
    }

    /// How far a history store must hold for a read of it to find everything this engine
    /// has forgotten (a standby's engine forgets as its primary's store allows, ahead of its
    /// own store).
    pub fn forgotten_through(&self) -> u64 {
        self.forgotten_through
    }

    /// The newest term begun in this journal (CONTRACT 22), 0 before any.
    pub fn term(&self) -> u64 {
        self.term.0
    }

    /// The sequence of the record that began [`Engine::term`] (0 before any): a node that
    /// holds other records from there on wrote them under an older leader.
    pub fn term_start_seq(&self) -> u64 {
        self.term.1
    }

    /// Order hashes the engine holds to refuse duplicates: open and unforgotten orders', and a
    /// forgotten order's for `HASH_GRACE_RECORDS` records more.
    pub fn held_order_hash_count(&self) -> u64 {
        self.seen_hashes.len() as u64
    }

    /// Orders the engine holds: open, or closed and not yet in the history store.
    pub fn held_order_count(&self) -> u64 {
        self.orders.held()
    }

    /// The book of `token_id`'s market, seen from that token, at most `depth` levels a side.
    pub fn book(&self, token_id: &TokenId, depth: usize) -> Option<BookView> {
        let (index, outcome) = self.markets.find_token(token_id)?;
        let book = &self.markets.get(index).book;
        let mirror = |(p, s): (PriceTicks, Units)| (axis_price(outcome, p), s);
        let (bid_side, ask_side) = match outcome {
            Outcome::Yes => (AxisSide::Bid, AxisSide::Ask),
            Outcome::No => (AxisSide::Ask, AxisSide::Bid),
        };
        Some(BookView {
            market: self.market_view(index),
            outcome,
            bids: book.levels(bid_side).take(depth).map(mirror).collect(),
            asks: book.levels(ask_side).take(depth).map(mirror).collect(),
        })
    }

    /// The best price on `token_id`: the best bid for `Side::Buy`, the best ask for `Side::Sell`.
    pub fn best_price(&self, token_id: &TokenId, side: Side) -> Option<PriceTicks> {
        let (index, outcome) = self.markets.find_token(token_id)?;
        let book = &self.markets.get(index).book;
        let axis_side = match (outcome, side) {
            (Outcome::Yes, Side::Buy) | (Outcome::No, Side::Sell) => AxisSide::Bid,
            _ => AxisSide::Ask,
        };
        book.best(axis_side).map(|p| axis_price(outcome, p))
    }

    /// The last trade on a token.
    pub fn last_trade(&self, token_id: &TokenId) -> Option<LastTrade> {
        let (index, outcome) = self.markets.find_token(token_id)?;
        self.markets.get(index).last_trade[outcome.index()]
    }

    /// A balance of collateral or of a token (zero when never held).
    pub fn balance(&self, address: &Address, asset: Asset) -> Balance {
        let Some(account) = self.ledger.find(address) else {
            return Balance::default();
        };
        match asset {
            Asset::Collateral => self.ledger.account(account).collateral,
            Asset::Token(token_id) => match self.markets.find_token(&token_id) {
                Some((market, outcome)) => self.ledger.position(account, market, outcome),
                None => Balance::default(),
            },
        }
    }

    /// Positions of `address` claimable after resolution or void, in market order.
    pub fn claimable(&self, address: &Address) -> Vec<ClaimableView> {
        let mut out = Vec::new();
        let Some(account) = self.ledger.find(address) else {
            return out;
        };
        for (index, market) in self.markets.all().iter().enumerate() {
            let MarketState::Resolved(resolution) = market.state else {
                continue;
            };
            for outcome in [Outcome::Yes, Outcome::No] {
                let Some(reason) = ClaimReason::of(resolution, outcome) else {
                    continue;
                };
                let balance = self.ledger.position(account, index as u32, outcome);
                if balance.free > 0 {
                    out.push(ClaimableView {
                        condition_id: market.spec.condition_id,
                        outcome,
                        token_id: market.token_id(outcome),
                        balance_units: balance.free,
                        reason,
                    });
                }
            }
        }
        out
    }

    /// API key ids of an address, oldest first.
    pub fn api_keys_of(&self, address: &Address) -> Vec<[u8; 16]> {
        match self.ledger.find(address) {
            Some(account) => self.ledger.account(account).api_keys.clone(),
            None => Vec::new(),
        }
    }

    /// An API key record.
    pub fn api_key(&self, key_id: &[u8; 16]) -> Option<ApiKeyRecord> {
        self.api_keys.get(key_id).copied()
    }

    /// How many keys `address` has ever created with L1 nonce `nonce` (the next one's id
    /// derives from it).
    pub fn api_key_creations(&self, address: &Address, nonce: &crate::types::Bytes32) -> u32 {
        self.api_key_creations
            .get(&(*address, *nonce))
            .copied()
            .unwrap_or(0)
    }

    /// Every count of [`Engine::api_key_creations`], by address and nonce.
    pub fn api_key_creation_counts(&self) -> Vec<(Address, crate::types::Bytes32, u32)> {
        let mut all: Vec<_> = self
            .api_key_creations
            .iter()
            .map(|((address, nonce), count)| (*address, *nonce, *count))
            .collect();
        all.sort_unstable();
        all
    }

    /// Every API key record, sorted by key id.
    pub fn api_key_records(&self) -> Vec<([u8; 16], ApiKeyRecord)> {
        let mut all: Vec<_> = self.api_keys.iter().map(|(k, r)| (*k, *r)).collect();
        all.sort_by_key(|(k, _)| *k);
        all
    }

    /// Whether `owner` controls smart account `account` in the built-in registry.
    pub fn controls(&self, account: &Address, owner: &Address) -> bool {
        self.controllers.contains(&(*account, *owner))
    }

    /// Whether `signer` may sign for `account`: the account itself, or one of its owners.
    pub fn may_sign_for(&self, account: &Address, signer: &Address) -> bool {
        signer == account || self.controls(account, signer)
    }
}

impl TradeFilter {
    /// Whether `trade` passes this filter.
    pub fn matches(&self, trade: &TradeView) -> bool {
        let filter = self;
        let match_s = trade.match_time_ns / NANOS_PER_SECOND;
        filter.id.is_none_or(|id| id == trade.id)
            && filter.market.is_none_or(|m| m == trade.condition_id)
            && filter.token_id.is_none_or(|t| {
                t == trade.token_id(trade.taker.outcome) || t == trade.token_id(trade.maker.outcome)
            })
            && filter
                .maker_address
                .is_none_or(|a| a == trade.taker.address || a == trade.maker.address)
            && filter.before_s.is_none_or(|b| match_s < b)
            && filter.after_s.is_none_or(|a| match_s > a)
    }
}

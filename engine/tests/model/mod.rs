//! A reference model of the engine's order handling, written from the rules (API.md §9,
//! 18 and the engine's documented API), not from the engine's code: plain vectors, linear
//! scans and sorting, no speed, so that each rule reads as written.
//!
//! The differential test in `reference_model.rs` runs the engine and this model side by
//! side and compares them after every command. Where the engine is known to depart from
//! the rules, `Quirks` lets the model follow it, so that everything else stays compared.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};

use ladder_engine::{
    Address, Asset, CancelReport, Command, Hash32, MarketSpec, NewOrder, NotCanceled, OrderId,
    OrderStatus, OrderType, Outcome, Reject, Resolution, Side, TokenId, TradeStatus,
};

/// Price ticks in one unit of collateral.
pub const SCALE: u64 = 10_000;
/// Base units in one share.
pub const ONE_SHARE: u64 = 1_000_000;
/// Nanoseconds in a second.
pub const NS_PER_S: u64 = 1_000_000_000;
/// Nanoseconds in a millisecond.
pub const NS_PER_MS: u64 = 1_000_000;

/// Collateral paid for `size` base units at `price` ticks (exact for whole shares).
pub fn notional(price: u32, size: u64) -> u64 {
    let n = u128::from(price) * u128::from(size);
    assert_eq!(n % u128::from(SCALE), 0, "notional of a non-whole amount");
    u64::try_from(n / u128::from(SCALE)).expect("notional fits")
}

/// The taker fee on a notional, rounded down.
pub fn fee_of(notional: u64, fee_bps: u32) -> u64 {
    u64::try_from(u128::from(notional) * u128::from(fee_bps) / 10_000).expect("fee fits")
}

/// A price on the Yes axis (and back).
pub fn axis(outcome: Outcome, price: u32) -> u32 {
    match outcome {
        Outcome::Yes => price,
        Outcome::No => 10_000 - price,
    }
}

/// Settlement moves the engine allows (MATCHED → MINED → CONFIRMED, or via RETRYING to FAILED).
pub fn may_move(from: TradeStatus, to: TradeStatus) -> bool {
    use TradeStatus::*;
    matches!(
        (from, to),
        (Matched, Mined)
            | (Matched, Retrying)
            | (Matched, Failed)
            | (Mined, Confirmed)
            | (Mined, Retrying)
            | (Mined, Failed)
            | (Retrying, Mined)
            | (Retrying, Retrying)
            | (Retrying, Failed)
    )
}

thread_local! {
    /// Credits that repaid debt (for the coverage test).
    pub static DEBT_REPAID: Cell<u64> = const { Cell::new(0) };
}

/// Price levels of a book as (price, total units): (bids, asks), best first.
pub type BookSides = (Vec<(u32, u64)>, Vec<(u32, u64)>);

/// What an address holds of one asset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bal {
    pub free: u64,
    pub reserved: u64,
    pub debt: u64,
}

impl Bal {
    fn reserve(&mut self, amount: u64) {
        self.free = self
            .free
            .checked_sub(amount)
            .expect("model: reserve > free");
        self.reserved += amount;
    }

    /// Back from reserved; like any incoming value it repays debt first.
    fn release(&mut self, amount: u64) {
        self.reserved = self
            .reserved
            .checked_sub(amount)
            .expect("model: release > reserved");
        self.credit(amount);
    }

    fn spend_reserved(&mut self, amount: u64) {
        self.reserved = self
            .reserved
            .checked_sub(amount)
            .expect("model: spend > reserved");
    }

    /// Incoming value repays debt first.
    fn credit(&mut self, amount: u64) {
        let repaid = amount.min(self.debt);
        if repaid > 0 {
            DEBT_REPAID.with(|c| c.set(c.get() + 1));
        }
        self.debt -= repaid;
        self.free += amount - repaid;
    }

    /// Taken back from free; what is missing becomes debt. Whether any became debt.
    fn debit_forced(&mut self, amount: u64) -> bool {
        let taken = amount.min(self.free);
        self.free -= taken;
        self.debt += amount - taken;
        taken < amount
    }
}

/// Collateral, or one outcome token of the market at a creation index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Holding {
    Collateral,
    Token(usize, Outcome),
}

/// Where an order is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// Waiting out the taker delay until `due_ns`.
    Delayed { due_ns: u64 },
    /// Running its taker phase (only inside one command).
    Taking,
    /// On the book; `entered` orders FIFO within a level.
    Resting { entered: u64 },
    /// Gone: `Matched` or `Canceled`.
    Closed(OrderStatus),
}

/// An accepted order.
#[derive(Clone, Debug)]
pub struct MOrder {
    pub id: OrderId,
    pub hash: Hash32,
    pub maker: Address,
    pub market: usize,
    pub outcome: Outcome,
    pub side: Side,
    pub price: u32,
    pub size: u64,
    pub filled: u64,
    pub kind: OrderType,
    pub expiration_s: u64,
    /// Placement time.
    pub created_ns: u64,
    /// Collateral (BUY) or tokens (SELL) held for this order.
    pub reserved: u64,
    pub place: Place,
}

impl MOrder {
    pub fn remaining(&self) -> u64 {
        self.size - self.filled
    }

    pub fn is_bid(&self) -> bool {
        matches!(
            (self.outcome, self.side),
            (Outcome::Yes, Side::Buy) | (Outcome::No, Side::Sell)
        )
    }

    pub fn axis_price(&self) -> u32 {
        axis(self.outcome, self.price)
    }

    pub fn is_open(&self) -> bool {
        matches!(self.place, Place::Delayed { .. } | Place::Resting { .. })
    }

    pub fn is_resting(&self) -> bool {
        matches!(self.place, Place::Resting { .. })
    }

    fn holding(&self) -> Holding {
        match self.side {
            Side::Buy => Holding::Collateral,
            Side::Sell => Holding::Token(self.market, self.outcome),
        }
    }

    /// Whether a resting order at Yes-axis price `p` on the other side crosses this one.
    fn crosses(&self, p: u32) -> bool {
        if self.is_bid() {
            p <= self.axis_price()
        } else {
            p >= self.axis_price()
        }
    }
}

/// One fill.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MTrade {
    pub market: usize,
    pub taker: OrderId,
    pub maker: OrderId,
    pub taker_address: Address,
    pub maker_address: Address,
    pub taker_outcome: Outcome,
    pub maker_outcome: Outcome,
    pub taker_side: Side,
    pub maker_side: Side,
    pub taker_price: u32,
    pub maker_price: u32,
    pub size: u64,
    pub taker_fee: u64,
    pub status: TradeStatus,
}

/// The trades of one taker order's matching.
#[derive(Clone, Debug)]
pub struct MBatch {
    pub first: usize,
    pub count: usize,
    /// The engine's transaction hash, learned by the driver.
    pub label: Option<Hash32>,
}

/// The model's answer to a command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MReply {
    Ok,
    Rejected(Reject),
    Canceled(CancelReport),
    Placed {
        order_id: OrderId,
        status: OrderStatus,
        making: u64,
        taking: u64,
        trades: usize,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MState {
    Active,
    Paused,
    Resolved(Resolution),
}

impl MState {
    fn word(self) -> &'static str {
        match self {
            MState::Active => "active",
            MState::Paused => "paused",
            MState::Resolved(Resolution::Void) => "voided",
            MState::Resolved(_) => "resolved",
        }
    }
}

#[derive(Clone, Debug)]
struct MMarket {
    spec: MarketSpec,
    state: MState,
}

/// Engine behaviours that differ from the rules the model is written from.
#[derive(Clone, Copy, Debug, Default)]
pub struct Quirks {
    /// In a market with a taker delay, a marketable FOK/FAK is answered `delayed` without
    /// the placement-time FokNotFilled / FakNoMatch checks (they run only at the due time).
    pub fill_checks_deferred_when_delayed: bool,
}

/// A taker phase's totals, from the taker's point of view.
#[derive(Default)]
struct Taken {
    making: u64,
    taking: u64,
    trades: usize,
}

/// The reference model.
#[derive(Clone, Debug, Default)]
pub struct Model {
    markets: Vec<MMarket>,
    links: BTreeSet<(Address, Address)>,
    accounts: BTreeSet<Address>,
    balances: BTreeMap<(Address, Holding), Bal>,
    pub orders: Vec<MOrder>,
    accepted_hashes: BTreeSet<Hash32>,
    pub trades: Vec<MTrade>,
    pub batches: Vec<MBatch>,
    /// Taker fees collected.
    pub fees: u64,
    /// Collateral deposited less collateral withdrawn.
    collateral_in: i128,
    /// Full sets (one Yes and one No, backed by one unit of collateral) minted by MINT
    /// fills and not merged back.
    full_sets: i128,
    /// Collateral taken from debtors to settle token debts in ended markets: it backs the
    /// tokens the failed trades gave back.
    debts_settled: i128,
    /// Counter of book entries (FIFO within a level).
    entered: u64,
    now_ns: u64,
    /// Known departures of the engine from the rules, modelled so that the rest can be
    /// compared (each has an ignored regression test in `reference_model.rs`).
    pub quirks: Quirks,
    /// How often each path was taken (for the coverage test).
    pub stats: BTreeMap<&'static str, u64>,
    /// Orders cancelled by the last command, in order.
    pub cancelled: Vec<OrderId>,
    /// Taker phases of the last command that filled: (market, outcome, side, price of the
    /// last fill on the taker's token, shares the order filled).
    pub last_trades: Vec<(usize, Outcome, Side, u32, u64)>,
}

impl Model {
    pub fn with_quirks(quirks: Quirks) -> Model {
        Model {
            quirks,
            ..Model::default()
        }
    }

    fn count(&mut self, what: &'static str) {
        *self.stats.entry(what).or_default() += 1;
    }

    // ----- reads -------------------------------------------------------------------------

    pub fn balance(&self, address: &Address, holding: Holding) -> Bal {
        self.balances
            .get(&(*address, holding))
            .copied()
            .unwrap_or_default()
    }

    pub fn order(&self, id: OrderId) -> Option<&MOrder> {
        if id == 0 {
            return None;
        }
        self.orders.get(id as usize - 1)
    }

    /// Open orders of `address`, oldest first.
    pub fn open_orders(&self, address: &Address) -> Vec<&MOrder> {
        self.orders
            .iter()
            .filter(|o| o.is_open() && o.maker == *address)
            .collect()
    }

    /// A market's book on the Yes axis: (bids best first, asks best first) as (price, total).
    pub fn axis_levels(&self, market: usize) -> BookSides {
        let mut bids: BTreeMap<u32, u64> = BTreeMap::new();
        let mut asks: BTreeMap<u32, u64> = BTreeMap::new();
        for o in self
            .orders
            .iter()
            .filter(|o| o.is_resting() && o.market == market)
        {
            let side = if o.is_bid() { &mut bids } else { &mut asks };
            *side.entry(o.axis_price()).or_default() += o.remaining();
        }
        (bids.into_iter().rev().collect(), asks.into_iter().collect())
    }

    /// A market's book seen from `outcome`: (bids, asks) best first, on that token's prices.
    pub fn book(&self, market: usize, outcome: Outcome) -> BookSides {
        let (bids, asks) = self.axis_levels(market);
        match outcome {
            Outcome::Yes => (bids, asks),
            Outcome::No => {
                let mirror = |v: Vec<(u32, u64)>| -> Vec<(u32, u64)> {
                    v.into_iter().map(|(p, s)| (10_000 - p, s)).collect()
                };
                (mirror(asks), mirror(bids))
            }
        }
    }

    /// Positions claimable after resolution or void, in market order: (market, outcome,
    /// free units, voided).
    pub fn claimable(&self, address: &Address) -> Vec<(usize, Outcome, u64, bool)> {
        let mut out = Vec::new();
        for (i, m) in self.markets.iter().enumerate() {
            let MState::Resolved(resolution) = m.state else {
                continue;
            };
            for outcome in [Outcome::Yes, Outcome::No] {
                let claims = match resolution {
                    Resolution::Void => true,
                    Resolution::Yes => outcome == Outcome::Yes,
                    Resolution::No => outcome == Outcome::No,
                };
                let free = self.balance(address, Holding::Token(i, outcome)).free;
                if claims && free > 0 {
                    out.push((i, outcome, free, resolution == Resolution::Void));
                }
            }
        }
        out
    }

    /// The market and outcome of a token.
    pub fn token(&self, token: &TokenId) -> Option<(usize, Outcome)> {
        self.markets.iter().enumerate().find_map(|(i, m)| {
            if m.spec.yes_token_id == *token {
                Some((i, Outcome::Yes))
            } else if m.spec.no_token_id == *token {
                Some((i, Outcome::No))
            } else {
                None
            }
        })
    }

    /// Checks the model's own bookkeeping: reservations equal what open orders hold, and
    /// no book is crossed.
    pub fn self_check(&self) -> Result<(), String> {
        let mut held: BTreeMap<(Address, Holding), u64> = BTreeMap::new();
        for o in &self.orders {
            let fee_bps = self.markets[o.market].spec.fee_rate_bps;
            let expected = match o.place {
                Place::Resting { .. } => resting_reservation(o),
                Place::Delayed { .. } => taker_reservation(o, fee_bps),
                Place::Closed(_) => 0,
                Place::Taking => return Err(format!("order {} left taking", o.id)),
            };
            if o.reserved != expected {
                return Err(format!(
                    "order {} holds {} but should hold {expected}",
                    o.id, o.reserved
                ));
            }
            if o.is_resting() && o.remaining() == 0 {
                return Err(format!("order {} rests empty", o.id));
            }
            *held.entry((o.maker, o.holding())).or_default() += o.reserved;
        }
        for ((address, holding), bal) in &self.balances {
            let sum = held.get(&(*address, *holding)).copied().unwrap_or(0);
            if bal.reserved != sum {
                return Err(format!(
                    "{address:?} {holding:?} reserved {} != orders {sum}",
                    bal.reserved
                ));
            }
        }
        // Collateral is conserved: what came in is held, collected as fees, or backs
        // full sets.
        let held: i128 = self
            .balances
            .iter()
            .filter(|((_, h), _)| *h == Holding::Collateral)
            .map(|(_, b)| i128::from(b.free) + i128::from(b.reserved) - i128::from(b.debt))
            .sum();
        if held + i128::from(self.fees) + self.full_sets + self.debts_settled != self.collateral_in
        {
            return Err(format!(
                "collateral not conserved: held {held} + fees {} + sets {} + settled debts {} != in {}",
                self.fees, self.full_sets, self.debts_settled, self.collateral_in
            ));
        }
        for market in 0..self.markets.len() {
            let (bids, asks) = self.axis_levels(market);
            if let (Some(b), Some(a)) = (bids.first(), asks.first()) {
                if b.0 >= a.0 {
                    return Err(format!("model book {market} crossed: {b:?} {a:?}"));
                }
            }
        }
        Ok(())
    }

    /// Records the engine's transaction hash of batch `index`.
    pub fn label_batch(&mut self, index: usize, hash: Hash32) {
        self.batches[index].label = Some(hash);
    }

    // ----- commands ----------------------------------------------------------------------

    pub fn apply(&mut self, now_ns: u64, command: &Command) -> MReply {
        self.now_ns = self.now_ns.max(now_ns);
        self.cancelled.clear();
        self.last_trades.clear();
        self.fire_timers();
        match command {
            Command::CreateMarket(spec) => {
                let taken = self.markets.iter().any(|m| {
                    m.spec.condition_id == spec.condition_id
                        || [m.spec.yes_token_id, m.spec.no_token_id]
                            .iter()
                            .any(|t| *t == spec.yes_token_id || *t == spec.no_token_id)
                });
                assert!(!taken, "the model's markets are distinct");
                self.markets.push(MMarket {
                    spec: spec.clone(),
                    state: MState::Active,
                });
                MReply::Ok
            }
            Command::LinkAccount { account, owner } => {
                self.links.insert((*account, *owner));
                MReply::Ok
            }
            Command::UnlinkAccount { account, owner } => {
                self.links.remove(&(*account, *owner));
                MReply::Ok
            }
            Command::Deposit {
                address,
                asset,
                amount,
            } => self.deposit(*address, *asset, *amount),
            Command::Withdraw {
                address,
                asset,
                amount,
            } => self.withdraw(*address, *asset, *amount),
            Command::PlaceOrder(order) => self.place(order),
            Command::CancelOrder {
                requester,
                order_id,
                ..
            } => MReply::Canceled(self.cancel_one(requester, *order_id)),
            Command::CancelMarket {
                requester,
                condition_id,
                token_id,
                ..
            } => {
                let market = match self.market_of(condition_id) {
                    Ok(m) => m,
                    Err(r) => return MReply::Rejected(r),
                };
                let only = token_id.map(|t| {
                    let (m, outcome) = self.token(&t).expect("a token of the market");
                    assert_eq!(m, market, "the token belongs to the market");
                    outcome
                });
                MReply::Canceled(self.cancel_many(requester, Some((market, only))))
            }
            Command::CancelAll { requester } => MReply::Canceled(self.cancel_many(requester, None)),
            Command::Tick => MReply::Ok,
            Command::PauseMarket { condition_id } => self.set_state(condition_id, MState::Paused),
            Command::ResumeMarket { condition_id } => self.set_state(condition_id, MState::Active),
            Command::ResolveMarket {
                condition_id,
                resolution,
            } => {
                let market = match self.market_of(condition_id) {
                    Ok(m) => m,
                    Err(r) => return MReply::Rejected(r),
                };
                let state = self.markets[market].state;
                if let MState::Resolved(_) = state {
                    return MReply::Rejected(Reject::MarketNotActive {
                        state: state.word(),
                    });
                }
                let open: Vec<OrderId> = self
                    .orders
                    .iter()
                    .filter(|o| o.is_open() && o.market == market)
                    .map(|o| o.id)
                    .collect();
                for id in open {
                    self.cancel(id);
                }
                self.markets[market].state = MState::Resolved(*resolution);
                let mut debtors: Vec<(Address, Outcome)> = Vec::new();
                for outcome in [Outcome::Yes, Outcome::No] {
                    debtors.extend(
                        self.balances
                            .iter()
                            .filter(|((_, h), b)| {
                                *h == Holding::Token(market, outcome) && b.debt > 0
                            })
                            .map(|((a, _), _)| (*a, outcome)),
                    );
                }
                debtors.sort_by_key(|&(address, outcome)| (address, outcome.index()));
                for (address, outcome) in debtors {
                    self.settle_ended_debt(address, market, outcome);
                    self.cover_debts_from_orders(address, market, outcome);
                }
                MReply::Ok
            }
            Command::SettlementUpdate {
                transaction_hash,
                status,
            } => self.settle(transaction_hash, *status),
            other => panic!("the model does not handle {other:?}"),
        }
    }

    fn market_of(&self, condition_id: &Hash32) -> Result<usize, Reject> {
        self.markets
            .iter()
            .position(|m| m.spec.condition_id == *condition_id)
            .ok_or(Reject::UnknownMarket)
    }

    fn set_state(&mut self, condition_id: &Hash32, state: MState) -> MReply {
        let market = match self.market_of(condition_id) {
            Ok(m) => m,
            Err(r) => return MReply::Rejected(r),
        };
        let now = self.markets[market].state;
        if let MState::Resolved(_) = now {
            return MReply::Rejected(Reject::MarketNotActive { state: now.word() });
        }
        self.markets[market].state = state;
        MReply::Ok
    }

    fn bal(&mut self, address: Address, holding: Holding) -> &mut Bal {
        self.balances.entry((address, holding)).or_default()
    }

    fn holding_of_asset(&self, asset: Asset) -> Result<Holding, Reject> {
        match asset {
            Asset::Collateral => Ok(Holding::Collateral),
            Asset::Token(t) => self
                .token(&t)
                .map(|(m, o)| Holding::Token(m, o))
                .ok_or(Reject::UnknownToken),
        }
    }

    fn deposit(&mut self, address: Address, asset: Asset, amount: u64) -> MReply {
        if amount == 0 {
            return MReply::Rejected(Reject::ZeroAmount);
        }
        let holding = match self.holding_of_asset(asset) {
            Ok(h) => h,
            Err(r) => return MReply::Rejected(r),
        };
        self.accounts.insert(address);
        self.bal(address, holding).credit(amount);
        if holding == Holding::Collateral {
            self.collateral_in += i128::from(amount);
        }
        MReply::Ok
    }

    fn withdraw(&mut self, address: Address, asset: Asset, amount: u64) -> MReply {
        if amount == 0 {
            return MReply::Rejected(Reject::ZeroAmount);
        }
        let holding = match self.holding_of_asset(asset) {
            Ok(h) => h,
            Err(r) => return MReply::Rejected(r),
        };
        let free = if self.accounts.contains(&address) {
            self.balance(&address, holding).free
        } else {
            0
        };
        if free < amount {
            return MReply::Rejected(Reject::WithdrawalExceedsFree {
                amount_units: amount,
                free_units: free,
            });
        }
        self.bal(address, holding).free -= amount;
        if holding == Holding::Collateral {
            self.collateral_in -= i128::from(amount);
        }
        MReply::Ok
    }

    // ----- timers ------------------------------------------------------------------------

    /// At the start of every command: due GTD expiries in (expiration, id) order, then due
    /// delayed orders in (due time, id) order.
    fn fire_timers(&mut self) {
        let now_s = self.now_ns / NS_PER_S;
        let mut expired: Vec<(u64, OrderId)> = self
            .orders
            .iter()
            .filter(|o| o.is_open() && o.kind == OrderType::Gtd && o.expiration_s <= now_s)
            .map(|o| (o.expiration_s, o.id))
            .collect();
        expired.sort();
        for (_, id) in expired {
            self.count("gtd expired");
            self.cancel(id);
        }
        let mut due: Vec<(u64, OrderId)> = self
            .orders
            .iter()
            .filter_map(|o| match o.place {
                Place::Delayed { due_ns } if due_ns <= self.now_ns => Some((due_ns, o.id)),
                _ => None,
            })
            .collect();
        due.sort();
        for (_, id) in due {
            self.run_delayed(id);
        }
    }

    fn run_delayed(&mut self, id: OrderId) {
        let o = self.order(id).expect("delayed order exists").clone();
        if self.markets[o.market].state != MState::Active {
            self.count("delayed: market not active");
            self.cancel(id);
            return;
        }
        let fillable = self.liquidity_from_others(&o);
        let killed = match o.kind {
            OrderType::Fok => fillable < o.remaining(),
            OrderType::Fak => fillable == 0,
            OrderType::Gtc | OrderType::Gtd => false,
        };
        if killed {
            self.count("delayed: killed");
            self.cancel(id);
            return;
        }
        self.count("delayed: taking");
        self.order_mut(id).place = Place::Taking;
        self.take(id);
        self.finish(id);
    }

    // ----- placing -----------------------------------------------------------------------

    fn order_mut(&mut self, id: OrderId) -> &mut MOrder {
        &mut self.orders[id as usize - 1]
    }

    /// Resting orders of `o`'s market on the other side that cross `o`.
    fn crossing<'a>(&'a self, o: &'a MOrder) -> impl Iterator<Item = &'a MOrder> + 'a {
        self.orders.iter().filter(move |r| {
            r.is_resting()
                && r.market == o.market
                && r.is_bid() != o.is_bid()
                && o.crosses(r.axis_price())
        })
    }

    fn liquidity_from_others(&self, o: &MOrder) -> u64 {
        self.crossing(o)
            .filter(|r| r.maker != o.maker)
            .map(|r| r.remaining())
            .sum()
    }

    /// The checks that need no book, in the contract's order.
    fn validate(&self, n: &NewOrder) -> Result<(usize, Outcome), Reject> {
        let (market, outcome) = self.token(&n.token_id).ok_or(Reject::UnknownToken)?;
        let m = &self.markets[market];
        if m.state != MState::Active {
            return Err(Reject::MarketNotActive {
                state: m.state.word(),
            });
        }
        let tick = m.spec.tick_size_ticks;
        if n.price_ticks < tick || n.price_ticks > 10_000 - tick {
            return Err(Reject::PriceOutOfRange {
                price_ticks: n.price_ticks,
                tick_ticks: tick,
            });
        }
        if !n.price_ticks.is_multiple_of(tick) {
            return Err(Reject::PriceOffTick {
                price_ticks: n.price_ticks,
                tick_ticks: tick,
            });
        }
        if n.size_units == 0 || !n.size_units.is_multiple_of(ONE_SHARE) {
            return Err(Reject::SizeNotWhole {
                size_units: n.size_units,
            });
        }
        if n.size_units < m.spec.min_order_size_units {
            return Err(Reject::BelowMinimumSize {
                size_units: n.size_units,
                minimum_units: m.spec.min_order_size_units,
            });
        }
        let now_s = self.now_ns / NS_PER_S;
        if n.order_type == OrderType::Gtd {
            if n.expiration_s == 0 {
                return Err(Reject::GtdWithoutExpiration);
            }
            if n.expiration_s <= now_s {
                return Err(Reject::ExpirationPast {
                    expiration_s: n.expiration_s,
                    now_s,
                });
            }
        } else if n.expiration_s != 0 {
            return Err(Reject::ExpirationNotGtd);
        }
        if n.post_only && matches!(n.order_type, OrderType::Fok | OrderType::Fak) {
            return Err(Reject::PostOnlyNeedsRestingType);
        }
        if self.accepted_hashes.contains(&n.order_hash) {
            return Err(Reject::DuplicateOrder);
        }
        if !n.signer_verified && !self.links.contains(&(n.maker, n.signer)) {
            return Err(Reject::SignerNotController);
        }
        if !self.accounts.contains(&n.maker) {
            return Err(Reject::NotEnoughBalance);
        }
        Ok((market, outcome))
    }

    fn place(&mut self, n: &NewOrder) -> MReply {
        let (market, outcome) = match self.validate(n) {
            Ok(v) => v,
            Err(r) => return MReply::Rejected(r),
        };
        let spec = self.markets[market].spec.clone();
        let mut o = MOrder {
            id: self.orders.len() as OrderId + 1,
            hash: n.order_hash,
            maker: n.maker,
            market,
            outcome,
            side: n.side,
            price: n.price_ticks,
            size: n.size_units,
            filled: 0,
            kind: n.order_type,
            expiration_s: n.expiration_s,
            created_ns: self.now_ns,
            reserved: 0,
            place: Place::Taking,
        };
        let crosses_any = self.crossing(&o).next().is_some();
        if n.post_only && self.liquidity_from_others(&o) > 0 {
            return MReply::Rejected(Reject::PostOnlyWouldCross);
        }
        let delayed = spec.taker_delay_ms > 0 && crosses_any && !n.post_only;
        if !(delayed && self.quirks.fill_checks_deferred_when_delayed) {
            let liquidity = self.liquidity_from_others(&o);
            if o.kind == OrderType::Fok && liquidity < o.size {
                return MReply::Rejected(Reject::FokNotFilled);
            }
            if o.kind == OrderType::Fak && liquidity == 0 {
                return MReply::Rejected(Reject::FakNoMatch);
            }
        }
        let need = self.placement_reservation(&o, spec.fee_rate_bps, delayed);
        if o.side == Side::Buy && spec.fee_rate_bps > 0 && crosses_any && !delayed {
            self.count("crossing buy with a fee");
        }
        if self.balance(&o.maker, o.holding()).free < need {
            return MReply::Rejected(Reject::NotEnoughBalance);
        }
        // Accepted.
        self.accepted_hashes.insert(o.hash);
        self.bal(o.maker, o.holding()).reserve(need);
        o.reserved = need;
        let id = o.id;
        let kind = o.kind;
        if delayed {
            self.count("placed delayed");
            o.place = Place::Delayed {
                due_ns: self.now_ns + spec.taker_delay_ms * NS_PER_MS,
            };
            self.orders.push(o);
            return MReply::Placed {
                order_id: id,
                status: OrderStatus::Delayed,
                making: 0,
                taking: 0,
                trades: 0,
            };
        }
        self.orders.push(o);
        let taken = self.take(id);
        let status = self.finish(id);
        self.count(match (kind, status) {
            (OrderType::Fok, _) => "placed fok",
            (OrderType::Fak, _) => "placed fak",
            (_, OrderStatus::Matched) => "placed resting type, filled",
            _ if taken.trades > 0 => "placed resting type, partly filled",
            _ => "placed resting type, no fill",
        });
        MReply::Placed {
            order_id: id,
            status,
            making: taken.making,
            taking: taken.taking,
            trades: taken.trades,
        }
    }

    /// What order `o` reserves when it is accepted. A delayed order: the most it could need,
    /// since the book may move before it takes. Otherwise a SELL its tokens, a BUY its
    /// collateral at its limit; a BUY on a market with a fee more when its fills and their
    /// fees, plus what is left of it at its limit, cost more: found by running its taker
    /// phase on a copy of the model.
    fn placement_reservation(&self, o: &MOrder, fee_bps: u32, delayed: bool) -> u64 {
        if delayed {
            return taker_reservation(o, fee_bps);
        }
        let at_limit = resting_reservation(o);
        if o.side != Side::Buy || fee_bps == 0 {
            return at_limit;
        }
        let most = taker_reservation(o, fee_bps);
        let mut trial = self.clone();
        // Funded outside the ledger's rules (a credit would repay debt first).
        let funds = trial.bal(o.maker, Holding::Collateral);
        funds.free += most;
        funds.reserve(most);
        let mut taker = o.clone();
        taker.reserved = most;
        trial.orders.push(taker);
        trial.take(o.id);
        let after = trial.order(o.id).expect("the trial's taker");
        let spent = most - after.reserved;
        at_limit.max(spent + resting_reservation(after))
    }

    /// The taker phase of order `id`: best opposite price first, FIFO within a price,
    /// cancelling the taker's own resting orders on the way.
    fn take(&mut self, id: OrderId) -> Taken {
        let mut taken = Taken::default();
        let first_trade = self.trades.len();
        let fee_bps = self.markets[self.order(id).expect("taker").market]
            .spec
            .fee_rate_bps;
        loop {
            let t = self.order(id).expect("taker").clone();
            if t.remaining() == 0 {
                break;
            }
            let best = self
                .crossing(&t)
                .min_by_key(|r| {
                    let price_rank = if t.is_bid() {
                        r.axis_price()
                    } else {
                        10_000 - r.axis_price()
                    };
                    let Place::Resting { entered } = r.place else {
                        unreachable!("crossing orders rest")
                    };
                    (price_rank, entered)
                })
                .map(|r| r.id);
            let Some(maker_id) = best else { break };
            let m = self.order(maker_id).expect("maker").clone();
            if m.maker == t.maker {
                self.count("self-trade cancel");
                self.cancel(maker_id);
                continue;
            }
            let size = t.remaining().min(m.remaining());
            let p = m.axis_price();
            let taker_price = axis(t.outcome, p);
            let maker_price = axis(m.outcome, p);
            assert_eq!(maker_price, m.price, "a maker fills at its own price");
            let (making, taking, fee) = self.fill_party(id, taker_price, size, fee_bps);
            self.fill_party(maker_id, maker_price, size, 0);
            self.fees += fee;
            taken.making += making;
            taken.taking += taking;
            taken.trades += 1;
            self.trades.push(MTrade {
                market: t.market,
                taker: id,
                maker: maker_id,
                taker_address: t.maker,
                maker_address: m.maker,
                taker_outcome: t.outcome,
                maker_outcome: m.outcome,
                taker_side: t.side,
                maker_side: m.side,
                taker_price,
                maker_price,
                size,
                taker_fee: fee,
                status: TradeStatus::Matched,
            });
            self.full_sets += full_sets(t.outcome, m.outcome, t.side, size);
            self.count(match (t.outcome == m.outcome, t.side) {
                (true, _) => "fill complementary",
                (false, Side::Buy) => "fill mint",
                (false, Side::Sell) => "fill merge",
            });
            if fee > 0 {
                self.count("fill with fee");
            }
            let m = self.order_mut(maker_id);
            if m.remaining() == 0 {
                assert_eq!(m.reserved, 0, "a filled maker holds nothing");
                m.place = Place::Closed(OrderStatus::Matched);
            }
        }
        if taken.trades > 0 {
            let t = self.order(id).expect("taker");
            let last = self.trades.last().expect("a trade").taker_price;
            self.last_trades
                .push((t.market, t.outcome, t.side, last, t.filled));
            self.batches.push(MBatch {
                first: first_trade,
                count: taken.trades,
                label: None,
            });
        }
        taken
    }

    /// One side of a fill of `size` at own price `price`, paying `fee_bps` (0 for a maker).
    /// Returns (making, taking, fee) from this order's point of view.
    fn fill_party(&mut self, id: OrderId, price: u32, size: u64, fee_bps: u32) -> (u64, u64, u64) {
        let o = self.order(id).expect("party").clone();
        let cash = notional(price, size);
        let fee = fee_of(cash, fee_bps);
        let result = match o.side {
            Side::Buy => {
                let cost = cash + fee;
                self.bal(o.maker, Holding::Collateral).spend_reserved(cost);
                self.order_mut(id).reserved = o.reserved.checked_sub(cost).expect("buy reserve");
                self.bal(o.maker, Holding::Token(o.market, o.outcome))
                    .credit(size);
                (cash, size, fee)
            }
            Side::Sell => {
                self.bal(o.maker, Holding::Token(o.market, o.outcome))
                    .spend_reserved(size);
                self.order_mut(id).reserved = o.reserved.checked_sub(size).expect("sell reserve");
                self.bal(o.maker, Holding::Collateral).credit(cash - fee);
                (size, cash, fee)
            }
        };
        self.order_mut(id).filled += size;
        result
    }

    /// After the taker phase: rest, or close. Returns the status a reply shows.
    fn finish(&mut self, id: OrderId) -> OrderStatus {
        let o = self.order(id).expect("taker").clone();
        let holding = o.holding();
        let (keep, place) = if o.remaining() == 0 {
            (0, Place::Closed(OrderStatus::Matched))
        } else if matches!(o.kind, OrderType::Gtc | OrderType::Gtd) {
            self.entered += 1;
            (
                resting_reservation(&o),
                Place::Resting {
                    entered: self.entered,
                },
            )
        } else if o.filled > 0 {
            (0, Place::Closed(OrderStatus::Matched))
        } else {
            (0, Place::Closed(OrderStatus::Canceled))
        };
        let extra = o.reserved.checked_sub(keep).expect("rest reserve");
        self.bal(o.maker, holding).release(extra);
        let m = self.order_mut(id);
        m.reserved = keep;
        m.place = place;
        match place {
            Place::Closed(status) => status,
            _ => OrderStatus::Live,
        }
    }

    // ----- cancels -----------------------------------------------------------------------

    /// Closes open order `id` as cancelled and releases what it holds.
    fn cancel(&mut self, id: OrderId) {
        let o = self.order(id).expect("cancelled order").clone();
        assert!(o.is_open(), "cancelling a closed order");
        self.bal(o.maker, o.holding()).release(o.reserved);
        let m = self.order_mut(id);
        m.reserved = 0;
        m.place = Place::Closed(OrderStatus::Canceled);
        self.cancelled.push(id);
    }

    fn cancel_one(&mut self, requester: &Address, id: OrderId) -> CancelReport {
        let mut report = CancelReport::default();
        let Some(o) = self.order(id).cloned() else {
            report.not_canceled.push((id, NotCanceled::NotFound));
            return report;
        };
        if o.maker != *requester {
            report.not_canceled.push((id, NotCanceled::NotOwner));
            return report;
        }
        match o.place {
            Place::Delayed { .. } | Place::Resting { .. } => {
                self.cancel(id);
                report.canceled.push(id);
            }
            Place::Closed(OrderStatus::Matched) => {
                report.not_canceled.push((id, NotCanceled::AlreadyFilled))
            }
            Place::Closed(_) => report.not_canceled.push((id, NotCanceled::AlreadyCanceled)),
            Place::Taking => unreachable!("taking between commands"),
        }
        report
    }

    /// Cancels the requester's open orders, oldest first: all, or those of one market
    /// (and optionally one outcome).
    fn cancel_many(
        &mut self,
        requester: &Address,
        only: Option<(usize, Option<Outcome>)>,
    ) -> CancelReport {
        let ids: Vec<OrderId> = self
            .orders
            .iter()
            .filter(|o| o.is_open() && o.maker == *requester)
            .filter(|o| match only {
                None => true,
                Some((market, outcome)) => {
                    o.market == market && outcome.is_none_or(|x| x == o.outcome)
                }
            })
            .map(|o| o.id)
            .collect();
        for &id in &ids {
            self.cancel(id);
        }
        CancelReport {
            canceled: ids.into(),
            not_canceled: Default::default(),
        }
    }

    // ----- settlement --------------------------------------------------------------------

    fn settle(&mut self, hash: &Hash32, status: TradeStatus) -> MReply {
        let Some(b) = self.batches.iter().position(|b| b.label == Some(*hash)) else {
            return MReply::Rejected(Reject::UnknownTransaction);
        };
        let range = self.batches[b].first..self.batches[b].first + self.batches[b].count;
        if !self.trades[range.clone()]
            .iter()
            .all(|t| may_move(t.status, status))
        {
            return MReply::Rejected(Reject::InvalidStatusChange);
        }
        self.count(match status {
            TradeStatus::Failed => "batch failed",
            TradeStatus::Mined => "batch mined",
            TradeStatus::Confirmed => "batch confirmed",
            TradeStatus::Retrying => "batch retrying",
            TradeStatus::Matched => "batch matched",
        });
        for i in range {
            self.trades[i].status = status;
            if status == TradeStatus::Failed {
                let t = self.trades[i];
                let taker = (
                    t.taker_address,
                    t.taker_outcome,
                    t.taker_side,
                    t.taker_price,
                );
                let maker = (
                    t.maker_address,
                    t.maker_outcome,
                    t.maker_side,
                    t.maker_price,
                );
                self.reverse(t.market, taker, t.size, t.taker_fee);
                self.reverse(t.market, maker, t.size, 0);
                self.fees -= t.taker_fee;
                self.full_sets -= full_sets(t.taker_outcome, t.maker_outcome, t.taker_side, t.size);
            }
        }
        MReply::Ok
    }

    /// Gives one side of a failed trade back its own movement; what it no longer holds
    /// becomes debt.
    fn reverse(
        &mut self,
        market: usize,
        (address, outcome, side, price): (Address, Outcome, Side, u32),
        size: u64,
        fee: u64,
    ) {
        let cash = notional(price, size);
        let token = Holding::Token(market, outcome);
        let into_debt = match side {
            Side::Buy => {
                self.bal(address, Holding::Collateral).credit(cash + fee);
                let into_debt = self.bal(address, token).debit_forced(size);
                self.settle_ended_debt(address, market, outcome);
                into_debt
            }
            Side::Sell => {
                self.bal(address, token).credit(size);
                self.bal(address, Holding::Collateral)
                    .debit_forced(cash - fee)
            }
        };
        if into_debt {
            self.count("reversal into debt");
        }
        self.cover_debts_from_orders(address, market, outcome);
    }

    /// An account that owes an asset keeps no open order trading it: while it owes tokens
    /// of `market`'s `outcome`, its newest open SELL of that token is cancelled (the
    /// release repays the debt); then, while it owes collateral, its newest open BUY.
    fn cover_debts_from_orders(&mut self, address: Address, market: usize, outcome: Outcome) {
        let token = Holding::Token(market, outcome);
        for (holding, side) in [(token, Side::Sell), (Holding::Collateral, Side::Buy)] {
            while self.balance(&address, holding).debt > 0 {
                let newest = self
                    .orders
                    .iter()
                    .rev()
                    .find(|o| {
                        o.maker == address
                            && o.is_open()
                            && o.side == side
                            && o.holding() == holding
                    })
                    .map(|o| o.id);
                let Some(id) = newest else { break };
                self.count("debt covered from an open order");
                self.cancel(id);
            }
        }
    }
}

impl Model {
    /// Once a market has ended no trade can repay a token debt in it, and the seller's
    /// tokens given back are claimable: the debtor pays what the owed tokens are worth
    /// (the winner's one unit each, a voided market's half rounded up against the debtor,
    /// nothing for the loser) out of collateral, and owes no tokens.
    fn settle_ended_debt(&mut self, address: Address, market: usize, outcome: Outcome) {
        let MState::Resolved(resolution) = self.markets[market].state else {
            return;
        };
        let owed = self.balance(&address, Holding::Token(market, outcome)).debt;
        if owed == 0 {
            return;
        }
        let worth = match (resolution, outcome) {
            (Resolution::Void, _) => owed.div_ceil(2),
            (Resolution::Yes, Outcome::Yes) | (Resolution::No, Outcome::No) => owed,
            _ => 0,
        };
        self.count("token debt settled in an ended market");
        self.bal(address, Holding::Token(market, outcome)).debt = 0;
        self.bal(address, Holding::Collateral).debit_forced(worth);
        self.debts_settled += i128::from(worth);
    }
}

/// Full sets a fill of `size` creates (MINT), destroys (MERGE) or leaves alone.
fn full_sets(taker: Outcome, maker: Outcome, taker_side: Side, size: u64) -> i128 {
    let sets = i128::from(size);
    match (taker == maker, taker_side) {
        (true, _) => 0,
        (false, Side::Buy) => sets,
        (false, Side::Sell) => -sets,
    }
}

/// What an order holds while it takes (or waits to take): its remainder at its limit plus
/// the fee bound for a BUY, its remaining tokens for a SELL.
pub fn taker_reservation(o: &MOrder, fee_bps: u32) -> u64 {
    match o.side {
        Side::Buy => {
            let cash = notional(o.price, o.remaining());
            cash + fee_of(cash, fee_bps)
        }
        Side::Sell => o.remaining(),
    }
}

/// What a resting order holds: its remainder at its limit (BUY) or its remaining tokens.
pub fn resting_reservation(o: &MOrder) -> u64 {
    match o.side {
        Side::Buy => notional(o.price, o.remaining()),
        Side::Sell => o.remaining(),
    }
}

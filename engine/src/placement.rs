//! Placing an order: checks, reservation, the taker phase (matching), then resting,
//! waiting out a taker delay, or leaving.

use crate::command::NewOrder;
use crate::engine::Engine;
use crate::event::{Event, OrderEventKind, OrderStatus};
use crate::hash_slots::Vacancy;
use crate::maker_room::MakerRoom;
use crate::orders::{Order, OrderPlace, Slot, NIL};
use crate::reject::Reject;
use crate::reply::{Placement, Reply};
use crate::types::{
    axis_price, notional_units, AxisSide, OrderType, Outcome, PriceTicks, Side, TimestampNs, Units,
    NANOS_PER_MILLI, NANOS_PER_SECOND, UNITS_PER_SHARE,
};

/// The taker fee on a notional, rounded down.
pub fn taker_fee_units(notional_units: Units, fee_rate_bps: u32) -> Units {
    ((u128::from(notional_units) * u128::from(fee_rate_bps)) / 10_000) as Units
}

/// What an order must hold reserved while it waits out a taker delay, whatever the book
/// then holds: collateral at its limit plus the largest fee for a BUY, its tokens for a
/// SELL.
pub fn taker_reservation_units(
    side: Side,
    price_ticks: PriceTicks,
    size_units: Units,
    fee_rate_bps: u32,
) -> Units {
    match side {
        Side::Buy => {
            let notional = notional_units(price_ticks, size_units);
            notional + taker_fee_units(notional, fee_rate_bps)
        }
        Side::Sell => size_units,
    }
}

/// What a resting order must hold reserved: collateral at its limit for a BUY, its tokens
/// for a SELL (a maker pays no fee).
pub fn resting_reservation_units(
    side: Side,
    price_ticks: PriceTicks,
    remaining_units: Units,
) -> Units {
    match side {
        Side::Buy => notional_units(price_ticks, remaining_units),
        Side::Sell => remaining_units,
    }
}

/// Totals of one taker phase.
#[derive(Default)]
pub(crate) struct TakerTotals {
    pub filled_units: Units,
    pub collateral_units: Units,
    pub first_trade: u64,
    pub last_price_ticks: PriceTicks,
    /// The last MINT or MERGE fill's maker price and side, on the other token: that token
    /// traded too (its last trade price moves; the market's event names the taker's only).
    pub other_token_last: Option<(PriceTicks, Side)>,
}

impl Engine {
    pub(crate) fn place(&mut self, new: &NewOrder) -> Reply {
        match self.try_place(new) {
            Ok(placement) => Reply::Placed(placement),
            Err(reject) => Reply::Rejected(reject),
        }
    }

    /// The order's market, outcome and account, and where its hash goes among those seen, or
    /// why it is refused before anything changes.
    fn check_order(&self, new: &NewOrder) -> Result<(u32, Outcome, u32, Vacancy), Reject> {
        let (market_index, outcome) = self.check_order_terms(new, self.now_ns)?;
        let hash_vacancy = self
            .seen_hashes
            .vacancy(&new.order_hash)
            .ok_or(Reject::DuplicateOrder)?;
        if !new.signer_verified && !self.controllers.contains(&(new.maker, new.signer)) {
            return Err(Reject::SignerNotController);
        }
        if !self.orders.has_room() {
            return Err(Reject::TooManyOrders);
        }
        let account = self
            .ledger
            .find(&new.maker)
            .ok_or(Reject::NotEnoughBalance)?;
        Ok((market_index, outcome, account, hash_vacancy))
    }

    /// The checks of an order that come before its hash is looked at (API.md §8, rows 10 to
    /// 16, in order): its token's market and outcome, or the first one it fails. The gateway
    /// asks them of an order whose hash only the history store still holds, so that it is
    /// refused for the same first cause as an order the engine remembers. `now_ns` is the
    /// time a GTD expiration is judged at: the command's stamp in a placement, the clock's
    /// time when asked from outside (the engine's own is its last command's).
    pub fn check_order_terms(
        &self,
        new: &NewOrder,
        now_ns: TimestampNs,
    ) -> Result<(u32, Outcome), Reject> {
        let (market_index, outcome) = self
            .markets
            .find_token(&new.token_id)
            .ok_or(Reject::UnknownToken)?;
        let market = self.markets.get(market_index);
        market.check_active()?;
        market.check_price(new.price_ticks)?;
        if new.size_units == 0 || !new.size_units.is_multiple_of(UNITS_PER_SHARE) {
            return Err(Reject::SizeNotWhole {
                size_units: new.size_units,
            });
        }
        if new.size_units > self.limits.order_size_units_max {
            return Err(Reject::Overflow);
        }
        if new.size_units < market.spec.min_order_size_units {
            return Err(Reject::BelowMinimumSize {
                size_units: new.size_units,
                minimum_units: market.spec.min_order_size_units,
            });
        }
        check_expiration(new, now_ns)?;
        if new.post_only && !new.order_type.rests() {
            return Err(Reject::PostOnlyNeedsRestingType);
        }
        Ok((market_index, outcome))
    }

    fn try_place(&mut self, new: &NewOrder) -> Result<Placement, Reject> {
        let (market_index, outcome, account, hash_vacancy) = self.check_order(new)?;
        let side = AxisSide::of(outcome, new.side);
        let limit_axis = axis_price(outcome, new.price_ticks);
        let market = self.markets.get(market_index);
        let crosses = market.book.crosses(side, limit_axis);
        let taker_delay_ms = market.spec.taker_delay_ms;
        // A post-only order is refused when it would match; crossing only the maker's own
        // orders is no match (self-trade prevention cancels them and it rests).
        if new.post_only
            && crosses
            && self.fillable_units(market_index, side, limit_axis, account, new.size_units) > 0
        {
            return Err(Reject::PostOnlyWouldCross);
        }
        let delayed = crosses && !new.post_only && taker_delay_ms > 0;
        // A FOK or FAK is judged at placement even when it will wait out a taker delay
        // (and judged again when the delay ends, since the book may have moved).
        self.check_fillable(
            new.order_type,
            market_index,
            side,
            limit_axis,
            account,
            new.size_units,
        )?;
        if crosses {
            self.check_balance_room(account, (market_index, outcome), new.side, new.size_units)?;
        }
        let fee_rate_bps = market.spec.fee_rate_bps;
        let reserve_units = if delayed {
            // The book may move during the delay: the largest fee covers any fills then.
            taker_reservation_units(new.side, new.price_ticks, new.size_units, fee_rate_bps)
        } else if new.side == Side::Buy && crosses && fee_rate_bps > 0 {
            self.crossing_buy_reservation(market_index, outcome, account, new, fee_rate_bps)
        } else {
            resting_reservation_units(new.side, new.price_ticks, new.size_units)
        };
        match new.side {
            Side::Buy => self.ledger.collateral_mut(account).reserve(reserve_units)?,
            Side::Sell => self
                .ledger
                .position_mut(account, market_index, outcome)
                .reserve(reserve_units)?,
        }
        let slot = self.insert_open_order(
            new,
            hash_vacancy,
            account,
            market_index,
            outcome,
            reserve_units,
        );
        if delayed {
            return Ok(self.delay(slot, market_index));
        }
        if !crosses {
            return Ok(self.rest_at_once(slot));
        }
        // Every accepted order is announced before anything happens to it: a taker's
        // PLACEMENT (live) comes before its fills and the makers' updates.
        self.push_order_event(OrderEventKind::Placement, slot);
        let totals = self.take(slot);
        Ok(self.finish_taker(slot, totals, false))
    }

    /// Refuses a crossing order whose fills could take what `account` holds of the asset it
    /// receives past the largest balance: its token for a BUY (the size), collateral for a
    /// SELL (at most the size, at a price of 1). An order that rests is judged when it fills,
    /// as a maker (`maker_has_room`).
    pub(crate) fn check_balance_room(
        &self,
        account: u32,
        (market, outcome): (u32, Outcome),
        side: Side,
        size_units: Units,
    ) -> Result<(), Reject> {
        let collateral = side == Side::Sell;
        let held = if collateral {
            self.ledger.account(account).collateral
        } else {
            self.ledger.position(account, market, outcome)
        };
        let max_units = self.limits.balance_units_max;
        match held.total().checked_add(size_units) {
            Some(total) if total <= max_units => Ok(()),
            _ => Err(Reject::BalanceLimit {
                collateral,
                max_units,
            }),
        }
    }

    /// Rests an order that does not cross: what `take` then `finish_taker` would do with
    /// nothing to take, without the taker phase's bookkeeping (most orders are passive).
    fn rest_at_once(&mut self, slot: Slot) -> Placement {
        let order = self.orders.get(slot);
        // A FOK or FAK that does not cross was refused by `check_fillable`.
        debug_assert!(order.order_type.rests());
        let (order_id, order_hash) = (order.id, order.hash);
        self.rest(slot, Some(OrderEventKind::Placement));
        Placement {
            order_id,
            order_hash,
            status: OrderStatus::Live,
            making_units: 0,
            taking_units: 0,
            trade_ids: Vec::new(),
            transaction_hash: None,
        }
    }

    /// Refuses a FOK that cannot fill entirely and a FAK that cannot fill at all, before
    /// anything changes.
    pub(crate) fn check_fillable(
        &self,
        order_type: OrderType,
        market: u32,
        side: AxisSide,
        limit_axis: PriceTicks,
        account: u32,
        size_units: Units,
    ) -> Result<(), Reject> {
        match order_type {
            OrderType::Fok
                if self.fillable_units(market, side, limit_axis, account, size_units)
                    < size_units =>
            {
                Err(Reject::FokNotFilled)
            }
            OrderType::Fak
                if self.fillable_units(market, side, limit_axis, account, size_units) == 0 =>
            {
                Err(Reject::FakNoMatch)
            }
            _ => Ok(()),
        }
    }

    /// Liquidity an order on `side` up to `limit_axis` could take from other accounts,
    /// counted until `enough` is reached.
    fn fillable_units(
        &self,
        market: u32,
        side: AxisSide,
        limit_axis: PriceTicks,
        account: u32,
        enough: Units,
    ) -> Units {
        let book = &self.markets.get(market).book;
        let opposite = side.opposite();
        let mut total: Units = 0;
        let mut room = MakerRoom::default();
        let mut level_price = book.best(opposite);
        while let Some(price) = level_price {
            if !crosses_level(side, limit_axis, price) {
                break;
            }
            let mut slot = book.level(opposite, price).head;
            while slot != NIL {
                let order = self.orders.get(slot);
                // The fills the taker phase makes: the same makers, the same sizes.
                let size_units = order.remaining_units().min(enough - total);
                if order.account != account && room.admit(self, order, size_units) {
                    total += size_units;
                    if total >= enough {
                        return total;
                    }
                }
                slot = self.orders.links(slot).next;
            }
            level_price = book.next_level(opposite, price);
        }
        total
    }

    /// What a BUY that crosses on a market with a fee reserves: its collateral at its limit,
    /// or, when that is more, what its fills will cost with their fees plus what is left of
    /// it at its limit. The walk is the taker phase's (best level first, FIFO within a
    /// level, the taker's own orders skipped), so the fills it counts are the ones `take`
    /// makes next.
    fn crossing_buy_reservation(
        &self,
        market: u32,
        outcome: Outcome,
        account: u32,
        new: &NewOrder,
        fee_rate_bps: u32,
    ) -> Units {
        let book = &self.markets.get(market).book;
        let side = AxisSide::of(outcome, Side::Buy);
        let limit_axis = axis_price(outcome, new.price_ticks);
        let opposite = side.opposite();
        let mut remaining = new.size_units;
        let mut fills_cost: Units = 0;
        let mut room = MakerRoom::default();
        let mut level_price = book.best(opposite);
        'levels: while let Some(level) = level_price {
            if !crosses_level(side, limit_axis, level) {
                break;
            }
            let taker_price = axis_price(outcome, level);
            let mut slot = book.level(opposite, level).head;
            while slot != NIL {
                let order = self.orders.get(slot);
                let size_units = remaining.min(order.remaining_units());
                if order.account != account && room.admit(self, order, size_units) {
                    let notional = notional_units(taker_price, size_units);
                    fills_cost += notional + taker_fee_units(notional, fee_rate_bps);
                    remaining -= size_units;
                    if remaining == 0 {
                        break 'levels;
                    }
                }
                slot = self.orders.links(slot).next;
            }
            level_price = book.next_level(opposite, level);
        }
        let at_limit = notional_units(new.price_ticks, new.size_units);
        at_limit.max(fills_cost + notional_units(new.price_ticks, remaining))
    }

    fn insert_open_order(
        &mut self,
        new: &NewOrder,
        hash_vacancy: Vacancy,
        account: u32,
        market: u32,
        outcome: Outcome,
        reserved_units: Units,
    ) -> Slot {
        let id = self.orders.next_id();
        self.seen_hashes.fill(hash_vacancy, new.order_hash);
        let slot = self.orders.insert(Order {
            id,
            hash: new.order_hash,
            account,
            market,
            outcome,
            side: new.side,
            price_ticks: new.price_ticks,
            size_units: new.size_units,
            filled_units: 0,
            reserved_units,
            order_type: new.order_type,
            created_ns: self.now_ns,
            expiration_s: new.expiration_s,
            place: OrderPlace::Taking,
            due_ns: 0,
        });
        self.link_account_order(account, slot);
        if new.expiration_s != 0 {
            self.expiries.insert((new.expiration_s, id));
        }
        slot
    }

    fn delay(&mut self, slot: Slot, market: u32) -> Placement {
        let delay_ns = self
            .markets
            .get(market)
            .spec
            .taker_delay_ms
            .saturating_mul(NANOS_PER_MILLI);
        let due_ns = self.now_ns.saturating_add(delay_ns);
        let order = self.orders.get_mut(slot);
        order.place = OrderPlace::Delayed;
        order.due_ns = due_ns;
        let (id, hash) = (order.id, order.hash);
        self.delayed.insert((due_ns, id));
        self.push_order_event(OrderEventKind::Placement, slot);
        Placement {
            order_id: id,
            order_hash: hash,
            status: OrderStatus::Delayed,
            making_units: 0,
            taking_units: 0,
            trade_ids: Vec::new(),
            transaction_hash: None,
        }
    }

    /// The taker phase: matches the order in `slot` against the opposite side of its book
    /// while prices cross, at each maker's price, skipping (and cancelling) the taker's own
    /// resting orders.
    pub(crate) fn take(&mut self, slot: Slot) -> TakerTotals {
        let (market, side, limit_axis, account) = {
            let order = self.orders.get(slot);
            (
                order.market,
                order.axis_side(),
                order.axis_price(),
                order.account,
            )
        };
        let opposite = side.opposite();
        let mut totals = TakerTotals {
            first_trade: self.trades.next_index(),
            ..TakerTotals::default()
        };
        let mut room = MakerRoom::default();
        while self.orders.get(slot).remaining_units() > 0 {
            let book = &self.markets.get(market).book;
            let Some(price) = book.best(opposite) else {
                break;
            };
            if !crosses_level(side, limit_axis, price) {
                break;
            }
            let maker = book.level(opposite, price).head;
            if self.orders.get(maker).account == account {
                self.cancel_slot(maker);
                continue;
            }
            let size_units = self
                .orders
                .get(slot)
                .remaining_units()
                .min(self.orders.get(maker).remaining_units());
            // A maker that cannot receive the fill's proceeds leaves the book, as an own
            // order does (balances never pass the bound a deposit is held to).
            if !room.admit(self, self.orders.get(maker), size_units) {
                self.cancel_slot(maker);
                continue;
            }
            let (maker_outcome, maker_side, maker_price) = {
                let m = self.orders.get(maker);
                (m.outcome, m.side, m.price_ticks)
            };
            let taker_price = self.fill(slot, maker, price, size_units);
            totals.filled_units += size_units;
            totals.collateral_units += notional_units(taker_price, size_units);
            totals.last_price_ticks = taker_price;
            if maker_outcome != self.orders.get(slot).outcome {
                totals.other_token_last = Some((maker_price, maker_side));
            }
        }
        totals
    }

    /// Ends a taker phase: seals the settlement batch, rests or closes the order, and
    /// reports the placement.
    ///
    /// Its PLACEMENT was published already, `live` or (when `was_delayed`) `delayed`: an
    /// order that rests says so again only if it filled or was delayed.
    pub(crate) fn finish_taker(
        &mut self,
        slot: Slot,
        totals: TakerTotals,
        was_delayed: bool,
    ) -> Placement {
        let transaction_hash = self.trades.close_batch(totals.first_trade);
        let end = self.trades.next_index();
        let mut trade_ids = Vec::with_capacity((end - totals.first_trade) as usize);
        for index in totals.first_trade..end {
            let trade = *self.trades.get(index);
            trade_ids.push(trade.id);
            self.events.push(Event::Trade(trade));
        }
        let order = self.orders.get(slot);
        let (id, hash, side, outcome, market) = (
            order.id,
            order.hash,
            order.side,
            order.outcome,
            order.market,
        );
        let rests = order.order_type.rests();
        let (making_units, taking_units) = match side {
            Side::Buy => (totals.collateral_units, totals.filled_units),
            Side::Sell => (totals.filled_units, totals.collateral_units),
        };
        let status = if order.remaining_units() == 0 || (totals.filled_units > 0 && !rests) {
            OrderStatus::Matched
        } else if rests {
            OrderStatus::Live
        } else {
            OrderStatus::Canceled
        };
        match status {
            OrderStatus::Live => {
                let changed = was_delayed || totals.filled_units > 0;
                self.rest(slot, changed.then_some(OrderEventKind::Update));
            }
            OrderStatus::Matched => {
                self.push_order_event_with(OrderEventKind::Update, slot, OrderStatus::Matched);
                self.close_slot(slot, OrderStatus::Matched);
            }
            _ => {
                self.push_order_event_with(
                    OrderEventKind::Cancellation,
                    slot,
                    OrderStatus::Canceled,
                );
                self.close_slot(slot, OrderStatus::Canceled);
            }
        }
        if totals.filled_units > 0 {
            self.record_last_trade(market, outcome, side, &totals);
        }
        Placement {
            order_id: id,
            order_hash: hash,
            status,
            making_units,
            taking_units,
            trade_ids,
            transaction_hash,
        }
    }

    /// Puts the order in `slot` on its book with what a resting order reserves, and
    /// publishes `event` (status `live`) for it, if any.
    fn rest(&mut self, slot: Slot, event: Option<OrderEventKind>) {
        let (account, market, outcome, side, price, remaining, reserved) = {
            let o = self.orders.get(slot);
            (
                o.account,
                o.market,
                o.outcome,
                o.side,
                o.price_ticks,
                o.remaining_units(),
                o.reserved_units,
            )
        };
        let needed = resting_reservation_units(side, price, remaining);
        debug_assert!(reserved >= needed);
        self.release_reservation(account, market, outcome, side, reserved - needed);
        let order = self.orders.get_mut(slot);
        order.reserved_units = needed;
        order.place = OrderPlace::Resting;
        let (axis_side, axis) = (order.axis_side(), order.axis_price());
        self.markets
            .get_mut(market)
            .book
            .push_back(&mut self.orders, slot);
        self.push_level_event(market, axis_side, axis);
        if let Some(kind) = event {
            self.push_order_event_with(kind, slot, OrderStatus::Live);
        }
    }

    fn record_last_trade(
        &mut self,
        market: u32,
        outcome: Outcome,
        side: Side,
        totals: &TakerTotals,
    ) {
        let state = self.markets.get_mut(market);
        state.last_trade[outcome.index()] = Some(crate::market::LastTrade {
            price_ticks: totals.last_price_ticks,
            side,
        });
        if let Some((price_ticks, side)) = totals.other_token_last {
            state.last_trade[outcome.other().index()] =
                Some(crate::market::LastTrade { price_ticks, side });
        }
        state.event_seq += 1;
        let market_seq = state.event_seq;
        self.events.push(Event::LastTrade {
            market,
            outcome,
            side,
            price_ticks: totals.last_price_ticks,
            size_units: totals.filled_units,
            market_seq,
        });
    }
}

/// Whether a level at `level_price` on the opposite side is within a taker's limit.
#[inline]
pub(crate) fn crosses_level(
    taker_side: AxisSide,
    limit_axis: PriceTicks,
    level_price: PriceTicks,
) -> bool {
    match taker_side {
        AxisSide::Bid => level_price <= limit_axis,
        AxisSide::Ask => level_price >= limit_axis,
    }
}

/// Whether a GTD order has an expiration in the future at `now_ns` (and any other order none).
fn check_expiration(new: &NewOrder, now_ns: TimestampNs) -> Result<(), Reject> {
    let now_s = now_ns / NANOS_PER_SECOND;
    match (new.order_type, new.expiration_s) {
        (OrderType::Gtd, 0) => Err(Reject::GtdWithoutExpiration),
        (OrderType::Gtd, expiration_s) if expiration_s <= now_s => Err(Reject::ExpirationPast {
            expiration_s,
            now_s,
        }),
        (OrderType::Gtd, _) | (_, 0) => Ok(()),
        (_, _) => Err(Reject::ExpirationNotGtd),
    }
}

//! One fill between a taker and a maker order, and its ledger movement.
//!
//! Each side's movement depends only on its own token, side and price: a BUY pays
//! `price × size` collateral and receives the tokens, a SELL gives the tokens and receives
//! the collateral. The pair decides what happens to the full-set supply: MINT creates
//! `size` full sets, MERGE destroys them, COMPLEMENTARY leaves it alone.

use crate::command::TradeStatus;
use crate::engine::Engine;
use crate::event::{FillParty, OrderEventKind, OrderStatus, TradeView};
use crate::market::LastTrade;
use crate::orders::Slot;
use crate::placement::taker_fee_units;
use crate::types::{axis_price, notional_units, Bytes32, MatchType, PriceTicks, Side, Units};

impl Engine {
    /// Fills `size_units` between the taker in `taker_slot` and the maker in `maker_slot`
    /// at the maker's price (`level_axis` on the Yes axis). Returns the taker's price.
    pub(crate) fn fill(
        &mut self,
        taker_slot: Slot,
        maker_slot: Slot,
        level_axis: PriceTicks,
        size_units: Units,
    ) -> PriceTicks {
        let taker = *self.orders.get(taker_slot);
        let maker = *self.orders.get(maker_slot);
        debug_assert_eq!(maker.axis_price(), level_axis);
        let market = taker.market;
        let fee_rate_bps = self.markets.get(market).spec.fee_rate_bps;
        let taker_price = axis_price(taker.outcome, level_axis);

        self.settle_maker(maker_slot, size_units);
        let taker_fee = self.settle_taker(taker_slot, taker_price, size_units, fee_rate_bps);
        let match_type = MatchType::of((taker.outcome, taker.side), (maker.outcome, maker.side));
        let state = self.markets.get_mut(market);
        match match_type {
            MatchType::Mint => state.full_sets_units += size_units as i64,
            MatchType::Merge => state.full_sets_units -= size_units as i64,
            MatchType::Complementary => {}
        }
        if maker.outcome != taker.outcome {
            state.last_trade[maker.outcome.index()] = Some(LastTrade {
                price_ticks: maker.price_ticks,
                side: maker.side,
            });
        }

        let axis_side = maker.axis_side();
        state.book.reduce(axis_side, level_axis, size_units);
        self.orders.get_mut(maker_slot).filled_units += size_units;
        self.orders.get_mut(taker_slot).filled_units += size_units;

        let index = self.trades.next_index();
        let id = self.trades.next_id();
        let state = self.markets.get(market);
        let trade = TradeView {
            index,
            id,
            transaction_hash: Bytes32::default(),
            condition_id: state.spec.condition_id,
            yes_token_id: state.spec.yes_token_id,
            no_token_id: state.spec.no_token_id,
            match_type,
            taker: self.fill_party(&taker, taker_price),
            maker: self.fill_party(&maker, maker.price_ticks),
            size_units,
            taker_fee_units: taker_fee,
            match_time_ns: self.now_ns,
            last_update_ns: self.now_ns,
            status: TradeStatus::Matched,
        };
        self.trades.push(trade);
        self.ledger
            .account_mut(taker.account)
            .trades
            .push_back(index);
        self.ledger
            .account_mut(maker.account)
            .trades
            .push_back(index);

        if self.orders.get(maker_slot).remaining_units() == 0 {
            self.markets
                .get_mut(market)
                .book
                .unlink(&mut self.orders, maker_slot);
            self.push_order_event_with(OrderEventKind::Update, maker_slot, OrderStatus::Matched);
            self.close_slot(maker_slot, OrderStatus::Matched);
        } else {
            self.push_order_event_with(OrderEventKind::Update, maker_slot, OrderStatus::Live);
        }
        self.push_level_event(market, axis_side, level_axis);
        taker_price
    }

    fn fill_party(&self, order: &crate::orders::Order, price_ticks: PriceTicks) -> FillParty {
        FillParty {
            order_id: order.id,
            order_hash: order.hash,
            address: self.ledger.account(order.account).address,
            outcome: order.outcome,
            side: order.side,
            price_ticks,
        }
    }

    /// A resting order's side of a fill, at its own limit price.
    fn settle_maker(&mut self, slot: Slot, size_units: Units) {
        let order = self.orders.get_mut(slot);
        let (account, market, outcome, side, price) = (
            order.account,
            order.market,
            order.outcome,
            order.side,
            order.price_ticks,
        );
        match side {
            Side::Buy => {
                let cost = notional_units(price, size_units);
                order.reserved_units -= cost;
                self.ledger.collateral_mut(account).spend_reserved(cost);
                self.ledger
                    .position_mut(account, market, outcome)
                    .credit(size_units);
            }
            Side::Sell => {
                order.reserved_units -= size_units;
                self.ledger
                    .position_mut(account, market, outcome)
                    .spend_reserved(size_units);
                let proceeds = notional_units(price, size_units);
                self.ledger.collateral_mut(account).credit(proceeds);
            }
        }
    }

    /// The incoming order's side of a fill, at `price_ticks` (the maker's price seen from
    /// the taker's token), paying the taker fee. Returns the fee.
    fn settle_taker(
        &mut self,
        slot: Slot,
        price_ticks: PriceTicks,
        size_units: Units,
        fee_rate_bps: u32,
    ) -> Units {
        let order = self.orders.get_mut(slot);
        let (account, market, outcome, side) =
            (order.account, order.market, order.outcome, order.side);
        let notional = notional_units(price_ticks, size_units);
        let fee = taker_fee_units(notional, fee_rate_bps);
        match side {
            Side::Buy => {
                order.reserved_units -= notional + fee;
                self.ledger
                    .collateral_mut(account)
                    .spend_reserved(notional + fee);
                self.ledger
                    .position_mut(account, market, outcome)
                    .credit(size_units);
            }
            Side::Sell => {
                order.reserved_units -= size_units;
                self.ledger
                    .position_mut(account, market, outcome)
                    .spend_reserved(size_units);
                self.ledger.collateral_mut(account).credit(notional - fee);
            }
        }
        self.ledger.fees_collected_units += fee;
        fee
    }
}

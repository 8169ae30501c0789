//! Invariants of the engine state, checked after every command by the property tests
//! (and available to tools): an uncrossed book, level totals and reservations that match
//! the open orders, conserved collateral, and equal Yes and No supply per market.

use rustc_hash::FxHashMap;

use crate::engine::Engine;
use crate::orders::{OrderPlace, NIL};
use crate::placement::{resting_reservation_units, taker_reservation_units};
use crate::types::{AxisSide, Side};

impl Engine {
    /// Checks every invariant; the error names the first one broken.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.check_books()?;
        self.check_reservations()?;
        self.check_collateral_conserved()?;
        self.check_supply()
    }

    fn check_books(&self) -> Result<(), String> {
        for (index, market) in self.markets.all().iter().enumerate() {
            let book = &market.book;
            if let (Some(bid), Some(ask)) = (book.best_bid(), book.best_ask()) {
                if bid >= ask {
                    return Err(format!(
                        "market {index}: crossed book, bid {bid} >= ask {ask}"
                    ));
                }
            }
            for side in [AxisSide::Bid, AxisSide::Ask] {
                for (price, total) in book.levels(side) {
                    let mut sum = 0;
                    let mut slot = book.level(side, price).head;
                    while slot != NIL {
                        let order = self.orders.get(slot);
                        if order.axis_side() != side
                            || order.axis_price() != price
                            || order.place != OrderPlace::Resting
                        {
                            return Err(format!(
                                "market {index}: order {} misplaced at {side:?} {price}",
                                order.id
                            ));
                        }
                        if order.remaining_units() == 0 {
                            return Err(format!("order {} rests with nothing left", order.id));
                        }
                        sum += order.remaining_units();
                        slot = self.orders.links(slot).next;
                    }
                    if sum != total || total == 0 {
                        return Err(format!(
                            "market {index}: level {side:?} {price} total {total} != orders {sum}"
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    fn check_reservations(&self) -> Result<(), String> {
        let mut collateral: FxHashMap<u32, u64> = FxHashMap::default();
        let mut tokens: FxHashMap<(u32, u32, usize), u64> = FxHashMap::default();
        let mut resting = 0usize;
        for order in self.orders.iter() {
            let fee = self.markets.get(order.market).spec.fee_rate_bps;
            let needed = match order.place {
                OrderPlace::Resting => {
                    resting += 1;
                    resting_reservation_units(
                        order.side,
                        order.price_ticks,
                        order.remaining_units(),
                    )
                }
                OrderPlace::Delayed => taker_reservation_units(
                    order.side,
                    order.price_ticks,
                    order.remaining_units(),
                    fee,
                ),
                OrderPlace::Taking => {
                    return Err(format!("order {} left in its taker phase", order.id))
                }
            };
            if order.reserved_units != needed {
                return Err(format!(
                    "order {} reserves {} but needs {needed}",
                    order.id, order.reserved_units
                ));
            }
            match order.side {
                Side::Buy => *collateral.entry(order.account).or_default() += needed,
                Side::Sell => {
                    *tokens
                        .entry((order.account, order.market, order.outcome.index()))
                        .or_default() += needed
                }
            }
        }
        let on_books: usize = self
            .markets
            .all()
            .iter()
            .map(|m| {
                [AxisSide::Bid, AxisSide::Ask]
                    .iter()
                    .map(|&side| {
                        m.book
                            .levels(side)
                            .map(|(p, _)| count_level(self, m, side, p))
                            .sum::<usize>()
                    })
                    .sum::<usize>()
            })
            .sum();
        if on_books != resting {
            return Err(format!(
                "{resting} resting orders but {on_books} on the books"
            ));
        }
        for (index, account) in self.ledger.accounts().iter().enumerate() {
            let want = collateral.get(&(index as u32)).copied().unwrap_or(0);
            if account.collateral.reserved != want {
                return Err(format!(
                    "account {index}: collateral reserved {} != orders {want}",
                    account.collateral.reserved
                ));
            }
        }
        for (account, market, outcome, balance) in self.ledger.positions_sorted() {
            let want = tokens
                .get(&(account, market, outcome.index()))
                .copied()
                .unwrap_or(0);
            if balance.reserved != want {
                return Err(format!(
                    "account {account} market {market} {outcome:?}: reserved {} != orders {want}",
                    balance.reserved
                ));
            }
        }
        Ok(())
    }

    fn check_collateral_conserved(&self) -> Result<(), String> {
        let held: i128 = self
            .ledger
            .accounts()
            .iter()
            .map(|a| {
                i128::from(a.collateral.free) + i128::from(a.collateral.reserved)
                    - i128::from(a.collateral.debt)
            })
            .sum();
        let locked: i128 = self
            .markets
            .all()
            .iter()
            .map(|m| i128::from(m.full_sets_units))
            .sum();
        let paid: i128 = self
            .redemption_payouts_units
            .values()
            .map(|&p| i128::from(p))
            .sum();
        let inside = held + locked - paid + i128::from(self.ledger.fees_collected_units);
        let net = self.collateral_deposited_units as i128 - self.collateral_withdrawn_units as i128;
        if inside != net {
            return Err(format!("collateral not conserved: held {held} + locked {locked} - paid {paid} + fees != net deposits {net}"));
        }
        Ok(())
    }

    fn check_supply(&self) -> Result<(), String> {
        let mut held: FxHashMap<(u32, usize), i128> = FxHashMap::default();
        for (_, market, outcome, b) in self.ledger.positions_sorted() {
            *held.entry((market, outcome.index())).or_default() +=
                i128::from(b.free) + i128::from(b.reserved) - i128::from(b.debt);
        }
        for (index, market) in self.markets.all().iter().enumerate() {
            for o in 0..2 {
                let tokens = held.get(&(index as u32, o)).copied().unwrap_or(0)
                    + i128::from(market.redeemed_units[o])
                    + i128::from(market.withdrawn_units[o])
                    - i128::from(market.deposited_units[o]);
                if tokens != i128::from(market.full_sets_units) {
                    return Err(format!(
                        "market {index} outcome {o}: supply {tokens} != full sets {}",
                        market.full_sets_units
                    ));
                }
            }
        }
        Ok(())
    }
}

fn count_level(
    engine: &Engine,
    market: &crate::market::Market,
    side: AxisSide,
    price: u32,
) -> usize {
    let mut n = 0;
    let mut slot = market.book.level(side, price).head;
    while slot != NIL {
        n += 1;
        slot = engine.orders.links(slot).next;
    }
    n
}

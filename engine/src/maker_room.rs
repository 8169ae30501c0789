//! What the makers of one taker phase may still receive before a balance passes the largest
//! one a balance may hold (`EngineLimits::balance_units_max`, the bound a deposit is held
//! to). A maker that cannot receive its fill's proceeds leaves the book, as an own order
//! does.
//!
//! Each maker account's room is taken from its balances as they were before the phase (read
//! the first time one of its orders comes up, before any fill of its), less what the phase
//! gave it since. The walks that judge a taker before it matches (FOK, FAK, post-only, a
//! fee's reservation) change nothing and so see the same balances: they and the taker phase
//! admit the same makers, and what they promise the phase keeps. Debits during the phase
//! (a maker BUY spends collateral) are not counted back, so the room is never more than
//! there is.

use smallvec::SmallVec;

use crate::engine::Engine;
use crate::orders::Order;
use crate::types::{notional_units, Side, Units};

/// Room left per maker account in one taker phase: collateral, Yes and No of the market.
#[derive(Debug, Default)]
pub(crate) struct MakerRoom {
    accounts: SmallVec<[(u32, [Units; 3]); 4]>,
}

impl MakerRoom {
    /// Whether `maker` can receive a fill of `size_units` at its price (tokens for a BUY,
    /// collateral for a SELL); if so, that room is taken.
    pub(crate) fn admit(&mut self, engine: &Engine, maker: &Order, size_units: Units) -> bool {
        let index = match self.accounts.iter().position(|(a, _)| *a == maker.account) {
            Some(index) => index,
            None => {
                self.accounts
                    .push((maker.account, engine.room_before_phase(maker)));
                self.accounts.len() - 1
            }
        };
        let (asset, credit) = match maker.side {
            Side::Sell => (0, notional_units(maker.price_ticks, size_units)),
            Side::Buy => (1 + maker.outcome.index(), size_units),
        };
        let room = &mut self.accounts[index].1[asset];
        if *room < credit {
            return false;
        }
        *room -= credit;
        true
    }
}

impl Engine {
    /// What `maker`'s account may still receive of collateral, Yes and No of its market.
    fn room_before_phase(&self, maker: &Order) -> [Units; 3] {
        let max = self.limits.balance_units_max;
        let room = |total: Units| max.saturating_sub(total);
        let yes = crate::types::Outcome::Yes;
        let no = crate::types::Outcome::No;
        [
            room(self.ledger.account(maker.account).collateral.total()),
            room(
                self.ledger
                    .position(maker.account, maker.market, yes)
                    .total(),
            ),
            room(
                self.ledger
                    .position(maker.account, maker.market, no)
                    .total(),
            ),
        ]
    }
}

//! Debts covered from the debtor's own open orders.
//!
//! A failed settlement takes back what a party received; what it no longer holds free
//! becomes debt (its reservations are not touched: they back its open orders). Left so, those
//! orders would go on trading money the account owes: a BUY would pay a seller with
//! collateral its owner no longer has, a SELL would deliver tokens it has to give back. So
//! while an account owes an asset, its open orders that reserve that asset are cancelled,
//! newest first, and each released reservation repays the debt (a release is a credit, and a
//! credit repays debt first) until nothing is owed or no such order is left.

use crate::engine::Engine;
use crate::orders::{Slot, NIL};
use crate::types::{Outcome, Side};

impl Engine {
    /// Covers `account`'s debt in `outcome` of `market` from its SELL orders of that token,
    /// then its collateral debt from its BUY orders (any market): see the module's
    /// documentation.
    pub(crate) fn cover_debts_from_orders(&mut self, account: u32, market: u32, outcome: Outcome) {
        while self.ledger.position(account, market, outcome).debt > 0 {
            let slot = self.newest_open_order(account, |o| {
                o.side == Side::Sell && o.market == market && o.outcome == outcome
            });
            if slot == NIL {
                break;
            }
            self.cancel_slot(slot);
        }
        while self.ledger.account(account).collateral.debt > 0 {
            let slot = self.newest_open_order(account, |o| o.side == Side::Buy);
            if slot == NIL {
                break;
            }
            self.cancel_slot(slot);
        }
    }

    /// The newest open order of `account` that `keep` takes (`NIL`: none).
    fn newest_open_order(
        &self,
        account: u32,
        keep: impl Fn(&crate::orders::Order) -> bool,
    ) -> Slot {
        let mut slot = self.ledger.account(account).open_tail;
        while slot != NIL && !keep(self.orders.get(slot)) {
            slot = self.orders.links(slot).account_prev;
        }
        slot
    }
}

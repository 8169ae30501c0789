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
use crate::orders::NIL;
use crate::types::{Outcome, Side};

impl Engine {
    /// Covers `account`'s debt in `outcome` of `market` from its SELL orders of that token,
    /// then its collateral debt from its BUY orders (any market): see the module's
    /// documentation. One walk of the account's open orders per asset owed, none when
    /// nothing is owed or nothing reserved.
    pub(crate) fn cover_debts_from_orders(&mut self, account: u32, market: u32, outcome: Outcome) {
        let owes_tokens = |engine: &Engine| {
            let position = engine.ledger.position(account, market, outcome);
            position.debt > 0 && position.reserved > 0
        };
        self.cancel_newest_while(account, owes_tokens, |o| {
            o.side == Side::Sell && o.market == market && o.outcome == outcome
        });
        let owes_collateral = |engine: &Engine| {
            let collateral = engine.ledger.account(account).collateral;
            collateral.debt > 0 && collateral.reserved > 0
        };
        self.cancel_newest_while(account, owes_collateral, |o| o.side == Side::Buy);
    }

    /// Cancels `account`'s open orders that `reserves` takes, newest first, while `owes`.
    fn cancel_newest_while(
        &mut self,
        account: u32,
        owes: impl Fn(&Engine) -> bool,
        reserves: impl Fn(&crate::orders::Order) -> bool,
    ) {
        let mut slot = self.ledger.account(account).open_tail;
        while slot != NIL && owes(self) {
            // Read before the cancel unlinks this order (and only this one).
            let older = self.orders.links(slot).account_prev;
            if reserves(self.orders.get(slot)) {
                self.cancel_slot(slot);
            }
            slot = older;
        }
    }
}

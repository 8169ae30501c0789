//! Token debts in a market that has ended (resolved or voided).
//!
//! A failed settlement takes back tokens the buyer no longer holds as debt, and a credit of
//! the same token repays it. Once the market has ended, no trade can bring that token in, and
//! the tokens the failed trade gave back to the seller are claimable: left alone, the debt
//! would let the same tokens be paid out twice (once to the buyer who redeemed them before
//! the trade failed, once to the seller). So the engine settles such a debt in collateral, as
//! the debtor would on chain to get the owed tokens: it splits collateral into as many full
//! sets as it owes (one collateral unit each), keeps the owed tokens to repay the debt, and
//! redeems their complement at the market's payout. The debtor pays the difference; what it
//! lacks becomes collateral debt, which later credits repay.

use crate::claims::payout_units;
use crate::engine::Engine;
use crate::market::MarketState;
use crate::types::Outcome;

impl Engine {
    /// Settles in collateral the token debt of `account` in `outcome` of `market`, if the
    /// market has ended and there is one (see the module's documentation).
    pub(crate) fn settle_token_debt(&mut self, account: u32, market: u32, outcome: Outcome) {
        let MarketState::Resolved(resolution) = self.markets.get(market).state else {
            return;
        };
        let position = self.ledger.position_mut(account, market, outcome);
        let owed = position.debt;
        if owed == 0 {
            return;
        }
        position.debt = 0;
        let complement = outcome.other();
        let refund = payout_units(resolution, complement, owed);
        self.ledger
            .collateral_mut(account)
            .debit_forced(owed - refund);
        let state = self.markets.get_mut(market);
        state.full_sets_units += owed as i64;
        state.redeemed_units[complement.index()] += owed;
        *self.redemption_payouts_units.entry(market).or_default() += refund;
    }

    /// Settles every token debt in `market`, which has just ended, by debtor address and
    /// outcome; a debtor left owing collateral loses open BUY orders to it
    /// (`debt_cover`).
    pub(crate) fn settle_token_debts_in(&mut self, market: u32) {
        let mut debtors = self.ledger.debtors_in(market);
        debtors.sort_by_key(|&(account, outcome)| {
            (self.ledger.account(account).address, outcome.index())
        });
        for (account, outcome) in debtors {
            self.settle_token_debt(account, market, outcome);
            self.cover_debts_from_orders(account, market, outcome);
        }
    }
}

//! Settlement status of trades: each batch moves MATCHED → MINED → CONFIRMED, or through
//! RETRYING to FAILED, in which case its ledger movement is reversed exactly.

use crate::command::TradeStatus;
use crate::engine::Engine;
use crate::event::{Event, FillParty, TradeView};
use crate::reject::Reject;
use crate::types::{notional_units, Hash32, MatchType, Side, Units};

impl Engine {
    /// Moves every trade of the batch `transaction_hash` to `status`.
    pub(crate) fn update_settlement(
        &mut self,
        transaction_hash: &Hash32,
        status: TradeStatus,
    ) -> Result<(), Reject> {
        let Some(batch) = self.trades.batch(transaction_hash) else {
            // A batch made here that left the engine was final: it changes no more.
            return Err(if self.trades.made_batch(transaction_hash) {
                Reject::InvalidStatusChange
            } else {
                Reject::UnknownTransaction
            });
        };
        let range = batch.first_trade..batch.first_trade + u64::from(batch.trade_count);
        for index in range.clone() {
            if !self.trades.get(index).status.may_move_to(status) {
                return Err(Reject::InvalidStatusChange);
            }
        }
        for index in range {
            let trade = self.trades.get_mut(index);
            trade.status = status;
            trade.last_update_ns = self.now_ns;
            let trade = *trade;
            // The trade's FAILED comes before the cancellations its reversal may cause.
            self.events.push(Event::Trade(trade));
            if status == TradeStatus::Failed {
                self.reverse_trade(&trade);
            }
        }
        if status.is_final() {
            self.retired_batches
                .push_back((self.last_seq, crate::trades::batch_number(transaction_hash)));
        }
        Ok(())
    }

    /// Forgets what became final at or before `through_seq` (the history store holds it):
    /// final batches' trades leave the log and their parties' lists, closed orders' fates
    /// leave the order table (their hashes after a grace), and hashes whose grace is over go.
    pub(crate) fn forget_history(&mut self, through_seq: u64) {
        self.forgotten_through = self.forgotten_through.max(through_seq);
        while let Some(&(seq, id, hash)) = self.retired_orders.front() {
            if seq > through_seq {
                break;
            }
            self.retired_orders.pop_front();
            self.orders.forget(id);
            self.seen_hashes.fade(self.last_seq, hash);
        }
        self.seen_hashes.drop_faded(self.last_seq);
        while let Some(&(seq, number)) = self.retired_batches.front() {
            if seq > through_seq {
                break;
            }
            self.retired_batches.pop_front();
            for trade in self.trades.forget_batch(number) {
                for party in [&trade.taker, &trade.maker] {
                    if let Some(account) = self.ledger.find(&party.address) {
                        let list = &mut self.ledger.account_mut(account).trades;
                        if let Ok(at) = list.binary_search(&trade.index) {
                            list.remove(at);
                        }
                    }
                }
            }
        }
    }

    /// Whether a `ForgetHistory` through `through_seq`, journaled next, would forget nothing.
    pub(crate) fn nothing_to_forget(&self, through_seq: u64) -> bool {
        self.retired_batches
            .front()
            .is_none_or(|&(seq, _)| seq > through_seq)
            && self
                .retired_orders
                .front()
                .is_none_or(|&(seq, _, _)| seq > through_seq)
            && !self.seen_hashes.fade_due(self.last_seq + 1)
    }

    /// Undoes a trade's ledger movement for both sides; what a side no longer holds
    /// becomes debt (settled in collateral at once if the market has ended: see
    /// `ended_market_debts`). The orders stay filled.
    fn reverse_trade(&mut self, trade: &TradeView) {
        let market = self
            .markets
            .find(&trade.condition_id)
            .expect("a trade's market exists");
        self.reverse_party(
            market,
            &trade.taker,
            trade.size_units,
            trade.taker_fee_units,
        );
        self.reverse_party(market, &trade.maker, trade.size_units, 0);
        self.ledger.fees_collected_units -= trade.taker_fee_units;
        let state = self.markets.get_mut(market);
        match trade.match_type {
            MatchType::Mint => state.full_sets_units -= trade.size_units as i64,
            MatchType::Merge => state.full_sets_units += trade.size_units as i64,
            MatchType::Complementary => {}
        }
    }

    fn reverse_party(
        &mut self,
        market: u32,
        party: &FillParty,
        size_units: Units,
        fee_units: Units,
    ) {
        let account = self
            .ledger
            .find(&party.address)
            .expect("a trade's parties have accounts");
        let notional = notional_units(party.price_ticks, size_units);
        match party.side {
            Side::Buy => {
                self.ledger
                    .collateral_mut(account)
                    .credit(notional + fee_units);
                self.ledger
                    .position_mut(account, market, party.outcome)
                    .debit_forced(size_units);
                self.settle_token_debt(account, market, party.outcome);
            }
            Side::Sell => {
                self.ledger
                    .position_mut(account, market, party.outcome)
                    .credit(size_units);
                self.ledger
                    .collateral_mut(account)
                    .debit_forced(notional - fee_units);
            }
        }
        self.cover_debts_from_orders(account, market, party.outcome);
    }
}

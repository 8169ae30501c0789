//! Time-driven changes: GTD expiry (second resolution) and the end of a taker delay.
//! They fire at the start of whichever command first carries a time past them.

use crate::engine::Engine;
use crate::orders::OrderPlace;
use crate::types::{TimestampNs, NANOS_PER_SECOND};

impl Engine {
    /// Expires due GTD orders, then matches delayed orders that are due, oldest first.
    pub(crate) fn fire_due_timers(&mut self) {
        let now_s = self.now_ns / NANOS_PER_SECOND;
        while let Some(&(expiration_s, id)) = self.expiries.first() {
            if expiration_s > now_s {
                break;
            }
            match self.orders.slot_of(id) {
                Some(slot) => self.cancel_slot(slot),
                None => {
                    self.expiries.pop_first();
                }
            }
        }
        while let Some(&(due_ns, id)) = self.delayed.first() {
            if due_ns > self.now_ns {
                break;
            }
            self.delayed.pop_first();
            if let Some(slot) = self.orders.slot_of(id) {
                self.release_delayed(slot);
            }
        }
    }

    /// A delayed order's taker phase, run when its delay is over.
    fn release_delayed(&mut self, slot: crate::orders::Slot) {
        let order = self.orders.get_mut(slot);
        order.place = OrderPlace::Taking;
        order.due_ns = 0;
        let order = *order;
        let active = self.markets.get(order.market).check_active().is_ok();
        let fillable = self.check_fillable(
            order.order_type,
            order.market,
            order.axis_side(),
            order.axis_price(),
            order.account,
            order.remaining_units(),
        );
        // Judged again as at placement: the book, and the maker's balances, may have moved.
        let room = self.check_balance_room(
            order.account,
            (order.market, order.outcome),
            order.side,
            order.remaining_units(),
        );
        if !active || fillable.is_err() || room.is_err() {
            self.cancel_slot(slot);
            return;
        }
        let totals = self.take(slot);
        self.finish_taker(slot, totals, true);
    }

    /// The earliest time at which a timer is due, if any: the sequencer stamps a `Tick`
    /// then so that expiry and delayed matching happen without other traffic.
    pub fn next_deadline_ns(&self) -> Option<TimestampNs> {
        let expiry = self
            .expiries
            .first()
            .map(|(s, _)| s.saturating_mul(NANOS_PER_SECOND));
        let delayed = self.delayed.first().map(|(due, _)| *due);
        match (expiry, delayed) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

//! Prefetch hints for the commands coming next: the memory a command reads first starts
//! loading a few commands before its turn, so that its cache misses overlap the work of the
//! commands before it instead of stalling it.
//!
//! A hint changes no state and reads only what is already there, so a hint for a command
//! whose state changes before its turn (an order cancelled by the command before it) is
//! only wasted.

use crate::command::Command;
use crate::engine::Engine;
use crate::types::Side;

/// How many commands ahead of its turn a command is hinted. Measured on the
/// `ladder bench engine` stream (session 11, `benches/examples/profile_engine.rs`, three
/// interleaved rounds): one ahead 7.4–7.7 M commands/s, two 8.0–8.6 M, three 8.3–8.6 M,
/// four 8.0–8.3 M, six 7.8–8.3 M. Hints that follow the first one's lines a stage further (a
/// cancelled order's record, then its neighbours and reservation) gained nothing on top.
pub const PREFETCH_AHEAD: usize = 3;

impl Engine {
    /// A hint that `command` comes soon: starts loading the memory it reads first (what an order
    /// reserves, a cancelled order's fate).
    /// Changes no state; see [`Engine::prefetch_ahead`] for when to give it.
    #[inline]
    pub fn prefetch(&self, command: &Command) {
        match command {
            Command::PlaceOrder(order) => {
                // The duplicate check's slot, which a large set rarely has in cache.
                self.seen_hashes.prefetch(&order.order_hash);
                // What the order reserves: shares of its token (SELL) or collateral (BUY).
                if let Some(account) = self.ledger.find(&order.maker) {
                    match (order.side, self.markets.find_token(&order.token_id)) {
                        (Side::Sell, Some((market, outcome))) => {
                            self.ledger.prefetch_position(account, market, outcome)
                        }
                        _ => self.ledger.prefetch_account(account),
                    }
                }
            }
            Command::CancelOrder { order_id, .. } => self.orders.prefetch_fate(*order_id),
            _ => {}
        }
    }

    /// The hint for the command [`PREFETCH_AHEAD`] after the `index`-th of a run, and at the
    /// run's start (`index` 0) for those before it too: call it before applying the
    /// `index`-th command. `command_at(i)` is the run's `i`-th command, if any.
    #[inline]
    pub fn prefetch_ahead<'a>(
        &self,
        index: usize,
        command_at: impl Fn(usize) -> Option<&'a Command>,
    ) {
        if index == 0 {
            for ahead in 1..PREFETCH_AHEAD {
                if let Some(command) = command_at(ahead) {
                    self.prefetch(command);
                }
            }
        }
        if let Some(command) = command_at(index + PREFETCH_AHEAD) {
            self.prefetch(command);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// The commands hinted before applying the `index`-th of a run of `len`.
    fn hinted(index: usize, len: usize) -> Vec<usize> {
        let engine = Engine::default();
        let asked = RefCell::new(Vec::new());
        let tick = Command::Tick;
        engine.prefetch_ahead(index, |i| {
            asked.borrow_mut().push(i);
            (i < len).then_some(&tick)
        });
        asked.into_inner()
    }

    #[test]
    fn a_run_is_hinted_from_its_start_then_one_command_at_a_time() {
        assert_eq!(hinted(0, 100), (1..=PREFETCH_AHEAD).collect::<Vec<_>>());
        assert_eq!(hinted(1, 100), vec![1 + PREFETCH_AHEAD]);
        assert_eq!(hinted(6, 100), vec![6 + PREFETCH_AHEAD]);
        // Past the end the closure is asked and answers nothing; nothing breaks.
        assert_eq!(hinted(99, 100), vec![99 + PREFETCH_AHEAD]);
    }
}

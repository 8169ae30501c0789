//! The settlement backend interface.

use ladder_engine::{Hash32, TimestampNs, TradeStatus};

/// The next change of a batch: its status becomes `status` at `due_ns` (wall-clock ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// When.
    pub due_ns: TimestampNs,
    /// To what.
    pub status: TradeStatus,
}

/// Decides how batches settle.
pub trait Backend: Send {
    /// The step after a batch reached `status` at `at_ns` (`None`: the batch is final).
    fn next_step(
        &mut self,
        transaction_hash: &Hash32,
        status: TradeStatus,
        at_ns: TimestampNs,
    ) -> Option<Step>;
}

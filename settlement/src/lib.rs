//! Settlement: a thread fed by the sequencer's trade events. Fills of one taker order form
//! one batch with one transaction hash; a [`Backend`] decides when a batch moves on, and
//! every status change re-enters the sequencer as a `SettlementUpdate` command, so it is
//! journaled, replayed and published like any other change.

mod backend;
mod builtin;
mod thread;

pub use backend::{Backend, Step};
pub use builtin::{fails, BuiltIn};
pub use thread::{pending_batches, start, SettlementHandle};

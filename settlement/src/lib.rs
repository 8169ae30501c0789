//! Settlement: a thread fed by the sequencer's trade events. Fills of one taker order form
//! one batch with one transaction hash; a [`Backend`] decides when a batch moves on, and
//! every status change re-enters the sequencer as a `SettlementUpdate` command, so it is
//! journaled, replayed and published like any other change.
//!
//! Two backends: [`BuiltIn`] (timers against Ladder's own ledger, the default) and the chain
//! backend ([`start_chain`]), which sends each batch to the exchange contract over JSON-RPC.

mod backend;
mod builtin;
mod chain;
mod outbox;
mod thread;

pub use backend::{Backend, Step};
pub use builtin::{fails, BuiltIn};
pub use chain::{fill_of, start_chain, ChainSettings};
pub use outbox::SettlementRing;
pub use thread::{pending_batches, start, PendingBatch, SettlementHandle};

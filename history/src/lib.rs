//! Ladder's history store (API.md §19, "History and bounded state"): closed orders, final trades and trade prices in
//! SQLite (`history.db` in the data directory), written by the [`Historian`], a thread that
//! follows the journal with its own engine and also writes the periodic snapshots, and read
//! by gateway threads through [`HistoryReader`] (which implements
//! `ladder_sequencer::HistoryReads`, all the gateway knows of the store). The schema is in
//! `schema.rs` and, for operators, in this crate's README.

mod copy;
mod historian;
mod reader;
mod rows;
mod schema;
mod writer;

pub use copy::copy_store;
pub use historian::{Historian, HistorianConfig};
pub use reader::HistoryReader;
pub use schema::{history_path, HISTORY_FILE_NAME, SCHEMA_VERSION};
pub use writer::HistoryWriter;

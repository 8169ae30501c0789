//! Ladder's memory-mapped, segmented, checksummed append-only journal.
//!
//! The journal stores opaque payloads, each with a sequence number, a timestamp and a `u16`
//! record type; callers encode their own commands. One [`Journal`] writes (the sequencer
//! thread); any number of [`JournalReader`]s, in this or other processes, read and follow it.
//! [`verify`], [`repair`] and the snapshot functions serve the `ladder journal` tools and
//! recovery. The on-disk format is described in `journal/README.md` and [`layout`].
//!
//! Data path: `Journal::append` writes a frame into the mapped active segment and publishes
//! it with one release store; `Journal::commit(Durability::Sync)` msyncs the dirty range.
//! `Journal::open` recovers: a torn tail is cut away and reported, damage before the last good
//! record is [`JournalError::Corrupt`].

mod clean_stop;
mod durable_file;
mod error;
mod frame;
pub mod layout;
mod lock;
mod options;
mod prefault;
mod reader;
mod record;
mod recovery;
mod release;
mod repair;
mod retention;
mod scan;
mod segment;
pub mod snapshot;
mod space;
mod spare;
mod start;
mod truncate;
mod verify;
mod writer;

#[cfg(not(target_has_atomic = "64"))]
compile_error!("the journal publishes frames with 64-bit atomic stores");

pub use clean_stop::CLEAN_STOP_FILE_NAME;
pub use durable_file::write_file_durably;
pub use error::{Fault, JournalError, Result};
pub use lock::LOCK_FILE_NAME;
pub use options::{Durability, JournalOptions};
pub use reader::{JournalReader, UNSEALED_END_LOOK_EVERY};
pub use record::{Record, RecordRef};
pub use recovery::{RecoveryReport, TornTail};
pub use repair::{quarantine_after, repair, truncate_after, RepairReport, RepairedDamage};
pub use retention::{journal_first_seq, retire_segments_through};
pub use segment::{create_dir_durably, journal_dir, sync_dir, JOURNAL_DIR_NAME, SEGMENTS_MAX};
pub use snapshot::{
    latest_valid_snapshot, latest_valid_snapshot_through, oldest_valid_snapshot_seq,
    prune_snapshots, set_aside_snapshots_after, write_snapshot, Snapshot,
};
pub use space::{is_no_space, is_no_space_io};
pub use start::start_journal_after;
pub use truncate::BACKUPS_PER_SEGMENT_MAX;
pub use verify::{verify, VerifyReport};
pub use writer::{FlushTicket, Journal, WriteClass};

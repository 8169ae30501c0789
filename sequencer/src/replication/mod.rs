//! Replication to hot standbys (LMAX style): the primary streams committed journal records
//! to each standby over TCP; a standby appends them to its own journal, applies them, and
//! acknowledges. With `--replicas N` a batch's answers leave only after N standbys hold it.
//!
//! Wire format (after a one-line handshake `LADDER-REPL 1 FROM <seq>\n` from the standby,
//! answered by the primary's 32-byte master key): records as
//! `len u32 | seq u64 | timestamp_ns u64 | type u16 | payload`, big-endian; acknowledgements
//! from the standby as lines `ACK <seq>\n`.

pub mod client;
mod hub;
pub mod server;

pub use hub::ReplicationHub;

/// The handshake line's prefix.
pub const HANDSHAKE: &str = "LADDER-REPL 1 FROM ";
/// Largest record payload accepted from the wire.
pub const RECORD_PAYLOAD_MAX: usize = 1 << 20;

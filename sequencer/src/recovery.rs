//! Start-up: the newest valid snapshot, then a replay of the journal after it. Start-up
//! journals nothing: the state after recovery is exactly the state the journal describes.

use std::path::Path;

use ladder_engine::{Engine, EngineLimits};
use ladder_journal::{latest_valid_snapshot, JournalReader};

use crate::codec::decode_command;

/// What recovery did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Sequence of the snapshot used (0: none).
    pub snapshot_seq: u64,
    /// Records replayed after it.
    pub replayed: u64,
    /// Sequence of the last record applied.
    pub last_seq: u64,
}

/// Rebuilds the engine from `data_dir`: snapshot plus replay up to `until_seq` (inclusive;
/// `None` = the end of the journal).
pub fn recover_engine(
    data_dir: &Path,
    limits: EngineLimits,
    until_seq: Option<u64>,
) -> Result<(Engine, Recovered), String> {
    let mut recovered = Recovered::default();
    let snapshot = latest_valid_snapshot(data_dir).map_err(|e| e.to_string())?;
    let restored = match snapshot {
        Some(snapshot) if until_seq.is_none_or(|u| snapshot.seq <= u) => {
            match Engine::from_snapshot_bytes(&snapshot.payload) {
                Ok(engine) => Some((snapshot.seq, engine)),
                Err(e) => {
                    // An older engine's format (or damage the checksum missed): the journal is
                    // complete from sequence 1, so replaying all of it gives the same state.
                    tracing::warn!(seq = snapshot.seq, error = %e, "snapshot not usable; replaying the whole journal");
                    None
                }
            }
        }
        _ => None,
    };
    let mut engine = match restored {
        Some((seq, engine)) => {
            recovered.snapshot_seq = seq;
            recovered.last_seq = seq;
            engine
        }
        None => Engine::new(limits),
    };
    let journal_exists = ladder_journal::journal_dir(data_dir).exists();
    if !journal_exists {
        return Ok((engine, recovered));
    }
    let mut reader = JournalReader::open(data_dir).map_err(|e| e.to_string())?;
    reader
        .seek(recovered.last_seq + 1)
        .map_err(|e| e.to_string())?;
    while let Some(record) = reader.poll().map_err(|e| e.to_string())? {
        if until_seq.is_some_and(|u| record.seq > u) {
            break;
        }
        let command = decode_command(record.record_type, record.payload)
            .map_err(|e| format!("journal record {}: {e}", record.seq))?;
        engine.apply(record.seq, record.timestamp_ns, &command);
        recovered.replayed += 1;
        recovered.last_seq = record.seq;
    }
    Ok((engine, recovered))
}

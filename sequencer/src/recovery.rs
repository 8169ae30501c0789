//! Start-up: the newest valid snapshot, then a replay of the journal after it. Start-up
//! journals nothing: the state after recovery is exactly the state the journal describes.

use std::path::Path;

use ladder_engine::{Engine, EngineLimits};
use ladder_journal::{latest_valid_snapshot_through, JournalReader};

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
///
/// The newest snapshot at or before `until_seq` that decodes is used (an unusable one, say of an
/// older engine's format, is passed over for the one before it). Without one, the journal is
/// replayed from its first record, which must then be sequence 1: a journal trimmed by
/// retention starts later and needs a snapshot that covers what it no longer holds.
pub fn recover_engine(
    data_dir: &Path,
    limits: EngineLimits,
    until_seq: Option<u64>,
) -> Result<(Engine, Recovered), String> {
    let mut recovered = Recovered::default();
    let first_seq = ladder_journal::journal_first_seq(data_dir).map_err(|e| e.to_string())?;
    let mut newest_allowed = until_seq.unwrap_or(u64::MAX);
    let mut restored = None;
    while let Some(snapshot) =
        latest_valid_snapshot_through(data_dir, newest_allowed).map_err(|e| e.to_string())?
    {
        match Engine::from_snapshot_bytes(&snapshot.payload) {
            Ok(engine) => {
                restored = Some((snapshot.seq, engine));
                break;
            }
            Err(e) => {
                tracing::warn!(seq = snapshot.seq, error = %e, "snapshot not usable; trying an older one");
                match snapshot.seq.checked_sub(1) {
                    Some(older) => newest_allowed = older,
                    None => break,
                }
            }
        }
    }
    let restored_seq = restored.as_ref().map(|(seq, _)| *seq);
    let mut engine = match restored {
        Some((seq, engine)) => {
            recovered.snapshot_seq = seq;
            recovered.last_seq = seq;
            engine
        }
        None => Engine::new(limits),
    };
    let Some(first_seq) = first_seq else {
        return Ok((engine, recovered));
    };
    if first_seq > recovered.last_seq + 1 {
        let found = match (restored_seq, until_seq) {
            (Some(seq), _) => format!("the newest usable one is at {seq}"),
            (None, Some(until)) => format!("none is at or before {until}"),
            (None, None) => "there is none".to_string(),
        };
        return Err(format!(
            "the journal starts at sequence {first_seq} and no usable snapshot covers the \
             records before it ({found})"
        ));
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

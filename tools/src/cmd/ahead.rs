//! A standby ahead of its primary: the primary lost records it never answered (an unflushed
//! tail, at a power loss) and restarted shorter, while the standby, sent records as soon as
//! they were written, holds them. The standby cuts them (keeping `.bad` copies, as `ladder
//! journal repair --truncate-after` does) and follows on, when its record at the primary's
//! end is the primary's and the extra records are no more than a lost flush explains.

use std::path::Path;

use ladder_sequencer::replication::server::JournalEnd;
use ladder_sequencer::replication::RecordMark;

/// Most records a standby cuts by itself: the sequencer keeps at most 4 batches of 4,096
/// records unflushed, so a primary's power loss takes fewer than this; more means the primary
/// restarted on other data (an older backup, the wrong directory), and a person decides.
pub const AHEAD_RECORDS_CUT_MAX: u64 = 65_536;

/// Cuts the records of the standby in `data_dir` after the primary's `end`, when it may.
pub fn cut_after_primary_end(data_dir: &Path, end: JournalEnd) -> Result<(), String> {
    let last_seq = super::bootstrap::last_seq_held(data_dir, Default::default())?;
    let extra = last_seq.saturating_sub(end.seq());
    let remedy = "start the standby on an empty data directory to follow this primary";
    let Some(primary_last) = end.last else {
        return Err(format!(
            "the primary's journal is empty while this standby holds {last_seq} records: {remedy}"
        ));
    };
    if extra > AHEAD_RECORDS_CUT_MAX {
        return Err(format!(
            "this standby holds {extra} records past the primary's last ({}), more than a lost \
             flush explains (at most {AHEAD_RECORDS_CUT_MAX}): {remedy}",
            primary_last.seq
        ));
    }
    let ours = RecordMark::of_journal(data_dir, primary_last.seq)
        .ok()
        .flatten();
    if ours != Some(primary_last) {
        return Err(format!(
            "this standby's record {} is not the primary's ({primary_last}): its journal \
             diverged; {remedy}",
            primary_last.seq
        ));
    }
    let kept =
        ladder_journal::quarantine_after(data_dir, primary_last.seq).map_err(|e| e.to_string())?;
    tracing::warn!(
        primary_last = primary_last.seq,
        cut = extra,
        kept = ?kept,
        "the primary restarted without records it never answered: cut them here too"
    );
    Ok(())
}

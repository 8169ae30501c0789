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

/// Why a standby holds records its primary does not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ahead {
    /// A primary outside a cluster restarted without its unflushed tail (a power loss): at
    /// most [`AHEAD_RECORDS_CUT_MAX`] records.
    LostFlush,
    /// In a cluster, this node wrote them as the leader of an older term (CONTRACT 22): the
    /// new leader did not take them, however many they are.
    OlderTerm,
}

/// What a standby ahead of its primary would cut.
#[derive(Clone, Copy, Debug)]
pub struct Cut {
    /// The standby's last record.
    pub last_seq: u64,
    /// The primary's last record: the standby keeps everything up to it.
    pub primary_last: RecordMark,
    /// How many records go.
    pub extra: u64,
}

/// Cuts the records of the standby in `data_dir` after the primary's `end`, when it may.
pub fn cut_after_primary_end(data_dir: &Path, end: JournalEnd, why: Ahead) -> Result<(), String> {
    let last_seq = super::bootstrap::last_seq_held(data_dir, Default::default())?;
    let Cut {
        last_seq,
        primary_last,
        extra,
    } = plan_cut(data_dir, last_seq, &end, why)?;
    if !covered_through(data_dir, primary_last.seq)? {
        // Cutting would leave a journal that no snapshot covers (a trimmed journal whose
        // snapshots are all among the records cut): set everything aside instead and take
        // the primary's state, as a standby behind its journal does.
        let aside = super::bootstrap::set_aside_state(data_dir, last_seq)?;
        tracing::warn!(
            primary_last = primary_last.seq,
            cut = extra,
            set_aside = ?aside,
            "{}, and no snapshot this node keeps from before them covers its journal: what \
             it held is set aside, and it takes the primary's state",
            why.words()
        );
        return Ok(());
    }
    let kept =
        ladder_journal::quarantine_after(data_dir, primary_last.seq).map_err(|e| e.to_string())?;
    tracing::warn!(
        primary_last = primary_last.seq,
        cut = extra,
        kept = ?kept,
        "{}: cut them here (kept aside)",
        why.words()
    );
    Ok(())
}

/// What the standby in `data_dir`, holding records through `last_seq`, would cut after the
/// primary's `end`, or why it may not (then it stops, for a person to decide): the primary's
/// journal is empty, the records are more than a lost flush explains, or its record at the
/// primary's end is not the primary's. Reads the journal only (the node may be running).
pub fn plan_cut(
    data_dir: &Path,
    last_seq: u64,
    end: &JournalEnd,
    why: Ahead,
) -> Result<Cut, String> {
    let extra = last_seq.saturating_sub(end.seq());
    let remedy = "start the standby on an empty data directory to follow this primary";
    let Some(primary_last) = end.last else {
        return Err(format!(
            "the primary's journal is empty while this standby holds {last_seq} records: {remedy}"
        ));
    };
    if why == Ahead::LostFlush && extra > AHEAD_RECORDS_CUT_MAX {
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
    Ok(Cut {
        last_seq,
        primary_last,
        extra,
    })
}

impl Ahead {
    /// What the log says of the records cut.
    fn words(self) -> &'static str {
        match self {
            Ahead::LostFlush => "the primary restarted without records it never answered",
            Ahead::OlderTerm => {
                "records this node wrote as the leader of an older term are not the new \
                 leader's (with --replicas 0 some may have been answered)"
            }
        }
    }
}

/// Whether the journal of `data_dir`, cut after `seq`, can still be recovered: it starts at
/// sequence 1, or a snapshot at or before `seq` covers the records before its start.
fn covered_through(data_dir: &Path, seq: u64) -> Result<bool, String> {
    let first = ladder_journal::journal_first_seq(data_dir).map_err(|e| e.to_string())?;
    let Some(first) = first.filter(|first| *first > 1) else {
        return Ok(true);
    };
    let snapshot =
        ladder_journal::latest_valid_snapshot_through(data_dir, seq).map_err(|e| e.to_string())?;
    Ok(snapshot.is_some_and(|snapshot| snapshot.seq + 1 >= first))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ladder_journal::{Durability, Journal, JournalOptions};

    /// A data directory whose journal was trimmed to start at 101 and holds 101..=110, with a
    /// snapshot at `snapshot_seq`; returns the mark of record `end` (the primary's last).
    fn trimmed_journal(data_dir: &Path, snapshot_seq: u64, end: u64) -> RecordMark {
        ladder_journal::start_journal_after(data_dir, 100, JournalOptions::default()).unwrap();
        let (mut journal, _) = Journal::open(data_dir, JournalOptions::default()).unwrap();
        for seq in 101..=110 {
            journal
                .append(seq, seq * 1_000, 1, &seq.to_le_bytes())
                .unwrap();
        }
        journal.commit(Durability::Sync).unwrap();
        drop(journal);
        ladder_journal::write_snapshot(data_dir, snapshot_seq, b"state").unwrap();
        RecordMark::of_journal(data_dir, end).unwrap().unwrap()
    }

    /// More records than a lost flush explains: refused for a restarted primary, cut for a
    /// new leader of a cluster (they were written under an older term, however many).
    #[test]
    fn a_long_tail_is_cut_only_after_a_change_of_term() {
        let extra = AHEAD_RECORDS_CUT_MAX + 10;
        let journal_of = |dir: &Path| {
            let (mut journal, _) = Journal::open(dir, JournalOptions::default()).unwrap();
            for seq in 1..=10 + extra {
                journal.append(seq, seq, 1, &seq.to_le_bytes()).unwrap();
            }
            journal.commit(Durability::Sync).unwrap();
            drop(journal);
            RecordMark::of_journal(dir, 10).unwrap().unwrap()
        };
        let restarted = tempfile::tempdir().unwrap();
        let mark = journal_of(restarted.path());
        let refused = cut_after_primary_end(
            restarted.path(),
            JournalEnd { last: Some(mark) },
            Ahead::LostFlush,
        )
        .unwrap_err();
        assert!(
            refused.contains("more than a lost flush explains"),
            "{refused}"
        );
        assert_eq!(last_seq(restarted.path()), 10 + extra);
        let deposed = tempfile::tempdir().unwrap();
        let mark = journal_of(deposed.path());
        cut_after_primary_end(
            deposed.path(),
            JournalEnd { last: Some(mark) },
            Ahead::OlderTerm,
        )
        .unwrap();
        assert_eq!(last_seq(deposed.path()), 10);
    }

    fn last_seq(data_dir: &Path) -> u64 {
        super::super::bootstrap::last_seq_held(data_dir, JournalOptions::default()).unwrap()
    }

    #[test]
    fn records_past_the_primary_are_cut_when_a_snapshot_before_them_covers_the_journal() {
        let dir = tempfile::tempdir().unwrap();
        let mark = trimmed_journal(dir.path(), 103, 105);
        cut_after_primary_end(
            dir.path(),
            JournalEnd { last: Some(mark) },
            Ahead::LostFlush,
        )
        .unwrap();
        assert_eq!(last_seq(dir.path()), 105);
        let snapshot = ladder_journal::latest_valid_snapshot_through(dir.path(), u64::MAX);
        assert_eq!(snapshot.unwrap().map(|s| s.seq), Some(103));
    }

    /// Every snapshot among the records cut (a demoted leader's shutdown snapshot with
    /// `--keep-snapshots 1`): the cut journal would start at 101 with nothing before it, so the
    /// node sets its state aside and starts empty, to take the primary's.
    #[test]
    fn a_cut_that_leaves_no_snapshot_covering_the_journal_sets_the_state_aside() {
        let dir = tempfile::tempdir().unwrap();
        let mark = trimmed_journal(dir.path(), 108, 105);
        cut_after_primary_end(
            dir.path(),
            JournalEnd { last: Some(mark) },
            Ahead::LostFlush,
        )
        .unwrap();
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            !names.iter().any(|n| n == "journal" || n == "snapshots"),
            "{names:?}"
        );
        let aside: Vec<&String> = names
            .iter()
            .filter(|n| n.starts_with("set-aside-110-"))
            .collect();
        assert_eq!(aside.len(), 1, "{names:?}");
        assert!(dir.path().join(aside[0]).join("journal").is_dir());
        assert!(dir.path().join(aside[0]).join("snapshots").is_dir());
        assert_eq!(
            last_seq(dir.path()),
            0,
            "an empty standby, which bootstraps"
        );
    }
}

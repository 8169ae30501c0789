//! Retention: segments wholly at or before a bound leave the journal (removed or archived),
//! never the one being written; the trimmed journal reopens, reads, verifies and follows on.

mod common;

use common::*;
use ladder_journal::{
    journal_first_seq, retire_segments_through, verify, Journal, JournalError, JournalReader,
};

/// First sequences of the segments, from their names.
fn first_seqs(data_dir: &std::path::Path) -> Vec<u64> {
    segment_paths(data_dir)
        .iter()
        .map(|p| {
            p.file_stem()
                .and_then(|s| s.to_str())
                .and_then(|s| s.parse().ok())
                .expect("a segment name")
        })
        .collect()
}

#[test]
fn segments_before_the_bound_leave_and_the_rest_reads_and_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let records = write_records(dir.path(), &varied_lens(400));
    let firsts = first_seqs(dir.path());
    assert!(firsts.len() >= 5, "several segments: {firsts:?}");

    // A bound inside the third segment retires the first two only.
    let bound = firsts[2] + 1;
    let retired = retire_segments_through(dir.path(), bound, None).unwrap();
    assert_eq!(retired.len(), 2);
    assert_eq!(first_seqs(dir.path()), firsts[2..]);
    assert_eq!(journal_first_seq(dir.path()).unwrap(), Some(firsts[2]));
    assert!(retire_segments_through(dir.path(), bound, None)
        .unwrap()
        .is_empty());

    // Reads from the new start, refuses before it, verifies what is left.
    let tail = read_all(dir.path());
    assert_eq!(tail, records[(firsts[2] - 1) as usize..]);
    let mut reader = JournalReader::open(dir.path()).unwrap();
    match reader.seek(firsts[2] - 1) {
        Err(JournalError::SeqNotInJournal {
            requested,
            first_seq,
        }) => assert_eq!((requested, first_seq), (firsts[2] - 1, firsts[2])),
        other => panic!("expected SeqNotInJournal, got {other:?}"),
    }
    let report = verify(dir.path()).unwrap();
    assert_eq!(report.first_seq, Some(firsts[2]));
    assert_eq!(report.records, tail.len() as u64);

    // Reopened, it goes on from its last record.
    let (mut journal, _) = Journal::open(dir.path(), small_segments()).unwrap();
    assert_eq!(journal.next_seq(), records.len() as u64 + 1);
    append_records(&mut journal, records.len() as u64 + 1, &[10, 20]);
    journal.commit(ladder_journal::Durability::Sync).unwrap();
    drop(journal);
    assert_eq!(read_all(dir.path()).len(), tail.len() + 2);
}

#[test]
fn the_last_segment_stays_whatever_the_bound_and_archived_segments_move() {
    let dir = tempfile::tempdir().unwrap();
    let archive = tempfile::tempdir().unwrap();
    write_records(dir.path(), &varied_lens(300));
    let firsts = first_seqs(dir.path());
    let retired = retire_segments_through(dir.path(), u64::MAX, Some(archive.path())).unwrap();
    assert_eq!(retired.len(), firsts.len() - 1);
    assert_eq!(first_seqs(dir.path()), [*firsts.last().unwrap()]);
    let mut archived: Vec<String> = std::fs::read_dir(archive.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    archived.sort();
    let expected: Vec<String> = segment_names(&firsts[..firsts.len() - 1]);
    assert_eq!(archived, expected, "every retired segment, by name");
    assert!(verify(dir.path()).is_ok());
}

fn segment_names(firsts: &[u64]) -> Vec<String> {
    firsts.iter().map(|f| format!("{f:020}.seg")).collect()
}

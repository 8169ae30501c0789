//! Appending and reading back: round trips across rollovers, reopening, sequence rules, limits.

mod common;

use common::*;
use ladder_journal::layout::RECORD_PAYLOAD_MAX_BYTES;
use ladder_journal::{verify, Durability, Journal, JournalError, JournalOptions, JournalReader};

#[test]
fn records_round_trip_across_several_segment_rollovers() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_records(dir.path(), &varied_lens(200));

    assert!(segment_paths(dir.path()).len() >= 5);
    assert_eq!(read_all(dir.path()), written);
}

#[test]
fn verify_counts_records_bytes_and_types() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_records(dir.path(), &varied_lens(200));

    let report = verify(dir.path()).unwrap();

    assert_eq!(report.segments, segment_paths(dir.path()).len());
    assert_eq!(report.records, 200);
    assert_eq!(report.first_seq, Some(1));
    assert_eq!(report.last_seq, Some(200));
    assert_eq!(report.first_timestamp_ns, Some(written[0].timestamp_ns));
    assert_eq!(report.last_timestamp_ns, Some(written[199].timestamp_ns));
    let payload_bytes: usize = written.iter().map(|record| record.payload.len()).sum();
    assert_eq!(report.payload_bytes, payload_bytes as u64);
    assert_eq!(report.records_by_type.values().sum::<u64>(), 200);
    assert_eq!(report.records_by_type[&0], 66);
    assert_eq!(report.torn_tail, None);
}

#[test]
fn reopened_journal_continues_at_the_next_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let mut written = write_records(dir.path(), &varied_lens(50));

    let (mut journal, report) = Journal::open(dir.path(), small_segments()).unwrap();
    assert_eq!(report.last_seq, Some(50));
    assert_eq!(report.torn_tail, None);
    assert_eq!(journal.last_seq(), 50);
    assert_eq!(journal.first_seq(), Some(1));
    written.extend(append_records(&mut journal, 51, &varied_lens(30)));
    journal.commit(Durability::Sync).unwrap();
    drop(journal);

    assert_eq!(read_all(dir.path()), written);
}

#[test]
fn append_out_of_sequence_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (mut journal, _) = Journal::open(dir.path(), small_segments()).unwrap();
    journal.append(1, 10, 0, b"one").unwrap();

    let error = journal.append(3, 30, 0, b"three").unwrap_err();

    assert!(matches!(
        error,
        JournalError::SequenceNotNext {
            expected: 2,
            got: 3
        }
    ));
    assert_eq!(journal.last_seq(), 1);
    journal.append(2, 20, 0, b"two").unwrap();
    drop(journal);
    let seqs: Vec<u64> = read_all(dir.path()).iter().map(|r| r.seq).collect();
    assert_eq!(seqs, vec![1, 2]);
}

#[test]
fn empty_journal_expects_sequence_one() {
    let dir = tempfile::tempdir().unwrap();
    let (mut journal, report) = Journal::open(dir.path(), small_segments()).unwrap();

    assert_eq!(report.records, 0);
    assert_eq!(journal.last_seq(), 0);
    assert_eq!(journal.first_seq(), None);
    assert!(matches!(
        journal.append(7, 0, 0, b"x"),
        Err(JournalError::SequenceNotNext {
            expected: 1,
            got: 7
        })
    ));
}

#[test]
fn empty_payloads_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_records(dir.path(), &[0, 0, 5, 0]);

    assert_eq!(read_all(dir.path()), written);
}

#[test]
fn append_with_encodes_in_place_and_keeps_only_the_bytes_used() {
    let dir = tempfile::tempdir().unwrap();
    let (mut journal, _) = Journal::open(dir.path(), small_segments()).unwrap();

    let written = journal
        .append_with(1, 100, 4, 64, |area: &mut [u8]| {
            area.fill(0xAA);
            area[..3].copy_from_slice(b"abc");
            Ok::<usize, std::io::Error>(3)
        })
        .unwrap();
    journal.append(2, 200, 5, b"next").unwrap();
    drop(journal);

    assert_eq!(written, 3);
    let records = read_all(dir.path());
    assert_eq!(records[0].payload, b"abc");
    assert_eq!(records[0].record_type, 4);
    assert_eq!(records[1].payload, b"next");
    assert!(verify(dir.path()).unwrap().torn_tail.is_none());
}

#[test]
fn failed_encoding_appends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (mut journal, _) = Journal::open(dir.path(), small_segments()).unwrap();

    let error = journal
        .append_with(1, 100, 4, 64, |area: &mut [u8]| {
            area.fill(0xAA);
            Err(std::io::Error::other("no room"))
        })
        .unwrap_err();
    let too_long = journal
        .append_with(1, 100, 4, 8, |_: &mut [u8]| Ok::<usize, std::io::Error>(9))
        .unwrap_err();
    journal.append(1, 100, 4, b"kept").unwrap();
    drop(journal);

    assert!(matches!(error, JournalError::Encode(_)));
    assert!(matches!(
        too_long,
        JournalError::EncodedTooLong {
            written: 9,
            payload_len_max: 8
        }
    ));
    assert_eq!(read_all(dir.path())[0].payload, b"kept");
    assert!(verify(dir.path()).unwrap().torn_tail.is_none());
}

#[test]
fn payload_larger_than_a_segment_can_hold_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (mut journal, _) = Journal::open(dir.path(), small_segments()).unwrap();
    let payload_max = journal.record_payload_max_bytes();

    let error = journal
        .append(1, 0, 0, &vec![1; payload_max + 1])
        .unwrap_err();
    journal.append(1, 0, 0, &vec![1; payload_max]).unwrap();
    journal.append(2, 0, 0, &vec![2; payload_max]).unwrap();
    drop(journal);

    assert_eq!(payload_max, 4096 - 64 - 32);
    assert!(matches!(error, JournalError::PayloadTooLarge { .. }));
    assert_eq!(read_all(dir.path()).len(), 2);
}

#[test]
fn payload_over_one_mebibyte_is_refused_with_default_segments() {
    let dir = tempfile::tempdir().unwrap();
    let (mut journal, _) = Journal::open(dir.path(), JournalOptions::default()).unwrap();

    let error = journal
        .append(1, 0, 0, &vec![0; RECORD_PAYLOAD_MAX_BYTES + 1])
        .unwrap_err();
    journal
        .append(1, 0, 0, &vec![9; RECORD_PAYLOAD_MAX_BYTES])
        .unwrap();
    journal.commit(Durability::Sync).unwrap();
    drop(journal);

    assert!(matches!(
        error,
        JournalError::PayloadTooLarge {
            payload_max: RECORD_PAYLOAD_MAX_BYTES,
            ..
        }
    ));
    assert_eq!(
        read_all(dir.path())[0].payload.len(),
        RECORD_PAYLOAD_MAX_BYTES
    );
}

#[test]
fn sync_commits_across_rollovers_keep_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let (mut journal, _) = Journal::open(dir.path(), small_segments()).unwrap();
    let mut written = Vec::new();
    for batch in 0..20u64 {
        let lens = varied_lens(17);
        written.extend(append_records(&mut journal, batch * 17 + 1, &lens));
        let durability = if batch % 2 == 0 {
            Durability::Sync
        } else {
            Durability::Async
        };
        journal.commit(durability).unwrap();
    }
    drop(journal);

    assert_eq!(read_all(dir.path()), written);
}

#[test]
fn segments_left_behind_under_async_commits_are_flushed_in_the_background_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (mut journal, _) = Journal::open(dir.path(), small_segments()).unwrap();
    let mut written = Vec::new();
    for batch in 0..30u64 {
        written.extend(append_records(&mut journal, batch * 9 + 1, &[700; 9]));
        journal.commit(Durability::Async).unwrap();
    }
    assert!(segment_paths(dir.path()).len() >= 30, "many rollovers");
    let ticket = journal
        .begin_commit()
        .unwrap()
        .expect("left segments to wait for");
    ticket.complete().unwrap();
    written.extend(append_records(&mut journal, 30 * 9 + 1, &[5]));
    journal.commit(Durability::Sync).unwrap();
    drop(journal);

    assert_eq!(read_all(dir.path()), written);
    let (reopened, report) = Journal::open(dir.path(), small_segments()).unwrap();
    assert_eq!(reopened.last_seq(), 30 * 9 + 1);
    assert!(report.torn_tail.is_none());
}

#[test]
fn rollovers_take_the_spare_segment_made_ahead_and_leave_no_file_behind() {
    let dir = tempfile::tempdir().unwrap();
    let spare = ladder_journal::journal_dir(dir.path()).join("next-segment.tmp");
    let (mut journal, _) = Journal::open(dir.path(), small_segments()).unwrap();
    let mut written = append_records(&mut journal, 1, &[200]);
    let mut seq = 2;
    for segment in 1..=4usize {
        // Past half of the segment, the next one is made ahead on a helper thread.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !spare.exists() {
            assert!(std::time::Instant::now() < deadline, "no spare was made");
            if segment_paths(dir.path()).len() == segment {
                written.extend(append_records(&mut journal, seq, &[200]));
                seq += 1;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(
            segment_paths(dir.path()).len(),
            segment,
            "made before the rollover"
        );
        // Once the helper has finished, fill the segment: the rollover renames the spare
        // into place.
        while spare_thread_running() {
            assert!(
                std::time::Instant::now() < deadline,
                "the spare was not finished"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        while segment_paths(dir.path()).len() == segment {
            written.extend(append_records(&mut journal, seq, &[200]));
            seq += 1;
        }
        assert!(!spare.exists(), "the spare became segment {}", segment + 1);
        journal.commit(Durability::Sync).unwrap();
    }
    drop(journal);
    assert!(!spare.exists(), "nothing left behind");
    assert_eq!(read_all(dir.path()), written);
    let (reopened, report) = Journal::open(dir.path(), small_segments()).unwrap();
    assert_eq!(reopened.last_seq(), written.len() as u64);
    assert!(report.torn_tail.is_none());
    assert_eq!(verify(dir.path()).unwrap().records, written.len() as u64);
}

/// Whether this process has a thread named `journal-spare` (Linux: /proc/self/task).
fn spare_thread_running() -> bool {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .any(|name| name.trim() == "journal-spare")
}

#[test]
fn a_spare_left_by_a_crash_is_removed_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_records(dir.path(), &[100, 200]);
    let spare = ladder_journal::journal_dir(dir.path()).join("next-segment.tmp");
    std::fs::write(&spare, vec![0u8; 4096]).unwrap();
    let (journal, report) = Journal::open(dir.path(), small_segments()).unwrap();
    assert!(!spare.exists());
    assert!(report.torn_tail.is_none());
    assert_eq!(journal.last_seq(), 2);
    drop(journal);
    assert_eq!(read_all(dir.path()), written);
}

#[test]
fn seek_positions_the_reader_at_the_requested_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_records(dir.path(), &varied_lens(200));
    let mut reader = JournalReader::open(dir.path()).unwrap();

    reader.seek(137).unwrap();
    let rest: Vec<_> = reader.by_ref().collect::<Result<_, _>>().unwrap();

    assert_eq!(rest, written[136..]);
    assert!(matches!(
        reader.seek(0),
        Err(JournalError::SeqNotInJournal {
            requested: 0,
            first_seq: 1
        })
    ));
}

#[test]
fn second_writer_is_refused_while_the_first_is_open() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _) = Journal::open(dir.path(), small_segments()).unwrap();

    let second = Journal::open(dir.path(), small_segments());

    assert!(matches!(second, Err(JournalError::Locked { .. })));
    drop(journal);
    assert!(Journal::open(dir.path(), small_segments()).is_ok());
}

#[test]
fn invalid_segment_size_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let options = JournalOptions {
        segment_size_bytes: 4097,
    };

    assert!(matches!(
        Journal::open(dir.path(), options),
        Err(JournalError::InvalidOptions(_))
    ));
}

#[test]
fn segment_files_are_named_by_their_first_sequence() {
    let dir = tempfile::tempdir().unwrap();
    write_records(dir.path(), &varied_lens(200));

    let names: Vec<String> = segment_paths(dir.path())
        .iter()
        .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();

    assert_eq!(names[0], "00000000000000000001.seg");
    let second_first_seq: u64 = names[1].trim_end_matches(".seg").parse().unwrap();
    let frames_in_first = frames_in(&segment_paths(dir.path())[0]).len() as u64;
    assert_eq!(second_first_seq, frames_in_first + 1);
}

#[test]
fn journal_and_reader_can_move_to_other_threads() {
    fn assert_send<T: Send>() {}

    assert_send::<Journal>();
    assert_send::<JournalReader>();
}

#[test]
fn a_commit_begun_here_and_completed_elsewhere_covers_every_earlier_append() {
    let dir = tempfile::tempdir().unwrap();
    let options = JournalOptions {
        segment_size_bytes: 64 * 1024,
    };
    let (mut journal, _) = Journal::open(dir.path(), options).unwrap();
    assert!(
        journal.begin_commit().unwrap().is_none(),
        "nothing to flush"
    );
    let payload = vec![7u8; 3000];
    let mut tickets = Vec::new();
    for seq in 1..=60u64 {
        journal.append(seq, seq * 10, 1, &payload).unwrap();
        if seq % 7 == 0 {
            tickets.push(journal.begin_commit().unwrap().expect("appends to flush"));
        }
    }
    assert!(
        segment_paths(dir.path()).len() >= 2,
        "the appends rolled over"
    );
    tickets.push(journal.begin_commit().unwrap().expect("the tail"));
    assert!(journal.begin_commit().unwrap().is_none(), "all handed out");
    let flusher = std::thread::spawn(move || {
        for ticket in tickets {
            ticket.complete().unwrap();
        }
    });
    flusher.join().unwrap();
    drop(journal);
    let records = read_all(dir.path());
    assert_eq!(records.len(), 60);
    assert_eq!(records.last().map(|r| r.seq), Some(60));
}

/// A segment missing from the middle of the journal is a gap the reader reports, as
/// `verify` does, not an end of the data after which it stops quietly (what `journal dump`,
/// `stats` and `state-hash` read).
#[test]
fn a_segment_missing_from_the_middle_is_a_gap_not_the_end() {
    let dir = tempfile::tempdir().unwrap();
    write_records(dir.path(), &varied_lens(200));
    let segments = segment_paths(dir.path());
    assert!(segments.len() >= 3);
    std::fs::remove_file(&segments[1]).unwrap();

    let mut reader = JournalReader::open(dir.path()).unwrap();
    let outcome = loop {
        match reader.poll() {
            Ok(Some(_)) => continue,
            Ok(None) => break None,
            Err(e) => break Some(e),
        }
    };
    match outcome {
        Some(JournalError::Corrupt { reason, .. }) => {
            assert!(reason.to_string().starts_with("sequence gap"), "{reason}")
        }
        other => panic!("a gap read as {other:?}"),
    }
    assert!(verify(dir.path()).is_err());
}

//! Recovery: a torn tail is cut away and reported; damage before the last good record is an
//! error naming the segment, the offset and the repair command; `repair` fixes it.

mod common;

use std::fs;
use std::path::Path;

use common::*;
use ladder_journal::layout::{self, FrameFields, SegmentHeader};
use ladder_journal::{
    latest_valid_snapshot, repair, truncate_after, verify, write_snapshot, Fault, Journal,
    JournalError, JournalReader,
};

const RECORDS: usize = 120;

/// Writes the standard journal, damages its last record with `damage`, and checks that
/// reopening keeps exactly the records before it and can append again.
fn assert_last_record_damage_is_a_torn_tail(damage: impl FnOnce(&FrameSpot)) {
    let dir = tempfile::tempdir().unwrap();
    let written = write_records(dir.path(), &varied_lens(RECORDS));
    let last = all_frames(dir.path()).pop().unwrap();
    damage(&last);

    let verified = verify(dir.path()).unwrap();
    let torn = verified.torn_tail.expect("verify reports the torn tail");
    assert_eq!(
        (torn.segment.as_path(), torn.offset),
        (last.path.as_path(), last.offset)
    );
    assert_eq!(verified.last_seq, Some(RECORDS as u64 - 1));

    let (mut journal, report) = Journal::open(dir.path(), small_segments()).unwrap();
    let torn = report.torn_tail.expect("recovery reports the torn tail");
    assert_eq!(torn.segment, last.path);
    assert_eq!(torn.offset, last.offset);
    assert!(torn.bytes_dropped > 0);
    assert_eq!(report.last_seq, Some(RECORDS as u64 - 1));
    assert_eq!(journal.last_seq(), RECORDS as u64 - 1);
    let again = append_records(&mut journal, RECORDS as u64, &[11]);
    drop(journal);

    let mut expected = written[..RECORDS - 1].to_vec();
    expected.extend(again);
    assert_eq!(read_all(dir.path()), expected);
    assert_eq!(verify(dir.path()).unwrap().torn_tail, None);
}

#[test]
fn partial_frame_header_is_a_torn_tail() {
    assert_last_record_damage_is_a_torn_tail(|last| {
        let keep = 12;
        let zeros = vec![0; (last.end() - last.offset) as usize - keep];
        patch(&last.path, last.offset + keep as u64, &zeros);
    });
}

#[test]
fn partial_payload_is_a_torn_tail() {
    assert_last_record_damage_is_a_torn_tail(|last| {
        let payload_start = last.offset + layout::FRAME_HEADER_BYTES as u64;
        let cut = payload_start + last.payload_len / 2;
        patch(&last.path, cut, &vec![0; (last.end() - cut) as usize]);
    });
}

#[test]
fn bad_checksum_on_the_last_record_is_a_torn_tail() {
    assert_last_record_damage_is_a_torn_tail(|last| {
        flip_byte(&last.path, last.offset + layout::FRAME_HEADER_BYTES as u64);
    });
}

#[test]
fn zeroed_frame_word_over_a_written_body_is_a_torn_tail() {
    assert_last_record_damage_is_a_torn_tail(|last| {
        patch(&last.path, last.offset, &[0; 8]);
    });
}

#[test]
fn file_cut_short_inside_the_last_record_is_a_torn_tail() {
    assert_last_record_damage_is_a_torn_tail(|last| {
        let file = fs::OpenOptions::new().write(true).open(&last.path).unwrap();
        file.set_len(last.offset + 20).unwrap();
    });
}

#[test]
fn garbage_after_the_last_record_is_cut_away() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_records(dir.path(), &varied_lens(RECORDS));
    let last = all_frames(dir.path()).pop().unwrap();
    let garbage_at = layout::align_up(last.end() as usize) as u64;
    assert!(garbage_at + 64 <= TEST_SEGMENT_BYTES);
    patch(&last.path, garbage_at + 16, b"\xde\xad\xbe\xef garbage");

    let (journal, report) = Journal::open(dir.path(), small_segments()).unwrap();
    drop(journal);

    let torn = report.torn_tail.unwrap();
    assert_eq!(torn.offset, garbage_at);
    assert!(
        matches!(torn.reason, Fault::BytesAfterEnd { first_nonzero_offset } if first_nonzero_offset == garbage_at + 16)
    );
    assert_eq!(read_all(dir.path()), written);
    assert!(peek(&last.path, garbage_at, 64).iter().all(|&b| b == 0));
}

/// A rollover that took the spare segment renames it into place with its header written
/// through the mapping; on a power loss before the next synced commit the name may reach the
/// disk without the header. Nothing in that segment was acknowledged, so it is a torn tail.
#[test]
fn last_segment_whose_header_never_reached_the_disk_is_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_records(dir.path(), &varied_lens(RECORDS));
    let next_seq = written.len() as u64 + 1;
    let renamed = ladder_journal::journal_dir(dir.path()).join(format!("{next_seq:020}.seg"));
    let mut contents = vec![0u8; TEST_SEGMENT_BYTES as usize];
    // One record's bytes made it, the header did not.
    contents[64..80].copy_from_slice(&[0x5a; 16]);
    fs::write(&renamed, &contents).unwrap();

    // Readers (`ladder journal dump` before the service restarts) see the end of the data,
    // as recovery does, not corruption.
    assert_eq!(read_all(dir.path()), written);
    let mut reader = ladder_journal::JournalReader::open(dir.path()).unwrap();
    reader.seek(written.len() as u64).unwrap();
    assert_eq!(
        reader.poll().unwrap().map(|r| r.seq),
        Some(written.len() as u64)
    );
    assert!(reader.poll().unwrap().is_none());
    assert!(reader.poll().unwrap().is_none(), "and stays there");

    let (journal, report) = Journal::open(dir.path(), small_segments()).unwrap();
    assert_eq!(journal.last_seq(), written.len() as u64);
    drop(journal);

    let torn = report.torn_tail.unwrap();
    assert_eq!(torn.segment, renamed);
    assert_eq!(torn.offset, 0);
    assert!(!renamed.exists(), "the headerless segment is removed");
    assert_eq!(read_all(dir.path()), written);
}

/// A last segment whose first bytes are neither zeros nor the magic (a file overwritten with
/// other data, not a header write that did not finish) is corruption: the start refuses it
/// and keeps it, instead of cutting it as a torn tail and starting without its records.
#[test]
fn last_segment_with_foreign_bytes_for_a_header_is_corruption_not_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    write_records(dir.path(), &varied_lens(RECORDS));
    let segments = segment_paths(dir.path());
    let last = segments.last().unwrap().clone();
    // A short file of bytes that no write of ours makes (no valid frame inside).
    let foreign: Vec<u8> = (0..100_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8 | 1)
        .collect();
    fs::write(&last, &foreign).unwrap();

    let error = verify(dir.path()).unwrap_err();
    assert!(
        matches!(error, JournalError::Corrupt { offset: 0, reason: Fault::BadMagic, ref segment, .. } if *segment == last),
        "{error}"
    );
    let error = Journal::open(dir.path(), small_segments()).unwrap_err();
    assert!(matches!(error, JournalError::Corrupt { .. }), "{error}");
    assert_eq!(
        fs::read(&last).unwrap(),
        foreign,
        "the segment is kept as it was"
    );

    // Foreign bytes in a file too short to hold a header: corruption too.
    fs::write(&last, b"#!/bin/sh\n").unwrap();
    assert!(verify(dir.path()).is_err());
    // A header write that stopped part-way (the magic's first bytes, then zeros) is torn.
    let mut partial = vec![0u8; TEST_SEGMENT_BYTES as usize];
    partial[..3].copy_from_slice(&layout::SEGMENT_MAGIC[..3]);
    fs::write(&last, &partial).unwrap();
    assert!(verify(dir.path()).unwrap().torn_tail.is_some());
}

#[test]
fn empty_segment_that_does_not_continue_the_sequence_is_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_records(dir.path(), &varied_lens(RECORDS));
    // A segment for a sequence that was never reached (its records never made it to disk).
    let stray = ladder_journal::journal_dir(dir.path()).join("00000000000000000500.seg");
    let header = SegmentHeader {
        segment_size_bytes: TEST_SEGMENT_BYTES,
        first_seq: 500,
    };
    fs::write(&stray, header.encode()).unwrap();

    let (journal, report) = Journal::open(dir.path(), small_segments()).unwrap();
    drop(journal);

    let torn = report.torn_tail.unwrap();
    assert_eq!(torn.segment, stray);
    assert_eq!(torn.offset, 0);
    assert!(matches!(
        torn.reason,
        Fault::SequenceGap {
            expected: 121,
            found: 500
        }
    ));
    assert!(!stray.exists());
    assert_eq!(read_all(dir.path()), written);
}

/// Writes the standard journal and flips a payload byte of record 3 (in the first segment).
fn journal_with_bad_third_record(data_dir: &Path) -> FrameSpot {
    write_records(data_dir, &varied_lens(RECORDS));
    let third = all_frames(data_dir)[2].clone();
    flip_byte(
        &third.path,
        third.offset + layout::FRAME_HEADER_BYTES as u64 + 1,
    );
    third
}

#[test]
fn corruption_before_the_last_good_record_fails_open_naming_segment_offset_and_repair() {
    let dir = tempfile::tempdir().unwrap();
    let third = journal_with_bad_third_record(dir.path());

    let error = Journal::open(dir.path(), small_segments()).unwrap_err();

    let JournalError::Corrupt {
        segment,
        offset,
        reason,
        ..
    } = &error
    else {
        panic!("expected Corrupt, got {error}");
    };
    assert_eq!((segment, *offset), (&third.path, third.offset));
    assert!(matches!(reason, Fault::ChecksumMismatch { .. }));
    let message = error.to_string();
    assert!(
        message.contains(&third.path.display().to_string()),
        "{message}"
    );
    assert!(
        message.contains(&format!("offset {}", third.offset)),
        "{message}"
    );
    let repair_command = format!("ladder journal repair --data-dir {}", dir.path().display());
    assert!(message.contains(&repair_command), "{message}");
}

#[test]
fn verify_and_readers_fail_on_corruption_before_the_last_good_record() {
    let dir = tempfile::tempdir().unwrap();
    let third = journal_with_bad_third_record(dir.path());

    let verified = verify(dir.path()).unwrap_err();
    let mut reader = JournalReader::open(dir.path()).unwrap();
    let read: Vec<_> = reader.by_ref().take(3).collect();

    assert!(matches!(verified, JournalError::Corrupt { offset, .. } if offset == third.offset));
    assert_eq!(read.len(), 3);
    assert!(read[0].is_ok() && read[1].is_ok());
    assert!(
        matches!(&read[2], Err(JournalError::Corrupt { offset, .. }) if *offset == third.offset)
    );
}

#[test]
fn repair_keeps_a_bad_copy_and_leaves_the_good_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let third = journal_with_bad_third_record(dir.path());
    let damaged_bytes = fs::read(&third.path).unwrap();
    let segments_before = segment_paths(dir.path());

    let report = repair(dir.path()).unwrap();

    let repaired = report.repaired.unwrap();
    assert_eq!(
        (repaired.segment.as_path(), repaired.offset),
        (third.path.as_path(), third.offset)
    );
    assert!(!repaired.torn_tail);
    assert_eq!(repaired.valid_records_dropped, RECORDS as u64 - 3);
    assert_eq!(report.last_seq, Some(2));
    let bad_copy = third.path.with_extension("seg.bad");
    assert_eq!(fs::read(&bad_copy).unwrap(), damaged_bytes);
    assert_eq!(repaired.backups.len(), segments_before.len());
    for later in &segments_before[1..] {
        assert!(!later.exists());
        assert!(later.with_extension("seg.bad").exists());
    }
    let (journal, recovery) = Journal::open(dir.path(), small_segments()).unwrap();
    assert_eq!(journal.last_seq(), 2);
    assert_eq!(recovery.torn_tail, None);
    drop(journal);
    let seqs: Vec<u64> = read_all(dir.path()).iter().map(|r| r.seq).collect();
    assert_eq!(seqs, vec![1, 2]);
    assert!(verify(dir.path()).is_ok());
}

#[test]
fn zeroed_frame_word_before_later_records_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    write_records(dir.path(), &varied_lens(RECORDS));
    let fifth = all_frames(dir.path())[4].clone();
    patch(&fifth.path, fifth.offset, &[0; 8]);

    let error = Journal::open(dir.path(), small_segments()).unwrap_err();

    assert!(matches!(
        error,
        JournalError::Corrupt { offset, reason: Fault::BytesAfterEnd { .. }, .. } if offset == fifth.offset
    ));
}

#[test]
fn record_with_a_good_checksum_but_the_wrong_sequence_is_a_gap() {
    let dir = tempfile::tempdir().unwrap();
    write_records(dir.path(), &varied_lens(RECORDS));
    let fifth = all_frames(dir.path())[4].clone();
    rewrite_seq(&fifth, 50);

    let error = verify(dir.path()).unwrap_err();

    assert!(matches!(
        error,
        JournalError::Corrupt {
            reason: Fault::SequenceGap { expected: 5, found: 50 },
            offset,
            ..
        } if offset == fifth.offset
    ));
}

#[test]
fn gap_on_the_last_record_is_corruption_too() {
    let dir = tempfile::tempdir().unwrap();
    write_records(dir.path(), &varied_lens(RECORDS));
    let last = all_frames(dir.path()).pop().unwrap();
    rewrite_seq(&last, 1_000);

    let error = Journal::open(dir.path(), small_segments()).unwrap_err();

    assert!(matches!(
        error,
        JournalError::Corrupt {
            reason: Fault::SequenceGap {
                expected: 120,
                found: 1_000
            },
            ..
        }
    ));
}

#[test]
fn missing_middle_segment_is_a_sequence_gap() {
    let dir = tempfile::tempdir().unwrap();
    write_records(dir.path(), &varied_lens(RECORDS));
    let segments = segment_paths(dir.path());
    let expected_seq = 1 + frames_in(&segments[0]).len() as u64;
    fs::remove_file(&segments[1]).unwrap();

    let error = Journal::open(dir.path(), small_segments()).unwrap_err();

    let JournalError::Corrupt {
        segment,
        offset: 0,
        reason: Fault::SequenceGap { expected, .. },
        ..
    } = error
    else {
        panic!("expected a sequence gap at a segment header, got {error}");
    };
    assert_eq!(segment, segments[2]);
    assert_eq!(expected, expected_seq);
}

#[test]
fn damaged_segment_header_before_good_records_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    write_records(dir.path(), &varied_lens(RECORDS));
    let segments = segment_paths(dir.path());
    flip_byte(&segments[1], 0);

    let error = verify(dir.path()).unwrap_err();

    assert!(matches!(
        error,
        JournalError::Corrupt { offset: 0, reason: Fault::BadMagic, ref segment, .. } if *segment == segments[1]
    ));
}

#[test]
fn truncate_after_keeps_exactly_the_records_up_to_the_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_records(dir.path(), &varied_lens(RECORDS));

    truncate_after(dir.path(), 40).unwrap();

    assert_eq!(read_all(dir.path()), written[..40]);
    let (mut journal, report) = Journal::open(dir.path(), small_segments()).unwrap();
    assert_eq!(report.torn_tail, None);
    assert_eq!(journal.last_seq(), 40);
    append_records(&mut journal, 41, &[5]);
}

#[test]
fn repair_and_truncation_set_aside_snapshots_past_the_journals_new_end() {
    let dir = tempfile::tempdir().unwrap();
    journal_with_bad_third_record(dir.path());
    for seq in [1, 2, 60, RECORDS as u64] {
        write_snapshot(dir.path(), seq, &seq.to_le_bytes()).unwrap();
    }
    let report = repair(dir.path()).unwrap();
    assert_eq!(report.last_seq, Some(2));
    // Recovery must not start from a state the journal no longer holds.
    assert_eq!(report.snapshots_set_aside.len(), 2);
    for bad in &report.snapshots_set_aside {
        assert!(
            bad.to_string_lossy().ends_with(".snap.bad"),
            "{}",
            bad.display()
        );
        assert!(bad.exists());
    }
    assert_eq!(latest_valid_snapshot(dir.path()).unwrap().unwrap().seq, 2);

    let dir = tempfile::tempdir().unwrap();
    write_records(dir.path(), &varied_lens(RECORDS));
    for seq in [10, 40, 41, 100] {
        write_snapshot(dir.path(), seq, &seq.to_le_bytes()).unwrap();
    }
    truncate_after(dir.path(), 40).unwrap();
    assert_eq!(latest_valid_snapshot(dir.path()).unwrap().unwrap().seq, 40);
}

#[test]
fn repair_of_a_sound_journal_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_records(dir.path(), &varied_lens(RECORDS));

    let report = repair(dir.path()).unwrap();

    assert_eq!(report.repaired, None);
    assert_eq!(report.last_seq, Some(RECORDS as u64));
    assert_eq!(read_all(dir.path()), written);
}

/// Rewrites a frame's sequence number and fixes its checksum, so the frame itself is valid.
fn rewrite_seq(frame: &FrameSpot, seq: u64) {
    let len = (frame.end() - frame.offset) as usize;
    let mut bytes = peek(&frame.path, frame.offset, len);
    let mut fields = FrameFields::decode_body(&bytes[layout::FRAME_BODY_OFFSET..]);
    fields.seq = seq;
    fields.encode_into(&mut bytes);
    let checksum = layout::frame_checksum(&bytes[layout::FRAME_BODY_OFFSET..]);
    bytes[4..8].copy_from_slice(&checksum.to_le_bytes());
    patch(&frame.path, frame.offset, &bytes);
}

#[test]
fn non_zero_padding_keeps_the_record_and_is_counted_by_verify() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_records(dir.path(), &[5, 5, 5]);
    let first = all_frames(dir.path())[0].clone();
    patch(&first.path, first.end(), &[0x77]);

    let report = verify(dir.path()).unwrap();

    assert_eq!(report.records, 3);
    assert_eq!(report.records_with_nonzero_padding, 1);
    assert_eq!(report.torn_tail, None);
    assert_eq!(read_all(dir.path()), written);
}

/// The marker a writer leaves when it stops after its final flush: removing it is what a
/// crash (a kill, a power loss) looks like to the next open.
fn forget_clean_stop(data_dir: &Path) {
    fs::remove_file(
        data_dir
            .join("journal")
            .join(ladder_journal::CLEAN_STOP_FILE_NAME),
    )
    .expect("a dropped writer marked its clean stop");
}

#[test]
fn a_dropped_writer_marks_its_clean_stop_and_the_next_open_takes_it() {
    let dir = tempfile::tempdir().unwrap();
    write_records(dir.path(), &varied_lens(5));
    let marker = dir
        .path()
        .join("journal")
        .join(ladder_journal::CLEAN_STOP_FILE_NAME);
    assert!(marker.exists());
    let (journal, _) = Journal::open(dir.path(), small_segments()).unwrap();
    assert!(
        !marker.exists(),
        "a crash of this writer is not a clean stop"
    );
    drop(journal);
    assert!(marker.exists());
}

/// Pages of one flush reach the disk in any order: after a power loss a hole can precede
/// records written after it (none of them answered). After an unclean stop, recovery cuts at
/// the hole by itself and keeps what it cut; `verify` still calls it corruption.
#[test]
fn after_an_unclean_stop_a_hole_in_the_tail_before_later_records_is_cut_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_records(dir.path(), &varied_lens(RECORDS));
    let frames = all_frames(dir.path());
    let hole = frames[RECORDS - 4].clone();
    patch(&hole.path, hole.offset, &[0u8; 16]);
    forget_clean_stop(dir.path());
    assert!(matches!(
        verify(dir.path()),
        Err(JournalError::Corrupt { .. })
    ));

    let (mut journal, report) = Journal::open(dir.path(), small_segments()).unwrap();
    let last_kept = RECORDS as u64 - 4;
    assert_eq!(journal.last_seq(), last_kept);
    let torn = report.torn_tail.expect("the cut is reported");
    assert_eq!(
        (torn.segment, torn.offset),
        (hole.path.clone(), hole.offset)
    );
    let kept: Vec<_> = fs::read_dir(dir.path().join("journal"))
        .unwrap()
        .filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
        .filter(|name| name.contains(".bad"))
        .collect();
    assert!(!kept.is_empty(), "what was cut is kept");
    let again = append_records(&mut journal, last_kept + 1, &[7]);
    drop(journal);
    let mut expected = written[..RECORDS - 4].to_vec();
    expected.extend(again);
    assert_eq!(read_all(dir.path()), expected);
}

#[test]
fn after_a_clean_stop_the_same_hole_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    write_records(dir.path(), &varied_lens(RECORDS));
    let hole = all_frames(dir.path())[RECORDS - 4].clone();
    patch(&hole.path, hole.offset, &[0u8; 16]);

    let error = Journal::open(dir.path(), small_segments()).unwrap_err();
    assert!(
        matches!(&error, JournalError::Corrupt { offset, .. } if *offset == hole.offset),
        "{error}"
    );
}

#[test]
fn a_hole_before_the_last_segments_is_corruption_even_after_an_unclean_stop() {
    let dir = tempfile::tempdir().unwrap();
    let third = journal_with_bad_third_record(dir.path());
    assert!(
        segment_paths(dir.path()).len() > 2,
        "the hole is in an old segment"
    );
    forget_clean_stop(dir.path());

    let error = Journal::open(dir.path(), small_segments()).unwrap_err();
    assert!(
        matches!(&error, JournalError::Corrupt { offset, .. } if *offset == third.offset),
        "{error}"
    );
}

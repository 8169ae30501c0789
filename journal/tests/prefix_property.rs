//! Property: whatever the record sizes and wherever a write is torn, reopening recovers exactly
//! the longest prefix of complete records, and appending continues after it.

mod common;

use std::fs;

use common::*;
use ladder_journal::{repair, verify, Journal, JournalError};
use proptest::prelude::*;

/// How the bytes after the tear point are left.
#[derive(Clone, Copy, Debug)]
enum Tear {
    /// Zeroed (the write never reached the disk).
    Zeroed,
    /// Filled with garbage for a stretch (a half-written sector).
    Garbage(u8),
    /// The file itself ends there.
    FileCut,
}

fn tear_strategy() -> impl Strategy<Value = Tear> {
    prop_oneof![
        Just(Tear::Zeroed),
        (1u8..=255).prop_map(Tear::Garbage),
        Just(Tear::FileCut),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn torn_writes_recover_the_longest_complete_prefix(
        lens in prop::collection::vec(0usize..700, 1..60),
        segment_pick in any::<prop::sample::Index>(),
        offset_pick in any::<prop::sample::Index>(),
        tear in tear_strategy(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let written = write_records(dir.path(), &lens);
        let segments = segment_paths(dir.path());
        let torn_index = segment_pick.index(segments.len());
        let torn_segment = &segments[torn_index];
        let frames = frames_in(torn_segment);
        // Anywhere from the first frame to a little past the last one (marker included).
        let data_end = frames.last().map_or(64, |frame| frame.end() + 16).min(TEST_SEGMENT_BYTES);
        let tear_at = 64 + offset_pick.index((data_end - 64 + 1) as usize) as u64;
        let before = fs::read(torn_segment).unwrap();
        apply_tear(torn_segment, tear_at, tear);
        let after = fs::read(torn_segment).unwrap();
        for later in &segments[torn_index + 1..] {
            fs::remove_file(later).unwrap();
        }
        let records_before: usize = segments[..torn_index]
            .iter()
            .map(|path| frames_in(path).len())
            .sum();
        // A frame survives the tear when none of its bytes changed: past `tear_at` that is
        // rare but possible (zeroing bytes that were zero, garbage equal to what was there).
        let intact = |frame: &&common::FrameSpot| {
            let range = frame.offset as usize..frame.end() as usize;
            after.get(range.clone()) == Some(&before[range])
        };
        let kept = records_before + frames.iter().take_while(intact).count();

        let (mut journal, _) = Journal::open(dir.path(), small_segments()).unwrap();
        prop_assert_eq!(journal.last_seq(), kept as u64);
        let appended = append_records(&mut journal, kept as u64 + 1, &[9]);
        drop(journal);

        let mut expected = written[..kept].to_vec();
        expected.extend(appended);
        prop_assert_eq!(read_all(dir.path()), expected);
        prop_assert!(verify(dir.path()).unwrap().torn_tail.is_none());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn any_flipped_byte_before_the_last_record_is_corruption_that_repair_cuts_away(
        lens in prop::collection::vec(0usize..700, 2..40),
        frame_pick in any::<prop::sample::Index>(),
        byte_pick in any::<prop::sample::Index>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let written = write_records(dir.path(), &lens);
        let frames = all_frames(dir.path());
        let damaged_index = frame_pick.index(frames.len() - 1);
        let damaged = &frames[damaged_index];
        // Any byte of the frame but its padding, which carries nothing.
        let frame_bytes = damaged.end() - damaged.offset;
        flip_byte(&damaged.path, damaged.offset + byte_pick.index(frame_bytes as usize) as u64);

        let opened = Journal::open(dir.path(), small_segments());
        let is_corrupt_at_damage = matches!(
            &opened,
            Err(JournalError::Corrupt { segment, offset, .. })
                if *segment == damaged.path && *offset == damaged.offset
        );
        prop_assert!(is_corrupt_at_damage, "{:?}", opened.map(|_| ()));
        prop_assert!(verify(dir.path()).is_err());

        let repaired = repair(dir.path()).unwrap();
        let kept_last_seq = (damaged_index > 0).then_some(damaged_index as u64);
        prop_assert_eq!(repaired.last_seq, kept_last_seq);
        let (journal, _) = Journal::open(dir.path(), small_segments()).unwrap();
        prop_assert_eq!(journal.last_seq(), damaged_index as u64);
        drop(journal);
        prop_assert_eq!(read_all(dir.path()), written[..damaged_index].to_vec());
    }
}

fn apply_tear(path: &std::path::Path, tear_at: u64, tear: Tear) {
    match tear {
        Tear::Zeroed => {
            let zeros = vec![0; (TEST_SEGMENT_BYTES - tear_at) as usize];
            patch(path, tear_at, &zeros);
        }
        Tear::Garbage(byte) => {
            let zeros = vec![0; (TEST_SEGMENT_BYTES - tear_at) as usize];
            patch(path, tear_at, &zeros);
            let stretch = (TEST_SEGMENT_BYTES - tear_at).min(40) as usize;
            let garbage: Vec<u8> = (0..stretch)
                .map(|i| byte.wrapping_add(i as u8) | 1)
                .collect();
            patch(path, tear_at, &garbage);
        }
        Tear::FileCut => {
            let file = fs::OpenOptions::new().write(true).open(path).unwrap();
            file.set_len(tear_at).unwrap();
        }
    }
}

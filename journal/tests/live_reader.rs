//! A reader in another thread follows the journal while it is written, across rollovers.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::*;
use ladder_journal::{Durability, Journal, JournalReader, Record};

const RECORDS: u64 = 600;
const BURST: u64 = 25;
const DEADLINE: Duration = Duration::from_secs(30);

/// Polls `reader` until `count` records arrived or the deadline passed.
fn follow(mut reader: JournalReader, count: usize) -> Vec<Record> {
    let started = Instant::now();
    let mut seen = Vec::new();
    while seen.len() < count && started.elapsed() < DEADLINE {
        match reader.poll().expect("poll") {
            Some(record) => seen.push(record.to_record()),
            None => thread::sleep(Duration::from_micros(200)),
        }
    }
    seen
}

/// Appends `RECORDS` records in bursts with pauses, so the reader catches up in between.
fn write_in_bursts(journal: &mut Journal) -> Vec<Record> {
    let mut written = Vec::new();
    for burst in 0..RECORDS / BURST {
        let lens = varied_lens(BURST as usize);
        written.extend(append_records(journal, burst * BURST + 1, &lens));
        journal.commit(Durability::Async).unwrap();
        thread::sleep(Duration::from_millis(2));
    }
    written
}

#[test]
fn live_reader_in_another_thread_tails_records_across_rollovers() {
    let dir = tempfile::tempdir().unwrap();
    // The reader starts before the journal exists and waits for its first segment.
    let reader = JournalReader::open(dir.path()).unwrap();
    let follower = thread::spawn(move || follow(reader, RECORDS as usize));

    let (mut journal, _) = Journal::open(dir.path(), small_segments()).unwrap();
    let written = write_in_bursts(&mut journal);
    let seen = follower.join().unwrap();

    assert!(segment_paths(dir.path()).len() > 10);
    assert_eq!(seen, written);
}

#[test]
fn reader_returns_none_at_the_end_and_sees_records_appended_later() {
    let dir = tempfile::tempdir().unwrap();
    let (mut journal, _) = Journal::open(dir.path(), small_segments()).unwrap();
    append_records(&mut journal, 1, &varied_lens(3));
    let mut reader = JournalReader::open(dir.path()).unwrap();

    let first: Vec<u64> = (0..3)
        .map(|_| reader.poll().unwrap().unwrap().seq)
        .collect();
    assert_eq!(reader.poll().unwrap(), None);
    let later = append_records(&mut journal, 4, &varied_lens(100));
    let mut rest = Vec::new();
    while let Some(record) = reader.poll().unwrap() {
        rest.push(record.to_record());
    }

    assert_eq!(first, vec![1, 2, 3]);
    assert_eq!(rest, later);
    assert_eq!(reader.next_seq(), Some(104));
}

#[test]
fn reader_seeking_past_the_end_waits_for_that_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let (mut journal, _) = Journal::open(dir.path(), small_segments()).unwrap();
    append_records(&mut journal, 1, &varied_lens(10));
    let mut reader = JournalReader::open(dir.path()).unwrap();
    reader.seek(50).unwrap();

    assert_eq!(reader.poll().unwrap(), None);
    let later = append_records(&mut journal, 11, &varied_lens(60));

    assert_eq!(reader.poll().unwrap().unwrap().to_record(), later[39]);
}

#[test]
fn a_reader_at_an_unsealed_end_finds_a_segment_made_after_it_without_a_stat_per_poll() {
    // A writer that stopped between making the next segment and sealing the one before: a
    // journal of two segments, whose first one is given to the reader without its end marker,
    // and the second one only later.
    let written = tempfile::tempdir().unwrap();
    let records = write_records(written.path(), &varied_lens(40));
    let segments = segment_paths(written.path());
    assert!(segments.len() >= 2);
    let dir = tempfile::tempdir().unwrap();
    let journal_dir = ladder_journal::journal_dir(dir.path());
    std::fs::create_dir_all(&journal_dir).unwrap();
    let copy = |segment: &std::path::PathBuf| {
        let to = journal_dir.join(segment.file_name().unwrap());
        std::fs::copy(segment, &to).unwrap();
        to
    };
    let first = copy(&segments[0]);
    let frames = frames_in(&first);
    let marker_at = ladder_journal::layout::align_up(frames.last().unwrap().end() as usize) as u64;
    patch(&first, marker_at, &[0; 8]);
    let in_first = frames.len();

    let mut reader = JournalReader::open(dir.path()).unwrap();
    let mut seen: Vec<Record> = (0..in_first)
        .map(|_| reader.poll().unwrap().unwrap().to_record())
        .collect();
    assert_eq!(reader.poll().unwrap(), None);
    let looked = Instant::now();
    copy(&segments[1]);

    // Right after a look, the reader does not look again.
    let at_once = reader.poll().unwrap().map(|record| record.seq);
    if looked.elapsed() < ladder_journal::UNSEALED_END_LOOK_EVERY {
        assert_eq!(at_once, None);
    }
    // It looks again once the interval has passed.
    let in_two = in_first + frames_in(&segments[1]).len();
    let started = Instant::now();
    while seen.len() < in_two && started.elapsed() < DEADLINE {
        match reader.poll().unwrap() {
            Some(record) => seen.push(record.to_record()),
            None => thread::sleep(Duration::from_millis(5)),
        }
    }
    assert_eq!(seen, records[..in_two]);
}

//! A segment's mapped pages do not stay resident behind the writer or a reader: filling a
//! 64 MiB segment leaves at most a few chunks of it in the process's resident set for either
//! mapping, and every record still reads back intact (the pages let go come back from the
//! page cache with the same bytes). Its own test binary: it reads its own `/proc/self/smaps`.

use ladder_journal::{Durability, Journal, JournalOptions, JournalReader};

/// Resident KiB of each mapping of `file` in this process (`/proc/self/smaps`).
fn resident_kib_of(file: &std::path::Path) -> Vec<u64> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let name = file.to_string_lossy();
    let mut out = Vec::new();
    let mut in_mapping = false;
    for line in smaps.lines() {
        let is_header = line
            .split_whitespace()
            .next()
            .is_some_and(|first| first.contains('-') && !first.ends_with(':'));
        if is_header {
            in_mapping = line.ends_with(name.as_ref());
        } else if in_mapping {
            if let Some(rest) = line.strip_prefix("Rss:") {
                out.push(rest.trim().trim_end_matches("kB").trim().parse().unwrap());
            }
        }
    }
    out
}

fn payload(seq: u64) -> Vec<u8> {
    (0..4000u32)
        .map(|i| (seq as u32).wrapping_mul(31).wrapping_add(i) as u8)
        .collect()
}

#[test]
fn pages_far_behind_the_writer_and_a_reader_leave_the_resident_set() {
    let dir = tempfile::tempdir().unwrap();
    let options = JournalOptions {
        segment_size_bytes: 64 << 20,
    };
    let (mut journal, _) = Journal::open(dir.path(), options).unwrap();
    // ~60 MiB of records: most of the one segment.
    let records = 15_000u64;
    for seq in 1..=records {
        journal.append(seq, seq, 1, &payload(seq)).unwrap();
        if seq % 1_000 == 0 {
            journal.commit(Durability::Async).unwrap();
        }
    }
    journal.commit(Durability::Sync).unwrap();
    let mapped = &dir.path().join("journal/00000000000000000001.seg");
    assert_eq!(resident_kib_of(mapped).len(), 1, "the writer's mapping");
    let writer_kib = resident_kib_of(mapped)[0];
    // Kept: 8 MiB behind the writer, up to 8 more before the next step, and what the
    // prefaulter readied ahead (16 MiB).
    assert!(
        writer_kib <= 34 * 1024,
        "writer's mapping: {writer_kib} KiB resident"
    );

    let mut reader = JournalReader::open(dir.path()).unwrap();
    reader.seek(1).unwrap();
    let mut seq = 0;
    while let Some(record) = reader.poll().unwrap() {
        seq += 1;
        assert_eq!(record.seq, seq);
        assert_eq!(record.payload, payload(seq).as_slice(), "record {seq}");
    }
    assert_eq!(seq, records);
    let kib = resident_kib_of(mapped);
    assert_eq!(kib.len(), 2, "the writer's mapping and the reader's");
    let reader_kib = kib.iter().copied().min().unwrap();
    assert!(
        reader_kib <= 18 * 1024,
        "reader's mapping: {kib:?} KiB resident"
    );
}

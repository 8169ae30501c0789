//! Journal benchmarks: appending small records into the mapped segment (page cache only), the
//! cost of a synced commit per batch of records (group commit), the append that rolls over to
//! a new segment, and encoding commands into record payloads (the growing-`Vec` encoder
//! against the sequencer's slice-first one).
//!
//! Run: `cargo bench -p ladder-benches --bench journal`. Journals live in temporary
//! directories under /tmp and are recreated per measured batch, so disk use stays bounded.

// criterion_group! and criterion_main! make public functions that cannot carry docs.
#![allow(missing_docs)]

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use ladder_journal::{Durability, Journal, JournalOptions};
use tempfile::TempDir;

/// Payload size of the benchmarked records (a typical encoded command).
const PAYLOAD_BYTES: usize = 64;
/// Records appended per measured iteration of the append benchmark.
const APPEND_BATCH_RECORDS: u64 = 10_000;
/// Batch sizes for the synced-commit benchmark.
const SYNC_BATCH_RECORDS: [u64; 3] = [1, 64, 1024];
/// Synced batches written into one journal before it is replaced (bounds its size).
const SYNC_BATCHES_PER_JOURNAL: u64 = 256;
/// Timestamp stamped on every record.
const TIMESTAMP_NS: u64 = 1_700_000_000_000_000_000;

fn fresh_journal() -> (TempDir, Journal) {
    let dir = tempfile::Builder::new()
        .prefix("ladder-journal-bench")
        .tempdir_in("/tmp")
        .expect("temp dir in /tmp");
    let (journal, _) = Journal::open(dir.path(), JournalOptions::default()).expect("open");
    (dir, journal)
}

/// A fresh journal whose first segment already exists and is synced.
fn primed_journal(payload: &[u8]) -> (TempDir, Journal) {
    let (dir, mut journal) = fresh_journal();
    append_records(&mut journal, 1, payload);
    journal.commit(Durability::Sync).expect("sync commit");
    (dir, journal)
}

fn append_records(journal: &mut Journal, count: u64, payload: &[u8]) {
    for _ in 0..count {
        let seq = journal.next_seq();
        journal
            .append(seq, TIMESTAMP_NS, 1, payload)
            .expect("append");
    }
}

fn bench_append_async(c: &mut Criterion) {
    let payload = [0x5a_u8; PAYLOAD_BYTES];
    let mut group = c.benchmark_group("journal_append");
    group.throughput(Throughput::Elements(APPEND_BATCH_RECORDS));
    group.bench_function("64B_async_10k_records", |b| {
        b.iter_batched(
            || {
                let (dir, mut journal) = fresh_journal();
                // Create the first segment outside the measurement.
                append_records(&mut journal, 1, &payload);
                (dir, journal)
            },
            |(dir, mut journal)| {
                append_records(&mut journal, APPEND_BATCH_RECORDS, &payload);
                journal.commit(Durability::Async).expect("commit");
                (dir, journal)
            },
            BatchSize::PerIteration,
        );
    });
    group.finish();
}

fn bench_sync_commit(c: &mut Criterion) {
    let payload = [0x5a_u8; PAYLOAD_BYTES];
    let mut group = c.benchmark_group("journal_sync_commit");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(10));
    for batch in SYNC_BATCH_RECORDS {
        group.throughput(Throughput::Elements(batch));
        group.bench_function(format!("64B_batch_{batch}"), |b| {
            b.iter_custom(|iters| {
                let mut elapsed = Duration::ZERO;
                let mut current = primed_journal(&payload);
                for done in 0..iters {
                    if done > 0 && done % SYNC_BATCHES_PER_JOURNAL == 0 {
                        current = primed_journal(&payload);
                    }
                    let journal = &mut current.1;
                    let started = Instant::now();
                    append_records(journal, batch, &payload);
                    journal.commit(Durability::Sync).expect("sync commit");
                    elapsed += started.elapsed();
                }
                elapsed
            });
        });
    }
    group.finish();
}

/// Segment size of the rollover benchmark (small, so that filling one takes little time).
const ROLLOVER_SEGMENT_BYTES: u64 = 256 << 10;
/// Time given to the helper that makes the next segment ahead, before the rollover.
const SPARE_WAIT: Duration = Duration::from_millis(5);

/// The one append that rolls over to a new segment, as the writer's thread sees it: each
/// iteration fills a segment outside the measurement, lets the spare segment be made, and
/// times the append that no longer fits (the criterion times are per rollover; the run takes
/// longer than they add up to).
fn bench_rollover(c: &mut Criterion) {
    let payload = [0x5a_u8; PAYLOAD_BYTES];
    let mut group = c.benchmark_group("journal_rollover");
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(1));
    group.measurement_time(Duration::from_millis(10));
    group.bench_function("append_that_rolls_over", |b| {
        b.iter_custom(|iters| {
            let dir = tempfile::Builder::new()
                .prefix("ladder-journal-bench")
                .tempdir_in("/tmp")
                .expect("temp dir in /tmp");
            let options = JournalOptions {
                segment_size_bytes: ROLLOVER_SEGMENT_BYTES,
            };
            let (mut journal, _) = Journal::open(dir.path(), options).expect("open");
            let segments = |dir: &TempDir| {
                std::fs::read_dir(dir.path().join("journal"))
                    .expect("journal dir")
                    .filter(|e| {
                        e.as_ref()
                            .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".seg"))
                    })
                    .count()
            };
            append_records(&mut journal, 1, &payload);
            let mut elapsed = Duration::ZERO;
            for _ in 0..iters {
                let before = segments(&dir);
                // Fill the segment to within one record of its end.
                let per_record = 32 + PAYLOAD_BYTES as u64;
                while segments(&dir) == before {
                    let room = journal_room(&journal, ROLLOVER_SEGMENT_BYTES, per_record);
                    if room <= 1 {
                        break;
                    }
                    append_records(&mut journal, room - 1, &payload);
                }
                journal.commit(Durability::Sync).expect("sync commit");
                std::thread::sleep(SPARE_WAIT);
                let started = Instant::now();
                let rolled = loop {
                    let seq = journal.next_seq();
                    journal
                        .append(seq, TIMESTAMP_NS, 1, &payload)
                        .expect("append");
                    if segments(&dir) > before {
                        break started.elapsed();
                    }
                };
                elapsed += rolled;
            }
            elapsed
        });
    });
    group.finish();
}

/// Records of `per_record` bytes that still fit in the active segment of `size` bytes,
/// from the records the journal holds (the first segment starts at sequence 1).
fn journal_room(journal: &Journal, size: u64, per_record: u64) -> u64 {
    let per_segment = (size - 64 - 8) / per_record;
    let held = journal.last_seq() % per_segment;
    per_segment - held
}

/// Commands of the engine stream encoded per measured iteration.
const ENCODE_COMMANDS: usize = 10_000;

fn bench_encode(c: &mut Criterion) {
    let stream =
        ladder_benches::engine_stream::generate(&ladder_benches::engine_stream::StreamSpec {
            commands: ENCODE_COMMANDS,
            ..Default::default()
        });
    let commands = stream.measured;
    let mut group = c.benchmark_group("encode");
    group.throughput(Throughput::Elements(commands.len() as u64));
    group.bench_function("vec_writer_10k_commands", |b| {
        let mut out = Vec::new();
        b.iter(|| {
            let mut bytes = 0;
            for command in &commands {
                ladder_sequencer::encode_command(command, &mut out);
                bytes += out.len();
            }
            bytes
        });
    });
    group.bench_function("command_encoder_10k_commands", |b| {
        let mut encoder = ladder_sequencer::CommandEncoder::default();
        b.iter(|| {
            let mut bytes = 0;
            for command in &commands {
                bytes += encoder.encode(command).len();
            }
            bytes
        });
    });
    group.finish();
}

criterion_group!(
    benches,
    bench_append_async,
    bench_sync_commit,
    bench_rollover,
    bench_encode
);
criterion_main!(benches);

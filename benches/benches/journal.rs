//! Journal benchmarks: appending small records into the mapped segment (page cache only), the
//! cost of a synced commit per batch of records (group commit), and encoding commands into
//! record payloads (the growing-`Vec` encoder against the sequencer's slice-first one).
//!
//! Run: `cargo bench -p ladder-benches --bench journal`. Journals live in temporary
//! directories under /tmp and are recreated per measured batch, so disk use stays bounded.

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

criterion_group!(benches, bench_append_async, bench_sync_commit, bench_encode);
criterion_main!(benches);

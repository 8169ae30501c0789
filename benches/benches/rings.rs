//! The sequencer's rings: crossbeam-channel's bounded channel (what the sequencer uses)
//! against an SPSC ring buffer (`rtrb`), handing submission-sized items from one producer
//! thread to one consumer that drains them, as a gateway thread and the sequencer do.
//!
//! Run: `cargo bench -p ladder-benches --bench rings`. Each iteration moves `ITEMS` items;
//! both ends spin (no parking), so the number is the hand-off cost, not wake-up latency.

// criterion_group! and criterion_main! make public functions that cannot carry docs.
#![allow(missing_docs)]
// A full ring hands the item back by value in its error, as both rings' own APIs do.
#![allow(clippy::result_large_err)]

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

/// Items moved per measured iteration.
const ITEMS: u64 = 100_000;
/// Slots of either ring (the sequencer's default ring capacity).
const CAPACITY: usize = 4_096;

/// An item the size of a `Submission` carrying a placement (~320 bytes).
#[derive(Clone, Copy)]
struct Item([u64; 40]);

fn item(i: u64) -> Item {
    let mut words = [0u64; 40];
    words[0] = i;
    Item(words)
}

/// Moves `items` items from a spawned producer that calls `push` (which hands the item back
/// while the ring is full) to this thread, which calls `pop` until all arrived.
fn handoff<Tx: Send + 'static>(
    items: u64,
    (mut tx, mut pop): (Tx, impl FnMut() -> Option<Item>),
    push: fn(&mut Tx, Item) -> Result<(), Option<Item>>,
) -> Duration {
    let started = Instant::now();
    let producer = std::thread::spawn(move || {
        for i in 0..items {
            let mut next = item(i);
            loop {
                match push(&mut tx, next) {
                    Ok(()) => break,
                    Err(Some(back)) => {
                        next = back;
                        std::hint::spin_loop();
                    }
                    Err(None) => return,
                }
            }
        }
    });
    let mut sum = 0u64;
    let mut received = 0;
    while received < items {
        match pop() {
            Some(item) => {
                sum = sum.wrapping_add(item.0[0]);
                received += 1;
            }
            None => std::hint::spin_loop(),
        }
    }
    producer.join().expect("producer");
    std::hint::black_box(sum);
    started.elapsed()
}

fn crossbeam(items: u64) -> Duration {
    let (tx, rx) = crossbeam_channel::bounded::<Item>(CAPACITY);
    handoff(items, (tx, move || rx.try_recv().ok()), |tx, next| {
        tx.try_send(next).map_err(|e| match e {
            crossbeam_channel::TrySendError::Full(back) => Some(back),
            crossbeam_channel::TrySendError::Disconnected(_) => None,
        })
    })
}

fn spsc(items: u64) -> Duration {
    let (tx, mut rx) = rtrb::RingBuffer::<Item>::new(CAPACITY);
    handoff(items, (tx, move || rx.pop().ok()), |tx, next| {
        tx.push(next)
            .map_err(|rtrb::PushError::Full(back)| Some(back))
    })
}

fn rings(c: &mut Criterion) {
    let mut group = c.benchmark_group("ring_handoff");
    group.throughput(Throughput::Elements(ITEMS));
    group.sample_size(20);
    group.bench_function("crossbeam_bounded", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| crossbeam(ITEMS)).sum())
    });
    group.bench_function("rtrb_spsc", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| spsc(ITEMS)).sum())
    });
    group.finish();
}

criterion_group!(benches, rings);
criterion_main!(benches);

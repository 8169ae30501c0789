//! Ladder's engine against orderbook-rs and a naive direct-indexed book (no ledger, the
//! baseline `naive_book`) on the same command stream, in one run.
//!
//! The stream is `engine_stream`'s exchange-core-style one on a single token: one market,
//! Yes orders only, each trader on one side of the book (so self-trade prevention never
//! acts), a thousand resting orders, then 100,000 measured commands (passive placements,
//! cancels, moves and 3 % aggressive orders). Ladder runs the commands as they are;
//! orderbook-rs runs the equivalent calls (`tests/orderbook_ref/mod.rs` describes the mapping
//! and the semantic differences). Each iteration replays the measured commands on a freshly
//! prepared engine or book (preparation and drop are not timed). Throughput is in commands.
//!
//! Before measuring, both are replayed once and must end with the same book.
//!
//! `cargo bench -p ladder-benches --bench engine`

// criterion_group! and criterion_main! make public functions that cannot carry docs.
#![allow(missing_docs)]

#[path = "../tests/orderbook_ref/mod.rs"]
mod orderbook_ref;

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use ladder_benches::engine_replay::prepared_engine;
use ladder_benches::engine_stream::generate;
use orderbook_ref::{
    apply, apply_naive, compare_books, compare_naive, prepared_naive_book, single_token_spec,
    RefStream,
};

/// Measured commands per iteration.
const COMMANDS: usize = 100_000;

fn engine_vs_orderbook_rs(c: &mut Criterion) {
    let stream = generate(&single_token_spec(COMMANDS));
    let reference = RefStream::of(&stream);

    // Apples to apples: the same stream leaves the same book in both.
    let (mut engine, first_seq) = prepared_engine(&stream);
    for (i, command) in stream.measured.iter().enumerate() {
        let seq = first_seq + i as u64;
        engine.apply(seq, seq * 1_000, command);
    }
    let book = reference.prepared_book();
    for op in &reference.measured {
        apply(&book, op).expect("orderbook-rs accepts the call");
    }
    compare_books(&engine, &book).expect("Ladder and orderbook-rs end with the same book");
    let mut naive = prepared_naive_book(&reference);
    for op in &reference.measured {
        apply_naive(&mut naive, op);
    }
    compare_naive(&engine, &naive).expect("Ladder and the naive book end with the same book");
    drop((engine, book, naive));

    let mut group = c.benchmark_group("engine_single_token");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10))
        .throughput(Throughput::Elements(COMMANDS as u64));
    group.bench_function("ladder", |b| {
        b.iter_batched(
            || prepared_engine(&stream),
            |(mut engine, first_seq)| {
                for (i, command) in stream.measured.iter().enumerate() {
                    let seq = first_seq + i as u64;
                    black_box(engine.apply(seq, seq * 1_000, command));
                }
                engine
            },
            BatchSize::LargeInput,
        )
    });
    group.bench_function("orderbook_rs", |b| {
        b.iter_batched(
            || reference.prepared_book(),
            |book| {
                for op in &reference.measured {
                    let _ = black_box(apply(&book, op));
                }
                book
            },
            BatchSize::LargeInput,
        )
    });
    group.bench_function("naive_book", |b| {
        b.iter_batched(
            || prepared_naive_book(&reference),
            |mut book| {
                for op in &reference.measured {
                    black_box(apply_naive(&mut book, op));
                }
                book
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, engine_vs_orderbook_rs);
criterion_main!(benches);

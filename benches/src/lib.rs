//! Benchmark support shared by the criterion benches and `ladder bench engine`: an
//! exchange-core-style command stream and open- and closed-loop replays of it.

pub mod engine_replay;
pub mod engine_stream;
pub mod flush_bench;
pub mod naive_book;
pub mod pipeline_bench;

//! The properties the fuzz targets check, one module per target. Each `check(data)` must not
//! panic on any input; a panic (a parser's own, or a failed round-trip assertion) is a bug.
//!
//! The same files are compiled into the main workspace's tests (`gateway/tests/fuzz_corpus.rs`,
//! `protocol/tests/fuzz_corpus.rs`) with `#[path]`, which run every file of `corpus/<target>/`
//! through them, so CI exercises the seed corpus even without the fuzzer.

pub mod bundler_request;
pub mod engine_commands;
pub mod http_request;
pub mod post_order;
pub mod replication_handshake;
pub mod ws_subscribe;

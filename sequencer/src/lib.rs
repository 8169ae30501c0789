//! Ladder's single writer: rings in, journal, engine, responses out.
//!
//! Gateway threads each own a bounded ring ([`Submitter`]) into the sequencer thread.
//! The sequencer drains the rings in batches, journals every command before applying it,
//! commits the batch once (group commit), and then hands each gateway thread its
//! completions ([`CompletionSink`]) and publishes the batch's events. Reads ([`Query`])
//! travel the same rings and run between commands, so a read sees every command
//! acknowledged before it and gateway threads never lock engine state.

pub mod bell;
mod board;
mod codec;
mod fence;
mod heartbeats;
mod history;
mod pin;
mod recovery;
mod release;
pub mod replication;
mod seat;
pub use seat::clock_ns;
mod sequencer;
mod submission;

pub use board::{
    merge_price_buckets, outcome_bit, price_point, token_price, touched_markets, traded_outcomes,
    BoardUpdates, BookBoard, MarketBooks, PriceBucket, TradePrice, BOTH_OUTCOMES,
    HISTORY_BUCKETS_MAX,
};
pub use codec::{
    decode_command, decode_command_prefix, encode_command, CommandEncoder, DECODE_CLAIM_MAX_BYTES,
    RECORD_COMMAND_V1,
};
pub use fence::{AckFence, AckWitness, LEADERSHIP_LOST};
pub use heartbeats::{HeartbeatAnswer, HeartbeatOp, HeartbeatRequest};
pub use history::{merge_newest_first, HistoryReads};
pub use pin::{pin_current_thread, CorePin};
pub use recovery::{recover_engine, Recovered};
pub use release::{
    applied_anyway, BATCHES_IN_FLIGHT_MAX, JOURNAL_FULL, REPLICA_LOST, REPLICA_UNAVAILABLE,
};
pub use sequencer::{
    rings, start, start_with, wall_clock_ns, BatchEvents, EventConsumer, FlushTimes, Published,
    PublishedBatch, Publisher, Rings, SequencerConfig, SequencerHandle, SequencerParts,
    SequencerStats, Takes, FLUSH_BUCKETS_NS, STANDBY_REFUSAL,
};
pub use submission::{
    query, Answer, BatchChannelSink, ChannelSink, Completion, CompletionSink, DiscardSink, Query,
    SeatGate, Submission, SubmitError, Submitter, Ticket, Work,
};

/// Writes `line` and a newline to standard error; a failure (standard error on a full disk)
/// is ignored, where `eprintln!` would panic the thread that reports.
pub(crate) fn stderr_line(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

//! Ladder's deterministic matching engine.
//!
//! A pure state machine: [`Command`]s in, a [`Reply`] and [`Event`]s out. No I/O, no
//! clock, no threads, no randomness: the sequencer stamps each command with its sequence
//! number and time, and the same commands always give the same state and events, byte for
//! byte (checked by [`Engine::state_hash`]).
//!
//! One book per market on the Yes-price axis (API.md §9): BUY Yes and SELL No are bids,
//! SELL Yes and BUY No are asks. A taker matches at each maker's price, in price-time
//! priority, by COMPLEMENTARY, MINT or MERGE according to the pair of orders.
//!
//! # Reads
//!
//! The engine answers queries (`queries` module) from its own state. The sequencer owns
//! the engine. Book and price reads (`/book`, `/books`, `/price`, `/midpoint`, `/spread`,
//! `/tick-size`, `/neg-risk`, `/fee-rate`, `/last-trades-prices`, `/prices-history`) are
//! answered by gateway threads from a read side (`ladder_sequencer::BookBoard`): after each
//! batch the sequencer snapshots the books of the markets it changed (and notes its new
//! trades' prices), and the batch's release installs them before any of its answers leaves,
//! so a read sees every acknowledged order and never waits on, or queues behind, the
//! sequencer. The other reads (an account's orders, trades and balances, markets,
//! claimable) run as queries on the sequencer thread
//! between batches, or on a standby's replica engine: gateway threads never lock engine
//! state.

mod book;
mod cancel;
mod claims;
mod command;
mod dead_man;
mod debt_cover;
mod ended_market_debts;
mod engine;
mod event;
mod fill;
mod forgetful_log;
mod hash_slots;
mod heartbeats;
mod hints;
mod invariants;
mod key_hash;
mod ledger;
mod maker_room;
mod market;
mod orders;
mod placement;
mod positions;
mod prefetch;
mod price_bits;
mod queries;
mod reject;
mod reply;
mod room;
mod seen_hashes;
mod settlement;
mod state_hash;
mod timers;
mod trades;
mod types;
mod user_ops;

pub use book::{Book, Level};
pub use claims::{payout_units, position_payout_units, ClaimReason};
pub use command::{
    ApiKeySpec, Asset, Command, MarketSpec, NewOrder, Resolution, SignedFields, TradeStatus,
};
pub use engine::{ApiKeyRecord, ClosedOrder, Engine, EngineLimits};
pub use event::{
    Event, FillParty, MarketChange, OrderEventKind, OrderStatus, OrderView, TradeView,
};
pub use hints::PREFETCH_AHEAD;
pub use ledger::Balance;
pub use market::{check_price_on_tick, LastTrade, MarketState, TICK_SIZES_ALLOWED};
pub use placement::{resting_reservation_units, taker_fee_units, taker_reservation_units};
pub use queries::*;
pub use reject::Reject;
pub use reply::{CancelIds, CancelReport, NotCanceled, NotCanceledIds, Placement, Reply};
pub use seen_hashes::HASH_GRACE_RECORDS;
pub use trades::{batch_hash, batch_number, trade_id, trade_index};
pub use types::*;
pub use user_ops::UserOpReceipt;

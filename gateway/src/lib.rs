//! Ladder's HTTP/1.1 and WebSocket gateway on mio.
//!
//! Gateway threads parse requests, authenticate them (L1 wallet signatures, L2 HMAC),
//! recover order signatures and validate input, all in parallel and off the sequencer's
//! thread; they send commands and reads to the sequencer through their own rings and
//! write the answers back in request order.

pub mod app;
pub mod auth;
pub mod conn;
pub mod convert;
pub mod deferred;
pub mod handler;
pub mod http;
pub mod keys;
pub mod metrics;
pub mod peer_limit;
pub mod process_stats;
pub mod rate_limit;
pub mod routes;
pub mod server;
pub mod smart;
pub mod stream;
pub mod ws;

pub use handler::{Completer, Outcome};
pub use server::{
    prepare, prepare_with_feed, refuse_a_port_in_use, spawn, GatewaySink, Loop, ServerLimits,
    ServerShared, Service,
};

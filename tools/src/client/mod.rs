//! The client's parts: a wallet, order and cancel builders, authentication headers.

pub mod auth;
pub mod cancels;
pub mod error;
pub mod http;
pub mod orders;
pub mod redeem;
pub mod session;
pub mod wallet;

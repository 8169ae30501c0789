//! Ladder client library: a wallet, signed order and cancel bodies, and the L1 / L2
//! authentication headers, as pure functions returning header lists and body strings (no HTTP
//! transport).
//!
//! ```
//! use ladder_client::{OrderBuilder, Wallet};
//! use ladder_protocol::wire::OrderType;
//! use ladder_protocol::{ExchangeDomain, Side, U256};
//!
//! let wallet = Wallet::random();
//! let order = OrderBuilder::new(U256::from_u64(1), Side::Buy, 5500, 10)
//!     .salt(U256::from_u64(7))
//!     .sign(&wallet, &ExchangeDomain::default())
//!     .expect("0.55 x 10 is a valid order");
//! let body = ladder_client::post_order_body(&order, OrderType::Gtc, false);
//! assert!(body.starts_with("{\"order\":{\"salt\":\"7\""));
//! ```

pub mod client;

pub use client::auth::{
    l1_headers, l2_headers, ws_user_subscribe, Headers, L2Credentials, HEADER_ADDRESS,
    HEADER_API_KEY, HEADER_NONCE, HEADER_PASSPHRASE, HEADER_SIGNATURE, HEADER_TIMESTAMP,
};
pub use client::cancels::{cancel_market_orders_request, cancel_order_request, cancel_orders_body};
pub use client::error::ClientError;
pub use client::http::{HttpClient, HttpResponse};
pub use client::orders::{post_order_body, post_orders_body, sign_order, OrderBuilder};
pub use client::session::{
    check_clock_skew, server_time_s, unix_now_s, OrderSpec, Trader, CLOCK_SKEW_MAX_S,
};
pub use client::wallet::Wallet;

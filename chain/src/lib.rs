//! Ladder's link to an Ethereum chain (`--rpc-url`).
//!
//! - [`rpc`]: a blocking JSON-RPC client with a timeout (ureq; HTTP and HTTPS).
//! - [`abi`]: the Solidity ABI encoding of the few calls Ladder makes.
//! - [`erc1271`]: "does this signer control this smart account?" answered by the account's
//!   `isValidSignature`, with a bounded cache whose entries expire.
//! - [`exchange`]: settlement batches sent to the exchange contract's `matchOrders`, receipts
//!   and confirmation depth.
//!
//! Every call here blocks its thread for at most the RPC timeout: callers are the gateway's
//! verification workers and the settlement thread, never the sequencer.

pub mod abi;
pub mod entry_point;
pub mod erc1271;
pub mod exchange;
pub mod redemptions;
pub mod rpc;

pub use erc1271::{Erc1271Verifier, VerifierConfig};
pub use exchange::{ExchangeClient, Fill, Receipt, SubmitError};
pub use rpc::{RpcClient, RpcError};

//! Why a client operation failed.

use ladder_protocol::{AmountError, L2Error};

/// Why a client operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The private key is not `0x` + 64 hex digits of a valid secp256k1 secret.
    #[error("private key must be 0x followed by 64 hex digits of a valid secp256k1 secret key")]
    BadPrivateKey,
    /// The price and size do not give valid amounts.
    #[error(transparent)]
    Amount(#[from] AmountError),
    /// The API secret cannot be decoded.
    #[error(transparent)]
    L2(#[from] L2Error),
}

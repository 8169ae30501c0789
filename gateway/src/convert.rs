//! Token ids: a `U256` on the wire (a decimal string), 32 big-endian bytes in the engine.

use ladder_engine::{Bytes32, FixedBytes};
use ladder_protocol::U256;

/// A U256 (token id) as the engine's 32 big-endian bytes.
pub fn engine_token(token_id: &U256) -> Bytes32 {
    FixedBytes(token_id.to_be_bytes())
}

/// Engine bytes as a U256 token id.
pub fn wire_token(token_id: &Bytes32) -> U256 {
    U256::from_be_bytes(token_id.0)
}

//! Conversions between the protocol's wire-level values and the engine's plain ones.

use ladder_engine::{
    Address as EngineAddress, Bytes32, Outcome as EngineOutcome, Side as EngineSide,
};
use ladder_protocol::wire::responses::Outcome as WireOutcome;
use ladder_protocol::{Address, Side, B256, U256};

/// A protocol address as the engine's.
pub fn engine_address(address: &Address) -> EngineAddress {
    EngineAddress(*address.as_bytes())
}

/// An engine address as the protocol's (EIP-55 on output).
pub fn wire_address(address: &EngineAddress) -> Address {
    Address(address.0)
}

/// A U256 (token id) as the engine's 32 big-endian bytes.
pub fn engine_token(token_id: &U256) -> Bytes32 {
    Bytes32(token_id.to_be_bytes())
}

/// Engine bytes as a U256 token id.
pub fn wire_token(token_id: &Bytes32) -> U256 {
    U256::from_be_bytes(token_id.0)
}

/// A 32-byte hex value as the engine's.
pub fn engine_b256(value: &B256) -> Bytes32 {
    Bytes32(*value.as_bytes())
}

/// Engine bytes as a 32-byte hex value.
pub fn wire_b256(value: &Bytes32) -> B256 {
    B256::from(value.0)
}

/// A protocol side as the engine's.
pub fn engine_side(side: Side) -> EngineSide {
    match side {
        Side::Buy => EngineSide::Buy,
        Side::Sell => EngineSide::Sell,
    }
}

/// An engine side as the protocol's.
pub fn wire_side(side: EngineSide) -> Side {
    match side {
        EngineSide::Buy => Side::Buy,
        EngineSide::Sell => Side::Sell,
    }
}

/// An engine outcome as the wire's.
pub fn wire_outcome(outcome: EngineOutcome) -> WireOutcome {
    match outcome {
        EngineOutcome::Yes => WireOutcome::Yes,
        EngineOutcome::No => WireOutcome::No,
    }
}

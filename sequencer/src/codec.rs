//! How commands are stored in the journal: record type 1, the `Command` enum encoded with
//! bincode (standard configuration). Replay, the standby and `ladder journal` share this
//! one decoder.

use ladder_engine::Command;

/// Record type of a command encoded with bincode, version 1.
pub const RECORD_COMMAND_V1: u16 = 1;

/// Encodes `command` into `out` (cleared first).
pub fn encode_command(command: &Command, out: &mut Vec<u8>) {
    out.clear();
    bincode::serde::encode_into_std_write(command, out, bincode::config::standard())
        .expect("encoding a command into memory cannot fail");
}

/// Room tried first for a command's encoding; almost every command fits (an order is
/// ~200 bytes), a larger one is encoded again into a growing buffer.
const ENCODE_ROOM_BYTES: usize = 1024;

/// The sequencer's encoder: the same bytes as [`encode_command`], faster.
///
/// Bincode's serde encoder writes byte arrays (addresses, hashes, signatures) one byte at a
/// time; into a fixed slice each write is a store, into a `Vec` each one is a capacity
/// check and a copy call, so a slice is tried first (`ladder bench sequencer`).
pub struct CommandEncoder {
    room: Box<[u8]>,
    spill: Vec<u8>,
}

impl Default for CommandEncoder {
    fn default() -> Self {
        CommandEncoder {
            room: vec![0; ENCODE_ROOM_BYTES].into_boxed_slice(),
            spill: Vec::new(),
        }
    }
}

impl CommandEncoder {
    /// Encodes `command`; the bytes stay valid until the next call.
    pub fn encode(&mut self, command: &Command) -> &[u8] {
        match bincode::serde::encode_into_slice(
            command,
            &mut self.room,
            bincode::config::standard(),
        ) {
            Ok(used) => &self.room[..used],
            Err(_) => {
                encode_command(command, &mut self.spill);
                &self.spill
            }
        }
    }
}

/// Decodes a journal payload of type `record_type`.
pub fn decode_command(record_type: u16, payload: &[u8]) -> Result<Command, String> {
    if record_type != RECORD_COMMAND_V1 {
        return Err(format!("unknown record type {record_type}"));
    }
    let (command, used): (Command, usize) =
        bincode::serde::decode_from_slice(payload, bincode::config::standard())
            .map_err(|e| format!("undecodable command: {e}"))?;
    if used != payload.len() {
        return Err(format!(
            "{} trailing bytes after the command",
            payload.len() - used
        ));
    }
    Ok(command)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ladder_engine::{Address, Asset, Bytes32, NewOrder, OrderType, Side, SignedFields};

    #[test]
    fn a_command_round_trips() {
        let command = Command::Deposit {
            address: Address([7; 20]),
            asset: Asset::Collateral,
            amount: 42,
        };
        let mut bytes = Vec::new();
        encode_command(&command, &mut bytes);
        assert_eq!(CommandEncoder::default().encode(&command), &bytes[..]);
        assert_eq!(decode_command(RECORD_COMMAND_V1, &bytes), Ok(command));
        assert!(decode_command(2, &bytes).is_err());
        assert!(decode_command(RECORD_COMMAND_V1, &bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn a_command_larger_than_the_first_room_is_encoded_whole() {
        let maker = Address([0xaa; 20]);
        let command = Command::PlaceOrder(NewOrder {
            order_hash: Bytes32([1; 32]),
            maker,
            signer: maker,
            token_id: Bytes32([2; 32]),
            side: Side::Buy,
            price_ticks: 5_000,
            size_units: 1_000_000,
            order_type: OrderType::Gtc,
            post_only: false,
            expiration_s: 0,
            signer_verified: true,
            signed: Some(Box::new(SignedFields {
                signature: vec![0x5a; 3 * ENCODE_ROOM_BYTES],
                ..SignedFields::default()
            })),
        });
        let mut bytes = Vec::new();
        encode_command(&command, &mut bytes);
        assert!(bytes.len() > ENCODE_ROOM_BYTES);
        let mut encoder = CommandEncoder::default();
        assert_eq!(encoder.encode(&command), &bytes[..]);
        assert_eq!(decode_command(RECORD_COMMAND_V1, &bytes), Ok(command));
    }
}

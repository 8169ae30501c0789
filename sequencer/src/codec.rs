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
    use ladder_engine::{Address, Asset};

    #[test]
    fn a_command_round_trips() {
        let command = Command::Deposit {
            address: Address([7; 20]),
            asset: Asset::Collateral,
            amount: 42,
        };
        let mut bytes = Vec::new();
        encode_command(&command, &mut bytes);
        assert_eq!(decode_command(RECORD_COMMAND_V1, &bytes), Ok(command));
        assert!(decode_command(2, &bytes).is_err());
        assert!(decode_command(RECORD_COMMAND_V1, &bytes[..bytes.len() - 1]).is_err());
    }
}

//! How commands are stored in the journal: record type 1, the `Command` enum encoded with
//! bincode (standard configuration). Replay, the standby and `ladder journal` share this
//! one decoder.
//!
//! The bytes are those of bincode's serde encoding (journals written before session 5 were
//! made that way); the codec uses bincode's own derive, which writes the same bytes but
//! copies byte arrays (addresses, hashes, signatures) whole instead of one byte at a time.
//! A test checks the two agree on every kind of command.

use ladder_engine::Command;

/// Record type of a command encoded with bincode, version 1.
pub const RECORD_COMMAND_V1: u16 = 1;

/// Encodes `command` into `out` (cleared first).
pub fn encode_command(command: &Command, out: &mut Vec<u8>) {
    out.clear();
    bincode::encode_into_std_write(command, out, bincode::config::standard())
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
        match bincode::encode_into_slice(command, &mut self.room, bincode::config::standard()) {
            Ok(used) => &self.room[..used],
            Err(_) => {
                encode_command(command, &mut self.spill);
                &self.spill
            }
        }
    }
}

/// Most bytes a payload may claim while it is decoded (the largest record): a damaged or
/// hostile payload that claims a longer list or string is refused before anything is
/// allocated for it (found by the `engine_commands` fuzz target: a claimed length of 2^60
/// aborted the process).
pub const DECODE_CLAIM_MAX_BYTES: usize = 1 << 20;

/// Decodes one command from the front of `bytes`: the command and the bytes it took.
pub fn decode_command_prefix(bytes: &[u8]) -> Result<(Command, usize), String> {
    let config = bincode::config::standard().with_limit::<DECODE_CLAIM_MAX_BYTES>();
    bincode::decode_from_slice(bytes, config).map_err(|e| format!("undecodable command: {e}"))
}

/// Decodes a journal payload of type `record_type`.
pub fn decode_command(record_type: u16, payload: &[u8]) -> Result<Command, String> {
    if record_type != RECORD_COMMAND_V1 {
        return Err(format!("unknown record type {record_type}"));
    }
    let (command, used) = decode_command_prefix(payload)?;
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
    use ladder_engine::FixedBytes;
    use ladder_engine::{
        Address, ApiKeySpec, Asset, Bytes32, MarketSpec, NewOrder, OrderType, Resolution, Side,
        SignedFields, TradeStatus,
    };
    use proptest::prelude::*;

    /// Random parts a command is made of.
    #[derive(Clone, Debug, Default)]
    struct Parts {
        address: Address,
        other: Address,
        bytes: Bytes32,
        big: u64,
        small: u32,
        flag: bool,
        byte: u8,
        signature: Vec<u8>,
    }

    fn parts() -> impl Strategy<Value = Parts> {
        (
            any::<[u8; 20]>(),
            any::<[u8; 20]>(),
            any::<[u8; 32]>(),
            prop_oneof![any::<u64>(), 0u64..300, Just(u64::MAX)],
            prop_oneof![any::<u32>(), 0u32..300],
            any::<bool>(),
            any::<u8>(),
            proptest::collection::vec(any::<u8>(), 0..140),
        )
            .prop_map(
                |(address, other, bytes, big, small, flag, byte, signature)| Parts {
                    address: Address(address),
                    other: Address(other),
                    bytes: FixedBytes(bytes),
                    big,
                    small,
                    flag,
                    byte,
                    signature,
                },
            )
    }

    fn some_if<T>(flag: bool, value: T) -> Option<T> {
        flag.then_some(value)
    }

    /// Command number `kind` (every variant, and each optional field both ways) from `p`.
    fn command(kind: u8, p: &Parts) -> Command {
        let asset = if p.flag {
            Asset::Token(p.bytes)
        } else {
            Asset::Collateral
        };
        match kind % COMMAND_KINDS {
            0 => Command::CreateMarket(MarketSpec {
                condition_id: p.bytes,
                yes_token_id: FixedBytes([p.byte; 32]),
                no_token_id: FixedBytes([!p.byte; 32]),
                tick_size_ticks: p.small,
                min_order_size_units: p.big,
                neg_risk: p.flag,
                taker_delay_ms: p.big / 3,
                fee_rate_bps: p.small / 7,
            }),
            1 => Command::PauseMarket {
                condition_id: p.bytes,
            },
            2 => Command::ResumeMarket {
                condition_id: p.bytes,
            },
            3 => Command::ResolveMarket {
                condition_id: p.bytes,
                resolution: [Resolution::Yes, Resolution::No, Resolution::Void]
                    [p.byte as usize % 3],
            },
            4 => Command::SetTickSize {
                condition_id: p.bytes,
                tick_size_ticks: p.small,
            },
            5 => Command::LinkAccount {
                account: p.address,
                owner: p.other,
            },
            6 => Command::UnlinkAccount {
                account: p.address,
                owner: p.other,
            },
            7 => Command::CreateApiKey(ApiKeySpec {
                address: p.address,
                signer: p.other,
                key_id: [p.byte; 16],
                nonce: p.bytes,
                max_keys_per_address: p.small,
            }),
            8 => Command::DeleteApiKey {
                address: p.address,
                signer: p.other,
                key_id: [p.byte; 16],
            },
            9 => Command::Deposit {
                address: p.address,
                asset,
                amount: p.big,
            },
            10 => Command::Withdraw {
                address: p.address,
                asset,
                amount: p.big,
            },
            11 | 12 => Command::PlaceOrder(NewOrder {
                order_hash: p.bytes,
                maker: p.address,
                signer: p.other,
                token_id: FixedBytes([p.byte; 32]),
                side: if p.flag { Side::Buy } else { Side::Sell },
                price_ticks: p.small,
                size_units: p.big,
                order_type: [
                    OrderType::Gtc,
                    OrderType::Gtd,
                    OrderType::Fok,
                    OrderType::Fak,
                ][p.byte as usize % 4],
                post_only: !p.flag,
                expiration_s: p.big / 5,
                signer_verified: p.flag,
                signed: some_if(
                    kind % 20 == 12,
                    Box::new(SignedFields {
                        salt: p.bytes.0,
                        beneficiary: p.other,
                        maker_amount: p.big,
                        taker_amount: u64::from(p.small),
                        nonce: [p.byte; 32],
                        identifier: [!p.byte; 16],
                        metadata: p.bytes.0,
                        signature_type: p.byte,
                        signature: p.signature.clone(),
                    }),
                ),
            }),
            13 => Command::CancelOrder {
                requester: p.address,
                order_id: p.big,
                condition_id: some_if(p.flag, p.bytes),
                signer: some_if(p.byte.is_multiple_of(2), p.other),
            },
            14 => Command::CancelMarket {
                requester: p.address,
                condition_id: p.bytes,
                token_id: some_if(p.flag, FixedBytes([p.byte; 32])),
                signer: some_if(p.byte.is_multiple_of(2), p.other),
            },
            15 => Command::CancelAll {
                requester: p.address,
            },
            16 => Command::Tick,
            17 | 18 => Command::SettlementUpdate {
                transaction_hash: p.bytes,
                status: [
                    TradeStatus::Matched,
                    TradeStatus::Mined,
                    TradeStatus::Confirmed,
                    TradeStatus::Retrying,
                    TradeStatus::Failed,
                ][p.byte as usize % 5],
            },
            19 => Command::RecordRedemption {
                address: p.address,
                condition_id: p.bytes,
            },
            21 => Command::StartHeartbeats {
                key_id: [p.byte; 16],
                address: p.address,
            },
            22 => Command::StopHeartbeats {
                key_id: [p.byte; 16],
            },
            23 => Command::HeartbeatsExpired {
                key_id: [p.byte; 16],
                address: p.address,
            },
            24 => Command::RedeemUserOp {
                user_op_hash: p.bytes,
                sender: p.address,
                signer: p.other,
                nonce: p.big,
                condition_id: FixedBytes([p.byte; 32]),
            },
            25 => Command::ForgetHistory { through_seq: p.big },
            26 => Command::BeginTerm { term: p.big },
            27 => Command::ArmDeadManSwitch {
                process: p.big,
                connection: u64::from(p.small),
                address: p.address,
            },
            28 => Command::DeadManSwitchTripped {
                process: p.big,
                connection: u64::from(p.small),
                address: p.address,
            },
            29 => Command::DeadManSwitchesLost { process: p.big },
            30 => Command::DisarmDeadManSwitches {
                keep: some_if(p.flag, vec![(p.big, u64::from(p.small))]).unwrap_or_default(),
            },
            _ => Command::CreateCountedApiKey {
                spec: ApiKeySpec {
                    address: p.address,
                    signer: p.other,
                    key_id: [p.byte; 16],
                    nonce: p.bytes,
                    max_keys_per_address: p.small,
                },
                creations_before: p.small,
            },
        }
    }

    /// How many kinds of command `command` makes (one per variant, two for an API key).
    const COMMAND_KINDS: u8 = 31;

    proptest! {
        /// The codec's bytes are bincode's serde bytes, so journals written either way read
        /// back; and they decode to the command.
        #[test]
        fn the_codec_writes_the_serde_bytes_of_every_kind_of_command(
            kind in 0u8..COMMAND_KINDS,
            p in parts(),
        ) {
            let command = command(kind, &p);
            let serde_bytes =
                bincode::serde::encode_to_vec(&command, bincode::config::standard()).unwrap();
            let mut bytes = Vec::new();
            encode_command(&command, &mut bytes);
            prop_assert_eq!(&bytes, &serde_bytes);
            let mut encoder = CommandEncoder::default();
            prop_assert_eq!(encoder.encode(&command), &serde_bytes[..]);
            prop_assert_eq!(decode_command(RECORD_COMMAND_V1, &bytes), Ok(command.clone()));
            let (from_serde, _): (Command, usize) =
                bincode::serde::decode_from_slice(&bytes, bincode::config::standard()).unwrap();
            prop_assert_eq!(from_serde, command);
        }
    }

    #[test]
    fn the_type_names_are_those_of_every_kind_of_command() {
        let p = Parts::default();
        let named: std::collections::BTreeSet<&str> = (0..COMMAND_KINDS)
            .map(|kind| command(kind, &p).type_name())
            .collect();
        let listed: std::collections::BTreeSet<&str> =
            Command::TYPE_NAMES.iter().copied().collect();
        assert_eq!(named, listed);
        assert_eq!(listed.len(), Command::TYPE_NAMES.len(), "no name twice");
    }

    #[test]
    fn a_payload_claiming_a_huge_length_is_refused_without_allocating_it() {
        // A PlaceOrder whose signature claims 2^60 bytes (the varint's 0xff marker, then a
        // little-endian u64).
        let order = command(11, &Parts::default());
        let mut bytes = Vec::new();
        encode_command(&order, &mut bytes);
        let mut huge = bytes[..bytes.len() / 2].to_vec();
        huge.push(0xff);
        huge.extend_from_slice(&(1u64 << 60).to_le_bytes());
        huge.extend_from_slice(&[0; 16]);
        assert!(decode_command(RECORD_COMMAND_V1, &huge).is_err());
    }

    #[test]
    fn a_payload_of_another_type_or_cut_short_is_refused() {
        let command = Command::Deposit {
            address: Address([7; 20]),
            asset: Asset::Collateral,
            amount: 42,
        };
        let mut bytes = Vec::new();
        encode_command(&command, &mut bytes);
        assert!(decode_command(2, &bytes).is_err());
        assert!(decode_command(RECORD_COMMAND_V1, &bytes[..bytes.len() - 1]).is_err());
        bytes.push(0);
        assert!(decode_command(RECORD_COMMAND_V1, &bytes).is_err());
    }

    #[test]
    fn a_command_larger_than_the_first_room_is_encoded_whole() {
        let p = Parts {
            address: Address([0xaa; 20]),
            other: Address([0xbb; 20]),
            bytes: FixedBytes([1; 32]),
            big: 1_000_000,
            small: 5_000,
            flag: true,
            byte: 3,
            signature: vec![0x5a; 3 * ENCODE_ROOM_BYTES],
        };
        let command = command(12, &p);
        let mut bytes = Vec::new();
        encode_command(&command, &mut bytes);
        assert!(bytes.len() > ENCODE_ROOM_BYTES);
        assert_eq!(CommandEncoder::default().encode(&command), &bytes[..]);
        assert_eq!(decode_command(RECORD_COMMAND_V1, &bytes), Ok(command));
    }
}

//! ERC-4337 user operations as EntryPoint v0.7 sees them (API.md §13, the bundler): the
//! `PackedUserOperation` hash, the EIP-191 digest an owner signs, and the redeem call the
//! service's bundler carries out (`execute(exchange, 0, redeem(conditionId))`).
//!
//! Reproduces the known answers of `protocol/tests/data/user_operation.json` (computed with
//! viem and independently in Python).

use serde_json::Value;

use crate::keccak::{keccak256, keccak256_concat};
use crate::{Address, AddressError, B256, U256};

/// The canonical EntryPoint v0.7 address (`--entry-point` by default).
pub const ENTRY_POINT_V07: &str = "0x0000000071727De22E5E9d8BAf0edAc6f37da032";
/// Selector of `execute(address,uint256,bytes)` (SimpleAccount's).
pub const EXECUTE_SELECTOR: [u8; 4] = [0xb6, 0x1d, 0x27, 0xf6];
/// Selector of the exchange's `redeem(bytes32)`.
pub const REDEEM_SELECTOR: [u8; 4] = [0xed, 0xa1, 0x12, 0x2c];
/// Longest `callData`, `factoryData`, `paymasterData` or `signature` accepted (bytes).
pub const USER_OP_BYTES_FIELD_MAX: usize = 16 * 1024;

/// A user operation in the JSON-RPC form of ERC-4337 v0.7 (unpacked fields).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserOperation {
    /// The smart account.
    pub sender: Address,
    /// Key (upper 192 bits) and sequence (lower 64 bits).
    pub nonce: U256,
    /// The account factory, when the account is to be deployed.
    pub factory: Option<Address>,
    /// The factory's data.
    pub factory_data: Vec<u8>,
    /// What the account executes.
    pub call_data: Vec<u8>,
    /// Gas of the execution.
    pub call_gas_limit: u128,
    /// Gas of the verification.
    pub verification_gas_limit: u128,
    /// Gas paid up front.
    pub pre_verification_gas: U256,
    /// Fee cap.
    pub max_fee_per_gas: u128,
    /// Priority fee cap.
    pub max_priority_fee_per_gas: u128,
    /// The paymaster, if any.
    pub paymaster: Option<Address>,
    /// Its verification gas.
    pub paymaster_verification_gas_limit: u128,
    /// Its post-operation gas.
    pub paymaster_post_op_gas_limit: u128,
    /// Its data.
    pub paymaster_data: Vec<u8>,
    /// The owner's signature (65 bytes r ‖ s ‖ v for a SimpleAccount).
    pub signature: Vec<u8>,
}

fn word_u256(value: &U256) -> [u8; 32] {
    value.to_be_bytes()
}

fn word_address(address: &Address) -> [u8; 32] {
    let mut word = [0u8; 32];
    word[12..].copy_from_slice(address.as_bytes());
    word
}

/// Two `uint128`s packed into one word, `high` first (`accountGasLimits`, `gasFees`).
fn word_u128_pair(high: u128, low: u128) -> [u8; 32] {
    let mut word = [0u8; 32];
    word[..16].copy_from_slice(&high.to_be_bytes());
    word[16..].copy_from_slice(&low.to_be_bytes());
    word
}

impl UserOperation {
    /// `initCode`: the factory and its data (empty without a factory).
    pub fn init_code(&self) -> Vec<u8> {
        match &self.factory {
            Some(factory) => [factory.as_bytes().as_slice(), &self.factory_data].concat(),
            None => Vec::new(),
        }
    }

    /// `paymasterAndData`: the paymaster, its two gas limits (16 bytes each) and its data.
    pub fn paymaster_and_data(&self) -> Vec<u8> {
        match &self.paymaster {
            Some(paymaster) => [
                paymaster.as_bytes().as_slice(),
                &self.paymaster_verification_gas_limit.to_be_bytes(),
                &self.paymaster_post_op_gas_limit.to_be_bytes(),
                &self.paymaster_data,
            ]
            .concat(),
            None => Vec::new(),
        }
    }

    /// `accountGasLimits`: the verification gas limit, then the call gas limit.
    pub fn account_gas_limits(&self) -> [u8; 32] {
        word_u128_pair(self.verification_gas_limit, self.call_gas_limit)
    }

    /// `gasFees`: the priority fee cap, then the fee cap.
    pub fn gas_fees(&self) -> [u8; 32] {
        word_u128_pair(self.max_priority_fee_per_gas, self.max_fee_per_gas)
    }

    /// The hash EntryPoint v0.7 gives the operation:
    /// `keccak256(abi.encode(keccak256(pack(op)), entryPoint, chainId))`.
    pub fn hash(&self, entry_point: &Address, chain_id: u64) -> B256 {
        let packed = keccak256_concat(&[
            &word_address(&self.sender),
            &word_u256(&self.nonce),
            &keccak256(&self.init_code()),
            &keccak256(&self.call_data),
            &self.account_gas_limits(),
            &word_u256(&self.pre_verification_gas),
            &self.gas_fees(),
            &keccak256(&self.paymaster_and_data()),
        ]);
        B256::from(keccak256_concat(&[
            &packed,
            &word_address(entry_point),
            &word_u256(&U256::from(chain_id)),
        ]))
    }

    /// The operation in the JSON-RPC form of ERC-4337 v0.7 (what [`parse_user_operation`]
    /// reads): quantities as `0x` hex, the factory and paymaster fields only when set.
    pub fn to_json(&self) -> Value {
        let quantity = |v: u128| format_quantity(&U256::from(v));
        let bytes = |b: &[u8]| format!("0x{}", hex::encode(b));
        let mut json = serde_json::json!({
            "sender": self.sender.to_string(),
            "nonce": format_quantity(&self.nonce),
            "callData": bytes(&self.call_data),
            "callGasLimit": quantity(self.call_gas_limit),
            "verificationGasLimit": quantity(self.verification_gas_limit),
            "preVerificationGas": format_quantity(&self.pre_verification_gas),
            "maxFeePerGas": quantity(self.max_fee_per_gas),
            "maxPriorityFeePerGas": quantity(self.max_priority_fee_per_gas),
            "signature": bytes(&self.signature),
        });
        if let Some(factory) = &self.factory {
            json["factory"] = Value::String(factory.to_string());
            json["factoryData"] = Value::String(bytes(&self.factory_data));
        }
        if let Some(paymaster) = &self.paymaster {
            json["paymaster"] = Value::String(paymaster.to_string());
            json["paymasterVerificationGasLimit"] =
                Value::String(quantity(self.paymaster_verification_gas_limit));
            json["paymasterPostOpGasLimit"] =
                Value::String(quantity(self.paymaster_post_op_gas_limit));
            json["paymasterData"] = Value::String(bytes(&self.paymaster_data));
        }
        json
    }

    /// The nonce's key (its upper 192 bits are not zero) and sequence (its lower 64 bits).
    pub fn nonce_key_and_sequence(&self) -> (bool, u64) {
        let bytes = self.nonce.to_be_bytes();
        let key_zero = bytes[..24].iter().all(|&b| b == 0);
        let mut low = [0u8; 8];
        low.copy_from_slice(&bytes[24..]);
        (!key_zero, u64::from_be_bytes(low))
    }
}

/// The digest an owner signs for `user_op_hash` (EIP-191 personal message of 32 bytes, as
/// SimpleAccount checks it).
pub fn eip191_digest(user_op_hash: &B256) -> [u8; 32] {
    keccak256_concat(&[b"\x19Ethereum Signed Message:\n32", user_op_hash.as_bytes()])
}

/// `redeem(bytes32 conditionId)`'s call data.
pub fn redeem_call_data(condition_id: &B256) -> Vec<u8> {
    [REDEEM_SELECTOR.as_slice(), condition_id.as_bytes()].concat()
}

/// `execute(exchange, 0, redeem(conditionId))`'s call data: what a redeem operation's
/// account executes.
pub fn execute_redeem_call_data(exchange: &Address, condition_id: &B256) -> Vec<u8> {
    let func = redeem_call_data(condition_id);
    let mut data = EXECUTE_SELECTOR.to_vec();
    data.extend_from_slice(&word_address(exchange));
    data.extend_from_slice(&[0u8; 32]);
    data.extend_from_slice(&word_u256(&U256::from(96u64)));
    data.extend_from_slice(&word_u256(&U256::from(func.len() as u64)));
    data.extend_from_slice(&func);
    data.resize(data.len() + (32 - func.len() % 32) % 32, 0);
    data
}

/// The market a redeem operation's call data redeems on `exchange`, or why it is not one.
pub fn redeemed_market(call_data: &[u8], exchange: &Address) -> Result<B256, String> {
    let not_redeem =
        || "callData: expected execute(exchange, 0, redeem(bytes32 conditionId))".to_string();
    // execute's head (4 + 3 words), its bytes' length word, and redeem's 36 bytes.
    if call_data.len() < 4 + 32 * 4 + 36 || call_data[..4] != EXECUTE_SELECTOR {
        return Err(not_redeem());
    }
    let start = 4 + 32 * 4 + 4;
    let condition_id: [u8; 32] = call_data[start..start + 32]
        .try_into()
        .map_err(|_| not_redeem())?;
    let condition_id = B256::from(condition_id);
    if call_data != execute_redeem_call_data(exchange, &condition_id).as_slice() {
        return Err(not_redeem());
    }
    Ok(condition_id)
}

/// Reads a user operation from its JSON-RPC object (ERC-4337 v0.7 field names, quantities
/// as `0x` hex); an error names the field.
pub fn parse_user_operation(value: &Value) -> Result<UserOperation, String> {
    let fields = value
        .as_object()
        .ok_or("userOperation: expected an object")?;
    let text = |name: &str| -> Result<Option<&str>, String> {
        match fields.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(_) => Err(format!("{name}: expected a 0x hex string")),
        }
    };
    let required = |name: &str| text(name)?.ok_or_else(|| format!("{name}: required"));
    let address = |name: &str, t: &str| {
        Address::parse(t).map_err(|e| match e {
            AddressError::Malformed => format!("{name}: expected a 0x address"),
            checksum => format!("{name}: {checksum}"),
        })
    };
    let bytes = |name: &str| -> Result<Vec<u8>, String> {
        let Some(t) = text(name)? else {
            return Ok(Vec::new());
        };
        let digits = t
            .strip_prefix("0x")
            .ok_or_else(|| format!("{name}: expected 0x hex bytes"))?;
        if digits.len() > USER_OP_BYTES_FIELD_MAX * 2 {
            return Err(format!(
                "{name}: longer than {USER_OP_BYTES_FIELD_MAX} bytes"
            ));
        }
        hex::decode(digits).map_err(|_| format!("{name}: expected 0x hex bytes"))
    };
    let quantity = |name: &str, needed: bool| -> Result<U256, String> {
        let t = match text(name)? {
            Some(t) => t,
            None if needed => return Err(format!("{name}: required")),
            None => return Ok(U256::ZERO),
        };
        parse_quantity(t).ok_or_else(|| format!("{name}: expected a 0x hex quantity"))
    };
    let small = |name: &str, needed: bool| -> Result<u128, String> {
        u128_of(&quantity(name, needed)?).ok_or_else(|| format!("{name}: above 128 bits"))
    };
    let optional_address = |name: &str| -> Result<Option<Address>, String> {
        text(name)?.map(|t| address(name, t)).transpose()
    };
    let op = UserOperation {
        sender: address("sender", required("sender")?)?,
        nonce: quantity("nonce", true)?,
        factory: optional_address("factory")?,
        factory_data: bytes("factoryData")?,
        call_data: {
            required("callData")?;
            bytes("callData")?
        },
        call_gas_limit: small("callGasLimit", true)?,
        verification_gas_limit: small("verificationGasLimit", true)?,
        pre_verification_gas: quantity("preVerificationGas", true)?,
        max_fee_per_gas: small("maxFeePerGas", true)?,
        max_priority_fee_per_gas: small("maxPriorityFeePerGas", true)?,
        paymaster: optional_address("paymaster")?,
        paymaster_verification_gas_limit: small("paymasterVerificationGasLimit", false)?,
        paymaster_post_op_gas_limit: small("paymasterPostOpGasLimit", false)?,
        paymaster_data: bytes("paymasterData")?,
        signature: {
            required("signature")?;
            bytes("signature")?
        },
    };
    // What would go nowhere in the packed operation (and not into its hash) is refused.
    if op.factory.is_none() && !op.factory_data.is_empty() {
        return Err("factoryData: given without factory".into());
    }
    if op.paymaster.is_none() {
        let stray = [
            (
                "paymasterVerificationGasLimit",
                op.paymaster_verification_gas_limit != 0,
            ),
            (
                "paymasterPostOpGasLimit",
                op.paymaster_post_op_gas_limit != 0,
            ),
            ("paymasterData", !op.paymaster_data.is_empty()),
        ];
        if let Some((name, _)) = stray.iter().find(|(_, given)| *given) {
            return Err(format!("{name}: given without paymaster"));
        }
    }
    Ok(op)
}

/// A JSON-RPC quantity: `0x` and up to 64 hex digits.
pub fn parse_quantity(text: &str) -> Option<U256> {
    let digits = text.strip_prefix("0x")?;
    if digits.is_empty() || digits.len() > 64 {
        return None;
    }
    let padded = format!("{digits:0>64}");
    let bytes: [u8; 32] = hex::decode(padded).ok()?.try_into().ok()?;
    Some(U256::from_be_bytes(bytes))
}

/// A quantity as `0x` hex without leading zeros (`0x0` for zero).
pub fn format_quantity(value: &U256) -> String {
    let digits = hex::encode(value.to_be_bytes());
    let trimmed = digits.trim_start_matches('0');
    format!("0x{}", if trimmed.is_empty() { "0" } else { trimmed })
}

/// `value` as a `u128`, when it fits.
pub fn u128_of(value: &U256) -> Option<u128> {
    let bytes = value.to_be_bytes();
    if bytes[..16].iter().any(|&b| b != 0) {
        return None;
    }
    let mut low = [0u8; 16];
    low.copy_from_slice(&bytes[16..]);
    Some(u128::from_be_bytes(low))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_read_and_write_back() {
        assert_eq!(parse_quantity("0x0"), Some(U256::ZERO));
        assert_eq!(parse_quantity("0x186a0"), Some(U256::from(100_000u64)));
        assert_eq!(format_quantity(&U256::from(100_000u64)), "0x186a0");
        assert_eq!(format_quantity(&U256::ZERO), "0x0");
        for bad in ["", "0x", "186a0", "0xzz", &format!("0x{}", "1".repeat(65))] {
            assert_eq!(parse_quantity(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_user_operation_names_its_bad_field() {
        let op = serde_json::json!({ "sender": "0x5a11c0C0a000000000000000000000000000A001",
            "nonce": "0x0", "callData": "0x", "callGasLimit": "0x1", "verificationGasLimit": "0x1",
            "preVerificationGas": "0x1", "maxFeePerGas": "0x1", "maxPriorityFeePerGas": "0x1",
            "signature": "0x" });
        assert!(parse_user_operation(&op).is_ok());
        for (field, value) in [
            ("sender", "0x12"),
            ("nonce", "seven"),
            ("callData", "0xabc"),
            ("callGasLimit", "0x1000000000000000000000000000000000"),
        ] {
            let mut bad = op.clone();
            bad[field] = Value::from(value);
            let why = parse_user_operation(&bad).unwrap_err();
            assert!(why.starts_with(field), "{why}");
        }
        let mut missing = op.clone();
        missing.as_object_mut().unwrap().remove("signature");
        assert_eq!(
            parse_user_operation(&missing).unwrap_err(),
            "signature: required"
        );
        // Fields that would go nowhere without their factory or paymaster (found by the
        // bundler_request fuzz target: they were dropped silently).
        for (field, value) in [
            ("factoryData", "0x5fbfb9cf"),
            ("paymasterData", "0xdead"),
            ("paymasterVerificationGasLimit", "0x10"),
            ("paymasterPostOpGasLimit", "0x20"),
        ] {
            let mut stray = op.clone();
            stray[field] = Value::from(value);
            let why = parse_user_operation(&stray).unwrap_err();
            let named = why.starts_with(field)
                && (why.ends_with("given without factory")
                    || why.ends_with("given without paymaster"));
            assert!(named, "{why}");
        }
        let mut empty = op.clone();
        empty["factoryData"] = Value::from("0x");
        empty["paymaster"] = Value::Null;
        assert!(parse_user_operation(&empty).is_ok());
    }
}

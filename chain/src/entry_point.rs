//! Calls of ERC-4337's EntryPoint v0.7: `handleOps` (what a bundler sends), `getUserOpHash`
//! and `getNonce`, with a user operation in its packed on-chain form (`PackedUserOperation`).

use ladder_protocol::user_op::UserOperation;
use ladder_protocol::{Address, U256};

use crate::abi::{address_word, encode_call, selector, Arg, Word};

/// The `PackedUserOperation` tuple type.
const PACKED_USER_OPERATION: &str =
    "(address,uint256,bytes,bytes,bytes32,uint256,bytes32,bytes,bytes)";

/// An operation's fields as the EntryPoint takes them.
#[derive(Clone, Debug)]
pub struct PackedUserOperation {
    sender: Word,
    nonce: Word,
    init_code: Vec<u8>,
    call_data: Vec<u8>,
    account_gas_limits: Word,
    pre_verification_gas: Word,
    gas_fees: Word,
    paymaster_and_data: Vec<u8>,
    signature: Vec<u8>,
}

impl PackedUserOperation {
    /// Packs `op`.
    pub fn new(op: &UserOperation) -> PackedUserOperation {
        PackedUserOperation {
            sender: address_word(&op.sender),
            nonce: op.nonce.to_be_bytes(),
            init_code: op.init_code(),
            call_data: op.call_data.clone(),
            account_gas_limits: op.account_gas_limits(),
            pre_verification_gas: op.pre_verification_gas.to_be_bytes(),
            gas_fees: op.gas_fees(),
            paymaster_and_data: op.paymaster_and_data(),
            signature: op.signature.clone(),
        }
    }

    /// The tuple's members, in order.
    fn members(&self) -> Vec<Arg<'_>> {
        vec![
            Arg::Word(self.sender),
            Arg::Word(self.nonce),
            Arg::Bytes(&self.init_code),
            Arg::Bytes(&self.call_data),
            Arg::Word(self.account_gas_limits),
            Arg::Word(self.pre_verification_gas),
            Arg::Word(self.gas_fees),
            Arg::Bytes(&self.paymaster_and_data),
            Arg::Bytes(&self.signature),
        ]
    }
}

/// `handleOps(ops, beneficiary)`: the EntryPoint validates and executes `ops`, and pays their
/// gas to `beneficiary`.
pub fn handle_ops_call(ops: &[UserOperation], beneficiary: &Address) -> Vec<u8> {
    let packed: Vec<PackedUserOperation> = ops.iter().map(PackedUserOperation::new).collect();
    let tuples: Vec<Vec<Arg<'_>>> = packed.iter().map(PackedUserOperation::members).collect();
    encode_call(
        selector(&format!("handleOps({PACKED_USER_OPERATION}[],address)")),
        &[Arg::Tuples(&tuples), Arg::Word(address_word(beneficiary))],
    )
}

/// `getUserOpHash(op)`: the hash the EntryPoint gives `op` on its chain.
pub fn get_user_op_hash_call(op: &UserOperation) -> Vec<u8> {
    let packed = PackedUserOperation::new(op);
    let members = packed.members();
    encode_call(
        selector(&format!("getUserOpHash({PACKED_USER_OPERATION})")),
        &[Arg::Tuple(&members)],
    )
}

/// `getNonce(sender, key)`: the next nonce of `sender` under `key` (key in the upper 192 bits,
/// sequence in the lower 64).
pub fn get_nonce_call(sender: &Address, key: U256) -> Vec<u8> {
    encode_call(
        selector("getNonce(address,uint192)"),
        &[
            Arg::Word(address_word(sender)),
            Arg::Word(key.to_be_bytes()),
        ],
    )
}

/// `depositTo(account)`: funds `account`'s gas deposit at the EntryPoint (with the call's value).
pub fn deposit_to_call(account: &Address) -> Vec<u8> {
    encode_call(
        selector("depositTo(address)"),
        &[Arg::Word(address_word(account))],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The selectors solc gives EntryPoint v0.7 (`contracts/build/selectors.json`).
    #[test]
    fn selectors_are_the_entry_points() {
        let text = include_str!("../../contracts/build/selectors.json");
        let selectors: serde_json::Value = serde_json::from_str(text).unwrap();
        let entry_point = &selectors["EntryPoint"];
        let op = UserOperation::default();
        let check = |call: Vec<u8>, signature: String| {
            assert_eq!(
                hex::encode(&call[..4]),
                entry_point[&signature].as_str().unwrap(),
                "{signature}"
            );
        };
        check(
            handle_ops_call(std::slice::from_ref(&op), &Address::ZERO),
            format!("handleOps({PACKED_USER_OPERATION}[],address)"),
        );
        check(
            get_user_op_hash_call(&op),
            format!("getUserOpHash({PACKED_USER_OPERATION})"),
        );
        check(
            get_nonce_call(&Address::ZERO, U256::ZERO),
            "getNonce(address,uint192)".into(),
        );
        check(deposit_to_call(&Address::ZERO), "depositTo(address)".into());
    }

    /// One operation in `handleOps`: the array's offsets point at the tuple, whose `bytes`
    /// members point inside it (checked against the layout the ABI specification gives).
    #[test]
    fn handle_ops_lays_out_a_dynamic_tuple_array() {
        let op = UserOperation {
            call_data: vec![0xaa; 3],
            signature: vec![0xbb; 65],
            ..UserOperation::default()
        };
        let call = handle_ops_call(&[op], &Address::ZERO);
        let word = |i: usize| -> &[u8] { &call[4 + 32 * i..4 + 32 * (i + 1)] };
        let number = |i: usize| crate::abi::word_as_usize(word(i)).unwrap();
        assert_eq!(number(0), 64, "the array after the two head words");
        assert_eq!(number(2), 1, "one operation");
        assert_eq!(number(3), 32, "its tuple right after its one offset");
        // The tuple starts at word 4: nine head words; initCode's bytes come first.
        let tuple = 4;
        let init_code_at = number(tuple + 2) / 32 + tuple;
        assert_eq!(number(init_code_at), 0, "empty initCode");
        let call_data_at = number(tuple + 3) / 32 + tuple;
        assert_eq!(number(call_data_at), 3);
        assert_eq!(&word(call_data_at + 1)[..3], &[0xaa; 3]);
        let signature_at = number(tuple + 8) / 32 + tuple;
        assert_eq!(number(signature_at), 65);
        assert_eq!(call.len(), 4 + 32 * (signature_at + 1 + 3));
    }
}

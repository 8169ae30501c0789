//! The signed order as typed values: `Order` (the EIP-712 message), `SignedOrder` (an order and
//! a well-formed signature, not yet checked) and `VerifiedOrder` (one whose signature recovers
//! to its `signer`).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::address::Address;
use crate::eip712::{order_digest, ExchangeDomain};
use crate::fixed_bytes::{Bytes16, B256};
use crate::signature::{Signature, SignatureError};
use crate::u256::U256;
use crate::units::{price_and_size_from_amounts, AmountError};

pub use ladder_types::Side;

/// Who signs an order or cancel (API.md §2.3, API.md §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SignatureType {
    /// `0`: the maker's own key signs directly. Accepted for cancels; orders are refused later.
    Eoa,
    /// `3`: an EOA that controls the maker smart account signs (ERC-1271).
    SmartAccount,
    /// Any other `uint8` (`1` and `2` are Polymarket's proxy and Safe wallets): well formed,
    /// never accepted. An order with it is the rejection `unsupported signature type`; a
    /// cancel's parser refuses it as a bad field.
    Other(u8),
}

impl SignatureType {
    /// The wire integer.
    pub const fn as_u8(self) -> u8 {
        match self {
            SignatureType::Eoa => 0,
            SignatureType::SmartAccount => 3,
            SignatureType::Other(value) => value,
        }
    }

    /// The signature type of a wire integer.
    pub const fn from_u8(value: u8) -> SignatureType {
        match value {
            0 => SignatureType::Eoa,
            3 => SignatureType::SmartAccount,
            other => SignatureType::Other(other),
        }
    }
}

/// The signature type on the wire is an integer (0 or 3 are the ones with a meaning).
impl Serialize for SignatureType {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u8(self.as_u8())
    }
}

impl<'de> Deserialize<'de> for SignatureType {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<SignatureType, D::Error> {
        u8::deserialize(deserializer).map(SignatureType::from_u8)
    }
}

/// The EIP-712 `Order` message (API.md §4), every field typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Order {
    /// Random value that makes otherwise equal orders distinct.
    pub salt: U256,
    /// The account that trades (the smart account for `signatureType = 3`).
    pub maker: Address,
    /// The EOA whose key signed.
    pub signer: Address,
    /// Who receives the proceeds.
    pub beneficiary: Address,
    /// The outcome token traded.
    pub token_id: U256,
    /// Base units the maker gives: collateral for a BUY, shares for a SELL.
    pub maker_amount: U256,
    /// Base units the maker receives: shares for a BUY, collateral for a SELL.
    pub taker_amount: U256,
    /// Unix seconds after which the order is void; 0 means none.
    pub expiration: U256,
    /// Exchange nonce.
    pub nonce: U256,
    /// Client-chosen identifier.
    pub identifier: Bytes16,
    /// Client-chosen metadata.
    pub metadata: B256,
    /// BUY or SELL.
    pub side: Side,
    /// Who signed.
    pub signature_type: SignatureType,
}

impl Order {
    /// The EIP-712 digest, which is also the order hash.
    pub fn digest(&self, domain: &ExchangeDomain) -> [u8; 32] {
        order_digest(self, domain)
    }

    /// `(price_ticks, size_units)` implied by the amounts (see
    /// [`price_and_size_from_amounts`]).
    pub fn price_and_size(&self) -> Result<(u32, u64), AmountError> {
        price_and_size_from_amounts(self.side, self.maker_amount, self.taker_amount)
    }
}

/// An order with a well-formed signature that has not been checked yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SignedOrder {
    /// The signed message.
    pub order: Order,
    /// The signature as presented.
    pub signature: Signature,
}

impl SignedOrder {
    /// The EIP-712 digest of the order (its order hash).
    pub fn digest(&self, domain: &ExchangeDomain) -> [u8; 32] {
        order_digest(&self.order, domain)
    }

    /// The order with its digest computed once, for callers that need the hash before they
    /// verify (refusals name it).
    pub fn hashed(self, domain: &ExchangeDomain) -> HashedOrder {
        HashedOrder {
            hash: B256::from(self.digest(domain)),
            signed: self,
        }
    }

    /// Checks that the signature recovers to `order.signer`. Whether the signer controls the
    /// maker is a separate question (API.md §5).
    pub fn verify(self, domain: &ExchangeDomain) -> Result<VerifiedOrder, SignatureError> {
        self.hashed(domain).verify()
    }
}

/// A signed order and its EIP-712 digest (made by [`SignedOrder::hashed`], so the two agree).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HashedOrder {
    signed: SignedOrder,
    hash: B256,
}

impl HashedOrder {
    /// The order hash (the EIP-712 digest).
    pub const fn hash(&self) -> &B256 {
        &self.hash
    }

    /// Checks that the signature recovers to `order.signer` (see [`SignedOrder::verify`]).
    pub fn verify(self) -> Result<VerifiedOrder, SignatureError> {
        self.signed
            .signature
            .verify(&self.hash.0, &self.signed.order.signer)?;
        Ok(VerifiedOrder {
            order: self.signed.order,
            signature: self.signed.signature,
            hash: self.hash,
        })
    }
}

/// An order whose signature recovers to its `signer`. It can only be made by
/// [`SignedOrder::verify`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VerifiedOrder {
    order: Order,
    signature: Signature,
    hash: B256,
}

impl VerifiedOrder {
    /// The order.
    pub const fn order(&self) -> &Order {
        &self.order
    }

    /// The signature.
    pub const fn signature(&self) -> &Signature {
        &self.signature
    }

    /// The order hash (the EIP-712 digest).
    pub const fn hash(&self) -> &B256 {
        &self.hash
    }
}

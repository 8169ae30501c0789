//! `Wallet`: a secp256k1 secret key and its Ethereum address.

use ladder_protocol::fixed_bytes::decode_0x_hex;
use ladder_protocol::{address_of, sign_digest, Address, SecretKey, Signature};

use crate::client::error::ClientError;

/// A secp256k1 secret key and its address. Debug output never shows the key.
#[derive(Clone)]
pub struct Wallet {
    secret_key: SecretKey,
    address: Address,
}

impl Wallet {
    /// The wallet of a secret key.
    pub fn from_secret_key(secret_key: SecretKey) -> Wallet {
        Wallet {
            address: address_of(&secret_key),
            secret_key,
        }
    }

    /// The wallet of a `0x` + 64 hex private key.
    pub fn from_hex(private_key: &str) -> Result<Wallet, ClientError> {
        let bytes = decode_0x_hex::<32>(private_key).map_err(|_| ClientError::BadPrivateKey)?;
        let secret_key =
            SecretKey::from_byte_array(&bytes).map_err(|_| ClientError::BadPrivateKey)?;
        Ok(Wallet::from_secret_key(secret_key))
    }

    /// A new wallet with a random key from the thread RNG.
    pub fn random() -> Wallet {
        Wallet::from_secret_key(SecretKey::new(&mut rand::thread_rng()))
    }

    /// The wallet's address.
    pub const fn address(&self) -> Address {
        self.address
    }

    /// The secret key.
    pub const fn secret_key(&self) -> &SecretKey {
        &self.secret_key
    }

    /// Signs an EIP-712 digest (low-s, `v` 27/28).
    pub fn sign_digest(&self, digest: &[u8; 32]) -> Signature {
        sign_digest(&self.secret_key, digest)
    }
}

impl std::fmt::Debug for Wallet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wallet")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn development_key_has_its_known_address() {
        let wallet =
            Wallet::from_hex("0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80")
                .unwrap();
        assert_eq!(
            wallet.address().to_string(),
            "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
        );
        assert!(!format!("{wallet:?}").contains("ac0974"));
    }

    #[test]
    fn bad_keys_are_rejected() {
        assert_eq!(
            Wallet::from_hex("0x1234").unwrap_err(),
            ClientError::BadPrivateKey
        );
        let zero = format!("0x{}", "0".repeat(64));
        assert_eq!(
            Wallet::from_hex(&zero).unwrap_err(),
            ClientError::BadPrivateKey
        );
    }

    #[test]
    fn random_wallets_differ() {
        assert_ne!(Wallet::random().address(), Wallet::random().address());
    }
}

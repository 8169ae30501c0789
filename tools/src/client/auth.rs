//! Authentication headers: L1 (a `ClobAuth` signature by the wallet) and L2 (an HMAC of the
//! request with the API secret), and the `/ws/user` subscribe message (API.md §16).

use ladder_protocol::wire::ApiCredentials;
use ladder_protocol::{clob_auth_digest, Address, AuthDomain, L2Secret, U256};
use serde::Serialize;

use crate::client::error::ClientError;
use crate::client::wallet::Wallet;

/// The address header (L1 and L2).
pub const HEADER_ADDRESS: &str = "SVC_ADDRESS";
/// The signature header (L1: EIP-712 hex; L2: base64 HMAC).
pub const HEADER_SIGNATURE: &str = "SVC_SIGNATURE";
/// The Unix-seconds timestamp header.
pub const HEADER_TIMESTAMP: &str = "SVC_TIMESTAMP";
/// The L1 nonce header.
pub const HEADER_NONCE: &str = "SVC_NONCE";
/// The L2 API key header.
pub const HEADER_API_KEY: &str = "SVC_API_KEY";
/// The L2 passphrase header.
pub const HEADER_PASSPHRASE: &str = "SVC_PASSPHRASE";

/// Request headers as (name, value) pairs.
pub type Headers = Vec<(&'static str, String)>;

/// L1 headers for `address` (the wallet itself, or a smart account it controls), signed by
/// `wallet` as `ClobAuth(address, timestamp, nonce, message)`.
pub fn l1_headers(
    wallet: &Wallet,
    domain: &AuthDomain,
    address: Address,
    timestamp_s: u64,
    nonce: U256,
) -> Headers {
    let timestamp = timestamp_s.to_string();
    let signature = wallet.sign_digest(&clob_auth_digest(&address, &timestamp, nonce, domain));
    vec![
        (HEADER_ADDRESS, address.to_string()),
        (HEADER_SIGNATURE, signature.to_string()),
        (HEADER_TIMESTAMP, timestamp),
        (HEADER_NONCE, nonce.to_string()),
    ]
}

/// API credentials ready to sign requests: the secret is decoded once.
#[derive(Debug, Clone)]
pub struct L2Credentials {
    /// The key id.
    pub api_key: String,
    /// The decoded secret.
    pub secret: L2Secret,
    /// The passphrase.
    pub passphrase: String,
}

impl L2Credentials {
    /// Credentials from the POST /auth/api-key response.
    pub fn from_api_credentials(
        credentials: &ApiCredentials,
    ) -> Result<L2Credentials, ClientError> {
        Ok(L2Credentials {
            api_key: credentials.api_key.to_string(),
            secret: L2Secret::from_base64(&credentials.secret)?,
            passphrase: credentials.passphrase.clone(),
        })
    }
}

/// L2 headers for one request: `method` uppercase, `path_with_query` as sent, `body` the raw
/// body (empty when none). `address` is the key's address.
pub fn l2_headers(
    credentials: &L2Credentials,
    address: Address,
    timestamp_s: u64,
    method: &str,
    path_with_query: &str,
    body: &str,
) -> Headers {
    let timestamp = timestamp_s.to_string();
    let signature = credentials
        .secret
        .sign(&timestamp, method, path_with_query, body.as_bytes());
    vec![
        (HEADER_ADDRESS, address.to_string()),
        (HEADER_API_KEY, credentials.api_key.clone()),
        (HEADER_TIMESTAMP, timestamp),
        (HEADER_PASSPHRASE, credentials.passphrase.clone()),
        (HEADER_SIGNATURE, signature),
    ]
}

/// The first message on `/ws/user`: `{"type":"user","auth":{apiKey, passphrase, timestamp,
/// signature},"markets":[...]}`, where the signature is the L2 HMAC of
/// `timestamp + "GET" + "/ws/user"`. Empty `markets` subscribes to all.
pub fn ws_user_subscribe(
    credentials: &L2Credentials,
    timestamp_s: u64,
    markets: &[ladder_protocol::B256],
) -> String {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Auth<'a> {
        api_key: &'a str,
        passphrase: &'a str,
        timestamp: String,
        signature: String,
    }
    #[derive(Serialize)]
    struct Subscribe<'a> {
        r#type: &'static str,
        auth: Auth<'a>,
        markets: &'a [ladder_protocol::B256],
    }
    let timestamp = timestamp_s.to_string();
    let signature = credentials.secret.sign(&timestamp, "GET", "/ws/user", b"");
    let message = Subscribe {
        r#type: "user",
        auth: Auth {
            api_key: &credentials.api_key,
            passphrase: &credentials.passphrase,
            timestamp,
            signature,
        },
        markets,
    };
    // Serializing strings into a String cannot fail.
    serde_json::to_string(&message).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ladder_protocol::{verify_l2, Signature};

    const EOA0_KEY: &str = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
    const SECRET: &str = "c2VjcmV0LWZvci10ZXN0LXZlY3RvcnMtb25seS0zMmI=";

    fn header<'a>(headers: &'a Headers, name: &str) -> &'a str {
        headers
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.as_str())
            .unwrap()
    }

    fn credentials() -> L2Credentials {
        L2Credentials::from_api_credentials(&ApiCredentials {
            api_key: uuid::Uuid::nil(),
            secret: SECRET.to_string(),
            passphrase: "pass".to_string(),
        })
        .unwrap()
    }

    /// The EOA ClobAuth vector of `protocol/tests/data/signing.json`.
    #[test]
    fn l1_headers_match_the_known_answer() {
        let wallet = Wallet::from_hex(EOA0_KEY).unwrap();
        let headers = l1_headers(
            &wallet,
            &AuthDomain::default(),
            wallet.address(),
            1_700_000_000,
            U256::ZERO,
        );
        assert_eq!(
            header(&headers, HEADER_ADDRESS),
            "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
        );
        assert_eq!(header(&headers, HEADER_TIMESTAMP), "1700000000");
        assert_eq!(header(&headers, HEADER_NONCE), "0");
        assert_eq!(
            header(&headers, HEADER_SIGNATURE),
            "0x0e40ad2e71396cac32f22a0ccf8016e0ac012369cce3f2b0b31eb7424e093ca5031e2cbd67a5c71465763a179e52adb91b5c13952ab9c894287a574991cda9da1b"
        );
    }

    #[test]
    fn l1_headers_for_a_smart_account_recover_to_the_owner() {
        let wallet = Wallet::random();
        let account: Address = "0x5A11C0C0a000000000000000000000000000a002"
            .parse()
            .unwrap();
        let domain = AuthDomain::default();
        let headers = l1_headers(&wallet, &domain, account, 1_700_000_123, U256::from_u64(5));
        let signature: Signature = header(&headers, HEADER_SIGNATURE).parse().unwrap();
        let digest = clob_auth_digest(&account, "1700000123", U256::from_u64(5), &domain);
        assert_eq!(signature.recover_address(&digest), Ok(wallet.address()));
    }

    /// The `GET /orders` HMAC vector of `protocol/tests/data/signing.json`.
    #[test]
    fn l2_headers_match_the_known_answer() {
        let path = "/orders?market=0x3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b&limit=2";
        let headers = l2_headers(
            &credentials(),
            Address::ZERO,
            1_700_000_000,
            "GET",
            path,
            "",
        );
        assert_eq!(
            header(&headers, HEADER_SIGNATURE),
            "i6l8Ecb7PK00vmr9HbSLqMaGTq6xrWxNCnp9R24PDOw="
        );
        assert_eq!(
            header(&headers, HEADER_API_KEY),
            uuid::Uuid::nil().to_string()
        );
        assert_eq!(header(&headers, HEADER_PASSPHRASE), "pass");
        assert_eq!(header(&headers, HEADER_TIMESTAMP), "1700000000");
    }

    #[test]
    fn ws_subscribe_carries_the_ws_user_hmac() {
        let message = ws_user_subscribe(&credentials(), 1_700_000_002, &[]);
        let value: serde_json::Value = serde_json::from_str(&message).unwrap();
        assert_eq!(value["type"], "user");
        assert_eq!(
            value["auth"]["signature"],
            "ll205u1Jq6e0XVKwZv-l0fT8Eyrffyvk7him_W-zaF0="
        );
        assert_eq!(value["markets"], serde_json::json!([]));
        let signature = value["auth"]["signature"].as_str().unwrap();
        assert!(verify_l2(
            SECRET,
            "1700000002",
            "GET",
            "/ws/user",
            b"",
            signature
        ));
    }
}

//! L2 request authentication (API.md §6, API.md §6): HMAC-SHA256 over
//! `timestamp + METHOD + path-with-query + body`, keyed with the base64-decoded API secret, and
//! constant-time comparisons.

use base64::alphabet;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, URL_SAFE};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

type HmacSha256 = Hmac<Sha256>;

/// The longest base64 text accepted for a secret or a presented signature.
const BASE64_TEXT_MAX: usize = 256;

/// URL-safe alphabet, padding optional on decode.
const URL_SAFE_LENIENT: GeneralPurpose = GeneralPurpose::new(
    &alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Why an API secret cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum L2Error {
    /// The secret is not base64 (URL-safe or standard alphabet, padded or not).
    #[error("API secret is not valid base64")]
    SecretNotBase64,
}

/// Decodes base64 in the URL-safe or the standard alphabet, with or without `=` padding.
fn decode_base64_lenient(text: &str) -> Option<Vec<u8>> {
    if text.len() > BASE64_TEXT_MAX {
        return None;
    }
    let mut normalized = [0u8; BASE64_TEXT_MAX];
    let normalized = &mut normalized[..text.len()];
    for (out, byte) in normalized.iter_mut().zip(text.bytes()) {
        *out = match byte {
            b'+' => b'-',
            b'/' => b'_',
            other => other,
        };
    }
    URL_SAFE_LENIENT.decode(normalized).ok()
}

/// An API secret decoded and keyed into HMAC once, ready to sign and verify requests.
#[derive(Clone)]
pub struct L2Secret {
    keyed: HmacSha256,
}

impl std::fmt::Debug for L2Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("L2Secret(..)")
    }
}

impl L2Secret {
    /// Decodes a base64 secret (URL-safe or standard alphabet, padded or not).
    pub fn from_base64(secret_b64: &str) -> Result<L2Secret, L2Error> {
        let key = decode_base64_lenient(secret_b64).ok_or(L2Error::SecretNotBase64)?;
        Ok(L2Secret::from_bytes(&key))
    }

    /// The secret from raw key bytes.
    pub fn from_bytes(key: &[u8]) -> L2Secret {
        // HMAC accepts keys of any length, so this cannot fail.
        let keyed = <HmacSha256 as Mac>::new_from_slice(key)
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        L2Secret { keyed }
    }

    /// The HMAC over the canonical string, not yet finalized.
    fn mac(&self, timestamp: &str, method: &str, path_with_query: &str, body: &[u8]) -> HmacSha256 {
        let mut mac = self.keyed.clone();
        mac.update(timestamp.as_bytes());
        mac.update(method.as_bytes());
        mac.update(path_with_query.as_bytes());
        mac.update(body);
        mac
    }

    /// The signature of a request: URL-safe base64 with `=` padding. `method` must be the
    /// uppercase HTTP method; `body` is the raw body (empty when there is none).
    pub fn sign(
        &self,
        timestamp: &str,
        method: &str,
        path_with_query: &str,
        body: &[u8],
    ) -> String {
        let tag = self
            .mac(timestamp, method, path_with_query, body)
            .finalize()
            .into_bytes();
        URL_SAFE.encode(tag)
    }

    /// True when `presented` (either base64 alphabet, padded or not) is the request's signature.
    /// The comparison is constant time.
    pub fn verify(
        &self,
        timestamp: &str,
        method: &str,
        path_with_query: &str,
        body: &[u8],
        presented: &str,
    ) -> bool {
        let Some(tag) = decode_base64_lenient(presented) else {
            return false;
        };
        self.mac(timestamp, method, path_with_query, body)
            .verify_slice(&tag)
            .is_ok()
    }
}

/// The L2 signature of a request, keyed with a base64 secret (see [`L2Secret::sign`]).
pub fn l2_signature(
    secret_b64: &str,
    timestamp: &str,
    method: &str,
    path_with_query: &str,
    body: &[u8],
) -> Result<String, L2Error> {
    Ok(L2Secret::from_base64(secret_b64)?.sign(timestamp, method, path_with_query, body))
}

/// True when `presented` is the L2 signature of the request (see [`L2Secret::verify`]). An
/// undecodable secret verifies nothing.
pub fn verify_l2(
    secret_b64: &str,
    timestamp: &str,
    method: &str,
    path_with_query: &str,
    body: &[u8],
    presented: &str,
) -> bool {
    L2Secret::from_base64(secret_b64)
        .is_ok_and(|secret| secret.verify(timestamp, method, path_with_query, body, presented))
}

/// Compares two byte strings in time that depends only on their lengths (for passphrases).
pub fn constant_time_eq(left: &[u8], right: &[u8]) -> bool {
    left.ct_eq(right).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "c2VjcmV0LWZvci10ZXN0LXZlY3RvcnMtb25seS0zMmI=";
    const POST_BODY: &str = "{\"orderType\":\"GTC\",\"order\":{\"salt\":\"1\"}}";
    const POST_SIGNATURE: &str = "PKUXSxde5Et7_oWzLJVM5tZjHH5sFwYeH_efupxk5oo=";

    fn secret() -> L2Secret {
        L2Secret::from_base64(SECRET).unwrap()
    }

    #[test]
    fn signature_is_url_safe_base64_with_padding() {
        let signature = secret().sign("1700000000", "POST", "/order", POST_BODY.as_bytes());
        assert_eq!(signature, POST_SIGNATURE);
    }

    #[test]
    fn verify_accepts_both_alphabets_padded_or_not() {
        let standard = POST_SIGNATURE.replace('-', "+").replace('_', "/");
        let presented = [
            POST_SIGNATURE.to_string(),
            POST_SIGNATURE.trim_end_matches('=').to_string(),
            standard.clone(),
            standard.trim_end_matches('=').to_string(),
        ];
        for signature in presented {
            assert!(
                secret().verify(
                    "1700000000",
                    "POST",
                    "/order",
                    POST_BODY.as_bytes(),
                    &signature
                ),
                "{signature}"
            );
        }
    }

    #[test]
    fn verify_rejects_other_requests_and_garbage() {
        let secret = secret();
        let body = POST_BODY.as_bytes();
        assert!(!secret.verify("1700000001", "POST", "/order", body, POST_SIGNATURE));
        assert!(!secret.verify("1700000000", "POST", "/orders", body, POST_SIGNATURE));
        assert!(!secret.verify("1700000000", "POST", "/order", b"", POST_SIGNATURE));
        assert!(!secret.verify("1700000000", "POST", "/order", body, "not base64!"));
        assert!(!secret.verify("1700000000", "POST", "/order", body, ""));
        assert!(!secret.verify("1700000000", "POST", "/order", body, &"A".repeat(1000)));
    }

    #[test]
    fn secrets_decode_in_either_alphabet_padded_or_not() {
        let key = [0xfbu8, 0xff, 0xbf, 0x01];
        let standard = base64::engine::general_purpose::STANDARD.encode(key);
        assert!(standard.contains('+') || standard.contains('/'));
        for text in [
            standard.clone(),
            standard.trim_end_matches('=').to_string(),
            URL_SAFE.encode(key),
        ] {
            let signature = L2Secret::from_base64(&text)
                .unwrap()
                .sign("1", "GET", "/", b"");
            assert_eq!(
                signature,
                L2Secret::from_bytes(&key).sign("1", "GET", "/", b""),
                "{text}"
            );
        }
        assert_eq!(
            L2Secret::from_base64("!!!").unwrap_err(),
            L2Error::SecretNotBase64
        );
    }

    #[test]
    fn free_functions_agree_with_the_secret_type() {
        let body = POST_BODY.as_bytes();
        let signature = l2_signature(SECRET, "1700000000", "POST", "/order", body).unwrap();
        assert_eq!(signature, POST_SIGNATURE);
        assert!(verify_l2(
            SECRET,
            "1700000000",
            "POST",
            "/order",
            body,
            &signature
        ));
        assert!(!verify_l2(
            "!!!",
            "1700000000",
            "POST",
            "/order",
            body,
            &signature
        ));
    }

    #[test]
    fn constant_time_eq_compares_content_and_length() {
        assert!(constant_time_eq(b"passphrase", b"passphrase"));
        assert!(!constant_time_eq(b"passphrase", b"passphrasf"));
        assert!(!constant_time_eq(b"passphrase", b"passphras"));
    }
}

//! L1 (wallet signature over ClobAuth) and L2 (HMAC) authentication (API.md §6, API.md §5–4).
//! Both run on gateway threads; neither touches the sequencer except for the smart-account
//! check of L1, which the caller does as a query.

use ladder_protocol::{clob_auth_digest, Address, AuthDomain, Signature, U256};
use uuid::Uuid;

use crate::http::Request;
use crate::keys::KeyTable;

/// Allowed distance between a client's timestamp and server time.
pub const TIMESTAMP_SKEW_MAX_S: u64 = 30;

/// API.md §18's text for missing L1 headers.
pub const L1_REQUIRED: &str = "L1 ClobAuth headers required";
/// API.md §18's text for missing L2 credentials.
pub const L2_REQUIRED: &str = "HMAC L2 credentials required";
/// API.md §18's text for an L1 signature by someone else.
pub const L1_MISMATCH: &str = "L1 auth address does not match request address";

/// Why authentication failed: a 401 with this text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthError(pub String);

impl AuthError {
    fn new(text: impl Into<String>) -> AuthError {
        AuthError(text.into())
    }
}

/// A request authenticated with L2.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct L2Principal {
    /// The key that signed.
    pub key_id: Uuid,
    /// The key's address (the maker).
    pub address: Address,
}

/// The value of credential header `name` (its first copy with a value); an empty value counts
/// as missing (so that an empty `SVC_API_KEY:` is "credentials required", not a malformed key).
pub fn credential<'a>(request: &'a Request, name: &'a str) -> Option<&'a str> {
    credential_copies(request, name).next()
}

/// The copies of credential header `name` that have a value, in order (an empty one counts as
/// missing).
fn credential_copies<'a>(request: &'a Request, name: &'a str) -> impl Iterator<Item = &'a str> {
    request
        .header_values(name)
        .filter(|value| !value.trim().is_empty())
}

/// The credential headers of L1 and L2.
const CREDENTIAL_HEADERS: [&str; 6] = [
    "svc_address",
    "svc_signature",
    "svc_timestamp",
    "svc_nonce",
    "svc_api_key",
    "svc_passphrase",
];

/// Refuses a request that sends a credential header twice with a value: which of two keys,
/// signatures or timestamps is meant is not for the service to guess (a 401 naming the
/// header). An empty copy counts as missing, as for [`credential`].
fn refuse_repeated_credentials(request: &Request) -> Result<(), AuthError> {
    match CREDENTIAL_HEADERS
        .iter()
        .find(|name| credential_copies(request, name).count() > 1)
    {
        Some(name) => Err(AuthError::new(format!(
            "{}: sent more than once",
            name.to_ascii_uppercase()
        ))),
        None => Ok(()),
    }
}

/// Checks the L2 headers of `request` against the key table.
pub fn authenticate_l2(
    keys: &KeyTable,
    request: &Request,
    now_s: u64,
) -> Result<L2Principal, AuthError> {
    refuse_repeated_credentials(request)?;
    let api_key = credential(request, "svc_api_key");
    let timestamp = credential(request, "svc_timestamp");
    let passphrase = credential(request, "svc_passphrase");
    let signature = credential(request, "svc_signature");
    let (Some(api_key), Some(timestamp), Some(passphrase), Some(signature)) =
        (api_key, timestamp, passphrase, signature)
    else {
        return Err(AuthError::new(L2_REQUIRED));
    };
    check_timestamp(timestamp, now_s, "L2 SVC_TIMESTAMP")?;
    let key_id = Uuid::parse_str(api_key)
        .map_err(|_| AuthError::new("invalid L2 credentials: SVC_API_KEY is not a UUID"))?;
    let entry = keys
        .get(&key_id)
        .ok_or_else(|| AuthError::new("invalid L2 credentials: unknown or deleted API key"))?;
    if !ladder_protocol::constant_time_eq(passphrase.as_bytes(), entry.passphrase.as_bytes()) {
        return Err(AuthError::new("invalid L2 credentials: wrong passphrase"));
    }
    let method = request.method.as_str();
    if !entry
        .secret
        .verify(timestamp, method, &request.target, &request.body, signature)
    {
        return Err(AuthError::new(
            "invalid L2 signature: HMAC does not match timestamp + method + path + body",
        ));
    }
    if let Some(claimed) = credential(request, "svc_address") {
        // Worded as L1 words a malformed one; a well-formed other address is a mismatch.
        let address = Address::parse(claimed)
            .map_err(|e| AuthError::new(format!("invalid SVC_ADDRESS: {e}")))?;
        if address != entry.address {
            return Err(AuthError::new(
                "SVC_ADDRESS does not match the API key's address",
            ));
        }
    }
    Ok(L2Principal {
        key_id,
        address: entry.address,
    })
}

/// An L1 claim whose signature checked out: `signer` signed a ClobAuth for `address`.
/// When they differ, `address` must be a smart account that `signer` controls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct L1Claim {
    /// The address asking (EOA or smart account).
    pub address: Address,
    /// Who signed.
    pub signer: Address,
    /// The ClobAuth nonce (a uint256; default 0).
    pub nonce: U256,
    /// The ClobAuth digest that was signed.
    pub digest: [u8; 32],
    /// The signature.
    pub signature: Signature,
    /// Set when the smart account itself accepted the signature on the chain (ERC-1271).
    pub accepted_on_chain: bool,
    /// Why the chain was not asked, when it was not (the registry decides then).
    pub chain_unasked: Option<ChainUnasked>,
}

/// Why an L1 claim's smart account was not asked on the chain (the registry decided alone);
/// a refusal says it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChainUnasked {
    /// The node could not be reached; the text says why (503).
    Unreachable(String),
    /// The client's budget of chain calls is spent: 429, try again in this many seconds.
    OverBudget(u64),
}

impl L1Claim {
    /// Whether the signer may act for the address without the registry: it is the address
    /// (an EOA), or the account accepted its signature on the chain.
    pub fn acts_alone(&self) -> bool {
        self.address == self.signer || self.accepted_on_chain
    }

    /// The signer the engine must find in its registry: the address itself when the claim
    /// acts alone.
    pub fn registry_signer(&self) -> Address {
        if self.acts_alone() {
            self.address
        } else {
            self.signer
        }
    }
}

/// Checks the L1 headers of `request`; the smart-account check is left to the caller.
pub fn authenticate_l1(
    request: &Request,
    now_s: u64,
    domain: &AuthDomain,
) -> Result<L1Claim, AuthError> {
    refuse_repeated_credentials(request)?;
    let address = credential(request, "svc_address");
    let signature = credential(request, "svc_signature");
    let timestamp = credential(request, "svc_timestamp");
    let (Some(address), Some(signature), Some(timestamp)) = (address, signature, timestamp) else {
        return Err(AuthError::new(L1_REQUIRED));
    };
    let address =
        Address::parse(address).map_err(|e| AuthError::new(format!("invalid SVC_ADDRESS: {e}")))?;
    check_timestamp(timestamp, now_s, "L1 SVC_TIMESTAMP")?;
    let nonce = match credential(request, "svc_nonce") {
        None => U256::ZERO,
        Some(text) => U256::from_dec_str(text)
            .map_err(|e| AuthError::new(format!("invalid SVC_NONCE: {e}")))?,
    };
    let signature = Signature::from_hex(signature)
        .map_err(|e| AuthError::new(format!("invalid SVC_SIGNATURE: {e}")))?;
    let digest = clob_auth_digest(&address, timestamp, nonce, domain);
    let signer = signature
        .recover_address(&digest)
        .map_err(|e| AuthError::new(format!("invalid SVC_SIGNATURE: {e}")))?;
    Ok(L1Claim {
        address,
        signer,
        nonce,
        digest,
        signature,
        accepted_on_chain: false,
        chain_unasked: None,
    })
}

/// Checks a signed timestamp; `name` is what the client called it (`L1 SVC_TIMESTAMP`,
/// `L2 SVC_TIMESTAMP`, `auth.timestamp`).
fn check_timestamp(text: &str, now_s: u64, name: &str) -> Result<(), AuthError> {
    let ts = crate::http::decimal_u64(text)
        .ok_or_else(|| AuthError::new(format!("invalid {name}: expected Unix seconds")))?;
    if ts.abs_diff(now_s) > TIMESTAMP_SKEW_MAX_S {
        return Err(AuthError::new(format!(
            "{name} {ts} is more than {TIMESTAMP_SKEW_MAX_S} s from server time {now_s}"
        )));
    }
    Ok(())
}

/// Whom a `/ws/user` subscription speaks for: the account, and the API key it authenticated
/// with (the subscription ends when that key is deleted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UserAuth {
    /// The key's address.
    pub address: Address,
    /// The key.
    pub key_id: Uuid,
}

/// Checks the `auth` object of a `/ws/user` subscription (API.md §16): `apiKey` and
/// `passphrase`, and either `timestamp` + `signature` (the L2 HMAC of
/// `timestamp + "GET" + "/ws/user"`) or the `secret` itself.
pub fn authenticate_ws_user(
    keys: &KeyTable,
    auth: &serde_json::Value,
    now_s: u64,
) -> Result<UserAuth, AuthError> {
    // Every field is a string; one of another type is named as such, not taken as missing.
    for name in ["apiKey", "passphrase", "timestamp", "signature", "secret"] {
        if auth
            .get(name)
            .is_some_and(|v| !v.is_string() && !v.is_null())
        {
            return Err(AuthError::new(format!("auth.{name}: expected a string")));
        }
    }
    let field = |name: &str| auth.get(name).and_then(serde_json::Value::as_str);
    let (Some(api_key), Some(passphrase)) = (field("apiKey"), field("passphrase")) else {
        return Err(AuthError::new("auth: apiKey and passphrase are required"));
    };
    let key_id =
        Uuid::parse_str(api_key).map_err(|_| AuthError::new("auth.apiKey: expected a UUID"))?;
    let entry = keys
        .get(&key_id)
        .ok_or_else(|| AuthError::new("auth: unknown or deleted API key"))?;
    if !ladder_protocol::constant_time_eq(passphrase.as_bytes(), entry.passphrase.as_bytes()) {
        return Err(AuthError::new("auth: wrong passphrase"));
    }
    match (field("timestamp"), field("signature"), field("secret")) {
        (Some(timestamp), Some(signature), _) => {
            check_timestamp(timestamp, now_s, "auth.timestamp")?;
            if !entry
                .secret
                .verify(timestamp, "GET", "/ws/user", b"", signature)
            {
                return Err(AuthError::new(
                    "auth: signature is not the HMAC of timestamp + GET + /ws/user",
                ));
            }
        }
        (_, _, Some(secret)) => {
            let presented = ladder_protocol::L2Secret::from_base64(secret)
                .map_err(|_| AuthError::new("auth.secret: not base64"))?;
            // Equal secrets sign alike: compare what each signs for a fixed message.
            let probe = |s: &ladder_protocol::L2Secret| s.sign("0", "GET", "/ws/user", b"");
            if !ladder_protocol::constant_time_eq(
                probe(&presented).as_bytes(),
                probe(&entry.secret).as_bytes(),
            ) {
                return Err(AuthError::new("auth: wrong secret"));
            }
        }
        _ => {
            return Err(AuthError::new(
                "auth: timestamp and signature (or secret) are required",
            ))
        }
    }
    Ok(UserAuth {
        address: entry.address,
        key_id,
    })
}

//! Black-box checks of L1 (ClobAuth), API keys and L2 (HMAC) against API.md §6, 7 and
//! API.md §5–5.

mod helpers;
mod support;

use helpers::*;
use ladder_client::{l1_headers, l2_headers, unix_now_s, L2Credentials, Trader, Wallet};
use ladder_protocol::{Address, AuthDomain, U256};
use serde_json::{json, Value};
use support::*;

fn owned(headers: ladder_client::Headers) -> Vec<(String, String)> {
    headers
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

/// Demo trader `i` without credentials.
fn demo(service: &Service, i: usize) -> Trader {
    Trader::new(
        &service.url,
        Wallet::from_hex(KEYS[i].0).unwrap(),
        Address::parse(KEYS[i].1).unwrap(),
    )
    .unwrap()
}

/// L1 headers for `address`, signed by `wallet`, at `ts`.
fn l1(wallet: &Wallet, address: Address, ts: u64, nonce: u64) -> Vec<(String, String)> {
    owned(l1_headers(
        wallet,
        &AuthDomain::default(),
        address,
        ts,
        U256::from_u64(nonce),
    ))
}

/// L2 headers of `trader` at `ts`.
fn l2_at(trader: &Trader, ts: u64, method: &str, path: &str, body: &str) -> Vec<(String, String)> {
    let creds = L2Credentials::from_api_credentials(trader.credentials.as_ref().unwrap()).unwrap();
    owned(l2_headers(&creds, trader.account, ts, method, path, body))
}

fn api_key(trader: &Trader) -> String {
    trader.credentials.as_ref().unwrap().api_key.to_string()
}

/// Renames the `SVC_*` headers with `rename`.
fn renamed(headers: &[(String, String)], rename: impl Fn(&str) -> String) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(n, v)| (rename(n), v.clone()))
        .collect()
}

/// `SVC_API_KEY` → `Svc-Api-Key`.
fn hyphenated(name: &str) -> String {
    name.split('_')
        .map(|part| {
            let lower = part.to_ascii_lowercase();
            let mut chars = lower.chars();
            match chars.next() {
                Some(c) => c.to_ascii_uppercase().to_string() + chars.as_str(),
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join("-")
}

fn is_base64_of_32_bytes(text: &str) -> bool {
    let alphabet = |c: char| c.is_ascii_alphanumeric() || "+/-_".contains(c);
    let trimmed = text.trim_end_matches('=');
    trimmed.len() == 43 && trimmed.chars().all(alphabet) && (text.len() == 43 || text.len() == 44)
}

fn sorted(values: &Value) -> Vec<String> {
    let mut v: Vec<String> = values
        .as_array()
        .unwrap_or_else(|| panic!("array: {values}"))
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn l1_missing_headers_are_401_with_the_spec_text() {
    let service = Service::start(&[]);
    for (method, path) in [
        ("POST", "/auth/api-key"),
        ("GET", "/auth/derive-api-key"),
        ("GET", "/auth/api-keys"),
    ] {
        let r = public(&service, method, path, None);
        assert_error(&r, 401, "L1 ClobAuth headers required");
    }
    let r = public(&service, "DELETE", "/auth/api-key", None);
    assert_eq!(r.status, 401, "{}", r.body);
    error_text(&r, 401);

    let alice = demo(&service, 0);
    let full = alice.l1(0);
    let mut http = service.http();
    for name in ["SVC_ADDRESS", "SVC_SIGNATURE", "SVC_TIMESTAMP"] {
        let r = http
            .request("POST", "/auth/api-key", &without_header(&full, name), None)
            .unwrap();
        assert_error(&r, 401, "L1 ClobAuth headers required");
    }
    // SVC_NONCE is optional and defaults to 0.
    let r = http
        .request(
            "POST",
            "/auth/api-key",
            &without_header(&full, "SVC_NONCE"),
            None,
        )
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let derived = http
        .request("GET", "/auth/derive-api-key", &alice.l1(0), None)
        .unwrap();
    assert_eq!(derived.status, 200, "{}", derived.body);
    assert_eq!(derived.json(), r.json(), "nonce 0 is the default nonce");
}

#[test]
fn l1_signed_by_another_key_is_401_address_mismatch() {
    let service = Service::start(&[]);
    let mut http = service.http();
    let stranger = Wallet::random();
    let alice_account = Address::parse(KEYS[0].1).unwrap();
    let alice_eoa = Wallet::from_hex(KEYS[0].0).unwrap().address();
    let bob_eoa = Wallet::from_hex(KEYS[1].0).unwrap();
    let now = unix_now_s();
    // A stranger for a smart account, a stranger for an EOA, and the other trader's owner.
    for headers in [
        l1(&stranger, alice_account, now, 0),
        l1(&stranger, alice_eoa, now, 0),
        l1(&bob_eoa, alice_account, now, 0),
    ] {
        for (method, path) in [
            ("POST", "/auth/api-key"),
            ("GET", "/auth/derive-api-key"),
            ("GET", "/auth/api-keys"),
        ] {
            let r = http.request(method, path, &headers, None).unwrap();
            assert_error(&r, 401, "L1 auth address does not match request address");
        }
    }
    // The owner itself may act for its account and for itself.
    let owner = Wallet::from_hex(KEYS[0].0).unwrap();
    let r = http
        .request(
            "POST",
            "/auth/api-key",
            &l1(&owner, alice_account, now, 0),
            None,
        )
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let r = http
        .request(
            "POST",
            "/auth/api-key",
            &l1(&owner, alice_eoa, now, 0),
            None,
        )
        .unwrap();
    assert_eq!(r.status, 200, "an EOA authenticates as itself: {}", r.body);
}

#[test]
fn l1_timestamp_must_be_within_30_seconds() {
    let service = Service::start(&[]);
    let mut http = service.http();
    let owner = Wallet::from_hex(KEYS[0].0).unwrap();
    let account = Address::parse(KEYS[0].1).unwrap();
    let now = unix_now_s();
    for ts in [now - 120, now - 60, now + 60, now + 120, 0] {
        let r = http
            .request("POST", "/auth/api-key", &l1(&owner, account, ts, 0), None)
            .unwrap();
        error_text(&r, 401);
    }
    let mut bad_ts = l1(&owner, account, now, 0);
    bad_ts = with_header(&bad_ts, "SVC_TIMESTAMP", "yesterday");
    error_text(
        &http
            .request("POST", "/auth/api-key", &bad_ts, None)
            .unwrap(),
        401,
    );
    let r = http
        .request(
            "POST",
            "/auth/api-key",
            &l1(&owner, account, now - 10, 0),
            None,
        )
        .unwrap();
    assert_eq!(r.status, 200, "10 s of skew is fine: {}", r.body);
}

#[test]
fn hyphenated_and_lowercase_header_forms_are_accepted() {
    let service = Service::start(&[]);
    let mut alice = demo(&service, 0);
    let mut http = service.http();
    let headers = renamed(&alice.l1(3), hyphenated);
    assert!(headers.iter().any(|(n, _)| n == "Svc-Address"));
    let created = http
        .request("POST", "/auth/api-key", &headers, None)
        .unwrap();
    assert_eq!(created.status, 200, "{}", created.body);
    let headers = renamed(&alice.l1(3), |n| n.to_ascii_lowercase());
    let derived = http
        .request("GET", "/auth/derive-api-key", &headers, None)
        .unwrap();
    assert_eq!(derived.status, 200, "{}", derived.body);
    assert_eq!(derived.json(), created.json());

    // L2 with hyphenated names too (API.md §6).
    alice.credentials = serde_json::from_str(&created.body).unwrap();
    let headers = renamed(&alice.l2("GET", "/orders", "").unwrap(), hyphenated);
    assert!(headers.iter().any(|(n, _)| n == "Svc-Api-Key"));
    let r = http.request("GET", "/orders", &headers, None).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json(),
        json!({ "data": [], "next_cursor": "LTE=", "count": 0, "limit": 100 })
    );

    // A credential header sent twice (under either spelling) is refused, whichever comes first.
    let mut twice = alice.l2("GET", "/orders", "").unwrap();
    twice.push(("svc-api-key".into(), uuid::Uuid::new_v4().to_string()));
    let r = http.request("GET", "/orders", &twice, None).unwrap();
    assert_eq!(r.status, 401, "{}", r.body);
    assert_eq!(
        r.json(),
        json!({ "error": "SVC_API_KEY: sent more than once" })
    );
    let mut twice = alice.l1(3);
    twice.insert(0, ("SVC_TIMESTAMP".into(), "1".into()));
    let r = http
        .request("GET", "/auth/derive-api-key", &twice, None)
        .unwrap();
    assert_eq!(r.status, 401, "{}", r.body);
    assert_eq!(
        r.json(),
        json!({ "error": "SVC_TIMESTAMP: sent more than once" })
    );
    // An empty copy counts as missing: the one with a value is used.
    let mut with_empty = vec![("svc-api-key".to_string(), String::new())];
    with_empty.extend(alice.l2("GET", "/orders", "").unwrap());
    let r = http.request("GET", "/orders", &with_empty, None).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn create_returns_camel_case_credentials_that_work() {
    let service = Service::start(&[]);
    let mut alice = demo(&service, 0);
    let r = alice.create_api_key(0).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    let obj = v.as_object().unwrap();
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["apiKey", "passphrase", "secret"], "{v}");
    let key = uuid::Uuid::parse_str(v["apiKey"].as_str().unwrap()).expect("apiKey is a UUID");
    assert_eq!(key.get_version_num(), 4, "apiKey is a UUIDv4");
    assert!(
        is_base64_of_32_bytes(v["secret"].as_str().unwrap()),
        "secret is base64 of 32 bytes: {v}"
    );
    assert!(!v["passphrase"].as_str().unwrap().is_empty());
    let r = alice.send("GET", "/orders", None).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    // Two keys are distinct.
    let second = alice.create_api_key(1).unwrap().json();
    assert_ne!(second["apiKey"], v["apiKey"]);
    assert_ne!(second["secret"], v["secret"]);
}

#[test]
fn derive_returns_the_same_credentials_for_the_same_nonce_and_404_otherwise() {
    let mut service = Service::start(&[]);
    let mut alice = demo(&service, 0);
    let created = alice.create_api_key(7).unwrap();
    assert_eq!(created.status, 200, "{}", created.body);
    let derived = alice.derive_api_key(7).unwrap();
    assert_eq!(derived.status, 200, "{}", derived.body);
    assert_eq!(derived.json(), created.json());
    // The derived credentials sign L2 requests.
    let r = alice.send("GET", "/orders", None).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);

    let missing = alice.derive_api_key(8).unwrap();
    error_text(&missing, 404);
    let other = alice.create_api_key(8).unwrap().json();
    assert_ne!(other, created.json());
    assert_eq!(alice.derive_api_key(8).unwrap().json(), other);
    assert_eq!(alice.derive_api_key(7).unwrap().json(), created.json());

    // A nonce already used does not mint a second key: derive it.
    let again = error_text(&alice.create_api_key(7).unwrap(), 400);
    assert!(again.contains("SVC_NONCE"), "{again}");
    assert_eq!(alice.derive_api_key(7).unwrap().json(), created.json());
    let r = service
        .http()
        .request("GET", "/auth/api-keys", &alice.l1(0), None)
        .unwrap();
    assert_eq!(
        r.json()["apiKeys"].as_array().map(Vec::len),
        Some(2),
        "{}",
        r.body
    );

    // Another wallet's nonce 7 is not alice's.
    let mut bob = demo(&service, 1);
    error_text(&bob.derive_api_key(7).unwrap(), 404);

    // Keys derive from the master key, the address, the nonce and how many keys were made
    // before with that nonce (API.md §7): deleted and created again with the same nonce, it
    // is a new key, and the deleted one never signs again.
    alice.credentials = serde_json::from_value(created.json()).ok();
    let r = alice.send("DELETE", "/auth/api-key", None).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    error_text(&alice.derive_api_key(7).unwrap(), 404);
    let recreated = alice.create_api_key(7).unwrap();
    assert_eq!(recreated.status, 200, "{}", recreated.body);
    let (old, new) = (created.json(), recreated.json());
    for field in ["apiKey", "secret", "passphrase"] {
        assert_ne!(old[field], new[field], "{field} came back");
    }
    assert_eq!(
        alice.derive_api_key(7).unwrap().json(),
        new,
        "derive gives the live key"
    );
    let r = alice.send("GET", "/orders", None).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let deleted = alice
        .credentials
        .replace(serde_json::from_value(old).unwrap());
    error_text(&alice.send("GET", "/orders", None).unwrap(), 401);
    alice.credentials = deleted;

    // After a restart the count holds: a third creation is yet another key.
    let r = alice.send("DELETE", "/auth/api-key", None).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    service.kill_and_restart();
    let third = alice.create_api_key(7).unwrap();
    assert_eq!(third.status, 200, "{}", third.body);
    assert_ne!(third.json()["apiKey"], new["apiKey"]);
    assert_ne!(third.json()["apiKey"], created.json()["apiKey"]);
}

#[test]
fn list_keys_with_l1_or_l2() {
    let service = Service::start(&[]);
    let mut alice = demo(&service, 0);
    let mut created = Vec::new();
    for nonce in 0..3 {
        let r = alice.create_api_key(nonce).unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        created.push(r.json()["apiKey"].as_str().unwrap().to_string());
    }
    created.sort();
    let mut http = service.http();
    let r = http
        .request("GET", "/auth/api-keys", &alice.l1(0), None)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v.as_object().unwrap().len(), 1, "{v}");
    assert_eq!(sorted(&v["apiKeys"]), created);
    let r = alice.send("GET", "/auth/api-keys", None).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(sorted(&r.json()["apiKeys"]), created);

    let mut bob = demo(&service, 1);
    bob.create_api_key(0).unwrap();
    let r = bob.send("GET", "/auth/api-keys", None).unwrap();
    assert_eq!(r.json(), json!({ "apiKeys": [api_key(&bob)] }));
}

#[test]
fn the_key_limit_is_400_and_deleting_frees_a_slot() {
    let service = Service::start(&["--max-keys-per-user", "2"]);
    let mut alice = demo(&service, 0);
    assert_eq!(alice.create_api_key(0).unwrap().status, 200);
    assert_eq!(alice.create_api_key(1).unwrap().status, 200);
    let r = alice.create_api_key(2).unwrap();
    assert_error(&r, 400, "api key limit reached");
    // The other wallet has its own allowance.
    let mut bob = demo(&service, 1);
    assert_eq!(bob.create_api_key(0).unwrap().status, 200);
    // Deleting one (alice holds nonce 1's key) makes room for another.
    let r = alice.send("DELETE", "/auth/api-key", None).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let r = alice.create_api_key(2).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn deleting_a_key_with_l2_revokes_it_at_once_everywhere() {
    let service = Service::start(&[]);
    let mut keep = demo(&service, 0);
    assert_eq!(keep.create_api_key(0).unwrap().status, 200);
    let mut gone = demo(&service, 0);
    assert_eq!(gone.create_api_key(1).unwrap().status, 200);
    let gone_key = api_key(&gone);

    // Warm up several connections (and so gateway threads) with the key before deleting it.
    let mut clients: Vec<_> = (0..8).map(|_| service.http()).collect();
    for c in clients.iter_mut() {
        let r = c
            .request(
                "GET",
                "/orders",
                &gone.l2("GET", "/orders", "").unwrap(),
                None,
            )
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let r = gone.send("DELETE", "/auth/api-key", None).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json(), json!({ "deleted": gone_key }));

    for c in clients.iter_mut() {
        let r = c
            .request(
                "GET",
                "/orders",
                &gone.l2("GET", "/orders", "").unwrap(),
                None,
            )
            .unwrap();
        error_text(&r, 401);
        let r = c
            .request(
                "GET",
                "/orders",
                &keep.l2("GET", "/orders", "").unwrap(),
                None,
            )
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let r = keep.send("GET", "/auth/api-keys", None).unwrap();
    assert_eq!(r.json(), json!({ "apiKeys": [api_key(&keep)] }));
    error_text(&gone.derive_api_key(1).unwrap(), 404);
    // Deleting it again fails: the key no longer authenticates.
    error_text(&gone.send("DELETE", "/auth/api-key", None).unwrap(), 401);
}

#[test]
fn deleting_a_key_with_l1_names_it_in_svc_api_key() {
    let service = Service::start(&[]);
    let mut alice = demo(&service, 0);
    assert_eq!(alice.create_api_key(5).unwrap().status, 200);
    let key = api_key(&alice);
    let delete_with = |headers: &[(String, String)]| {
        service
            .http()
            .request("DELETE", "/auth/api-key", headers, None)
            .unwrap()
    };
    let without_key = delete_with(&alice.l1(0));
    assert!(error_text(&without_key, 401).contains("SVC_API_KEY"));
    let mut malformed = alice.l1(0);
    malformed.push(("SVC_API_KEY".into(), "not-a-uuid".into()));
    assert!(error_text(&delete_with(&malformed), 401).contains("SVC_API_KEY"));
    assert_eq!(alice.send("GET", "/orders", None).unwrap().status, 200);
    let mut headers = alice.l1(0);
    headers.push(("SVC_API_KEY".into(), key.clone()));
    let r = service
        .http()
        .request("DELETE", "/auth/api-key", &headers, None)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json(), json!({ "deleted": key }));
    error_text(&alice.send("GET", "/orders", None).unwrap(), 401);
}

#[test]
fn l2_missing_credentials_are_401_with_the_spec_text() {
    let service = Service::start(&[]);
    for (method, path) in [
        ("GET", "/orders"),
        ("POST", "/order"),
        ("POST", "/orders"),
        ("DELETE", "/order"),
        ("DELETE", "/orders"),
        ("DELETE", "/cancel-all"),
        ("DELETE", "/cancel-market-orders"),
        ("GET", "/trades"),
        ("GET", "/data/trades"),
        ("GET", "/balance-allowance?asset_type=COLLATERAL"),
    ] {
        let r = public(&service, method, path, None);
        assert_error(&r, 401, "HMAC L2 credentials required");
    }
    let alice = service.trader(0);
    let full = alice.l2("GET", "/orders", "").unwrap();
    let mut http = service.http();
    for name in [
        "SVC_API_KEY",
        "SVC_TIMESTAMP",
        "SVC_PASSPHRASE",
        "SVC_SIGNATURE",
    ] {
        let r = http
            .request("GET", "/orders", &without_header(&full, name), None)
            .unwrap();
        assert_error(&r, 401, "HMAC L2 credentials required");
        // An empty value is a missing credential too.
        let mut emptied = without_header(&full, name);
        emptied.push((name.to_string(), String::new()));
        let r = http.request("GET", "/orders", &emptied, None).unwrap();
        assert_error(&r, 401, "HMAC L2 credentials required");
    }
    // SVC_ADDRESS is optional with L2.
    let r = http
        .request(
            "GET",
            "/orders",
            &without_header(&full, "SVC_ADDRESS"),
            None,
        )
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn l2_bad_passphrase_signature_timestamp_or_address_is_401() {
    let service = Service::start(&[]);
    let alice = service.trader(0);
    let bob = service.trader(1);
    let mut http = service.http();
    let now = unix_now_s();
    let good = alice.l2("GET", "/orders", "").unwrap();
    assert_eq!(
        http.request("GET", "/orders", &good, None).unwrap().status,
        200
    );

    let cases: Vec<(&str, Vec<(String, String)>)> = vec![
        (
            "wrong passphrase",
            with_header(&good, "SVC_PASSPHRASE", "not-the-passphrase"),
        ),
        (
            "passphrase of another key",
            with_header(
                &good,
                "SVC_PASSPHRASE",
                &bob.credentials.as_ref().unwrap().passphrase,
            ),
        ),
        (
            "signature of another path",
            alice.l2("GET", "/orders?limit=1", "").unwrap(),
        ),
        (
            "signature of another method",
            alice.l2("DELETE", "/orders", "").unwrap(),
        ),
        (
            "garbage signature",
            with_header(&good, "SVC_SIGNATURE", "not base64 at all!"),
        ),
        (
            "60 s in the past",
            l2_at(&alice, now - 60, "GET", "/orders", ""),
        ),
        (
            "60 s in the future",
            l2_at(&alice, now + 60, "GET", "/orders", ""),
        ),
        (
            "SVC_ADDRESS of another account",
            with_header(&good, "SVC_ADDRESS", KEYS[1].1),
        ),
        (
            "unknown API key",
            with_header(&good, "SVC_API_KEY", &uuid::Uuid::new_v4().to_string()),
        ),
        (
            "API key that is not a UUID",
            with_header(&good, "SVC_API_KEY", "abc"),
        ),
    ];
    for (what, headers) in cases {
        let r = http.request("GET", "/orders", &headers, None).unwrap();
        assert_eq!(r.status, 401, "{what}: {}", r.body);
        error_text(&r, 401);
    }
    // A malformed SVC_ADDRESS is called malformed, as L1 calls it; another one a mismatch.
    let r = http
        .request(
            "GET",
            "/orders",
            &with_header(&good, "SVC_ADDRESS", "0xzz"),
            None,
        )
        .unwrap();
    assert!(
        error_text(&r, 401).starts_with("invalid SVC_ADDRESS: "),
        "{}",
        r.body
    );
    let r = http
        .request(
            "GET",
            "/orders",
            &with_header(&good, "SVC_ADDRESS", KEYS[1].1),
            None,
        )
        .unwrap();
    assert_eq!(
        error_text(&r, 401),
        "SVC_ADDRESS does not match the API key's address"
    );
    // The body is signed: a different body with the same headers fails.
    let signed_for = r#"{"orderType":"GTC"}"#;
    let headers = alice.l2("POST", "/order", signed_for).unwrap();
    let r = http
        .request("POST", "/order", &headers, Some(r#"{"orderType":"FOK"}"#))
        .unwrap();
    error_text(&r, 401);
    // The query string is signed.
    let headers = alice.l2("GET", "/orders", "").unwrap();
    error_text(
        &http
            .request("GET", "/orders?limit=1", &headers, None)
            .unwrap(),
        401,
    );
    // 20 s of skew is within the 30 s window; the address in lowercase is the same address.
    let r = http
        .request(
            "GET",
            "/orders",
            &l2_at(&alice, now - 20, "GET", "/orders", ""),
            None,
        )
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let lower = with_header(&good, "SVC_ADDRESS", &KEYS[0].1.to_ascii_lowercase());
    let r = http.request("GET", "/orders", &lower, None).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn an_l1_nonce_beyond_64_bits_is_a_valid_uint256() {
    let service = Service::start(&[]);
    let owner = Wallet::from_hex(KEYS[0].0).unwrap();
    let account = Address::parse(KEYS[0].1).unwrap();
    let nonce = U256::from_dec_str("18446744073709551616").unwrap(); // 2^64
    let headers = owned(l1_headers(
        &owner,
        &AuthDomain::default(),
        account,
        unix_now_s(),
        nonce,
    ));
    let mut http = service.http();
    let created = http
        .request("POST", "/auth/api-key", &headers, None)
        .unwrap();
    assert_eq!(created.status, 200, "{}", created.body);
    let derived = http
        .request("GET", "/auth/derive-api-key", &headers, None)
        .unwrap();
    assert_eq!(derived.json(), created.json());
}

#[test]
fn keys_and_their_deletion_survive_a_restart() {
    let mut service = Service::start(&[]);
    let mut keep = demo(&service, 0);
    assert_eq!(keep.create_api_key(0).unwrap().status, 200);
    let mut gone = demo(&service, 0);
    assert_eq!(gone.create_api_key(1).unwrap().status, 200);
    assert_eq!(
        gone.send("DELETE", "/auth/api-key", None).unwrap().status,
        200
    );
    service.kill_and_restart();
    assert_eq!(keep.send("GET", "/orders", None).unwrap().status, 200);
    error_text(&gone.send("GET", "/orders", None).unwrap(), 401);
    error_text(&gone.derive_api_key(1).unwrap(), 404);
    let r = keep.send("GET", "/auth/api-keys", None).unwrap();
    assert_eq!(r.json(), json!({ "apiKeys": [api_key(&keep)] }));
    // Derive still returns the same credentials after the restart.
    let before = keep.credentials.clone();
    assert_eq!(keep.derive_api_key(0).unwrap().status, 200);
    assert_eq!(keep.credentials, before);
}

#[test]
fn a_wallet_without_keys_lists_none() {
    let service = Service::start(&[]);
    let bob = demo(&service, 1);
    let r = service
        .http()
        .request("GET", "/auth/api-keys", &bob.l1(0), None)
        .unwrap();
    assert_eq!((r.status, r.json()), (200, json!({ "apiKeys": [] })));
}

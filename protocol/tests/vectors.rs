//! Every signing and hashing function reproduces the independent known-answer vectors of
//! `protocol/tests/data/signing.json` (computed with Python eth_account; the file is kept
//! byte for byte as the independent implementation wrote it).

use ladder_protocol::eip712::{
    cancel_market_orders_struct_hash, cancel_market_orders_type_hash, cancel_order_struct_hash,
    cancel_order_type_hash, clob_auth_struct_hash, clob_auth_type_hash, order_struct_hash,
    order_type_hash, CANCEL_MARKET_ORDERS_TYPE, CANCEL_ORDER_TYPE, CLOB_AUTH_TYPE, ORDER_TYPE,
};
use ladder_protocol::units::UNITS_PER_SHARE;
use ladder_protocol::wire::parse_signed_order;
use ladder_protocol::{
    address_of, cancel_market_orders_digest, cancel_order_digest, clob_auth_digest, l2_signature,
    owner_uuid, parse_price_ticks, sign_digest, verify_l2, Address, AuthDomain, ExchangeDomain,
    SecretKey, Signature, B256, U256,
};
use serde_json::Value;

const VECTORS_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/signing.json");

fn vectors() -> Value {
    let text = std::fs::read_to_string(VECTORS_PATH).unwrap_or_else(|error| {
        panic!("cannot read the signing vectors at {VECTORS_PATH}: {error}; they must be present")
    });
    serde_json::from_str(&text)
        .unwrap_or_else(|error| panic!("{VECTORS_PATH} is not JSON: {error}"))
}

fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value[key]
        .as_str()
        .unwrap_or_else(|| panic!("vector field {key} is not a string: {value}"))
}

fn list<'a>(root: &'a Value, key: &str) -> &'a Vec<Value> {
    let items = root[key]
        .as_array()
        .unwrap_or_else(|| panic!("vectors have no {key} array"));
    assert!(!items.is_empty(), "vectors have an empty {key} array");
    items
}

fn hex32(value: &Value, key: &str) -> [u8; 32] {
    B256::from_hex(text(value, key))
        .unwrap_or_else(|error| panic!("{key}: {error}"))
        .0
}

fn address(value: &Value, key: &str) -> Address {
    Address::parse(text(value, key)).unwrap_or_else(|error| panic!("{key}: {error}"))
}

/// The development keys of the vectors, with their addresses.
fn keys(root: &Value) -> Vec<(SecretKey, Address)> {
    let keys = root["keys"]
        .as_object()
        .expect("vectors have a keys object");
    keys.values()
        .map(|key| {
            let secret = B256::from_hex(text(key, "private_key")).expect("private key hex");
            let secret = SecretKey::from_byte_array(&secret.0).expect("valid secret key");
            (secret, address(key, "address"))
        })
        .collect()
}

fn key_of(root: &Value, signer: &Address) -> SecretKey {
    keys(root)
        .into_iter()
        .find(|(_, address)| address == signer)
        .unwrap_or_else(|| panic!("no key for {signer} in the vectors"))
        .0
}

/// The exchange domain named by a vector, or the default one.
fn exchange_domain(vector: &Value) -> ExchangeDomain {
    match vector.get("verifyingContract") {
        None => ExchangeDomain::default(),
        Some(contract) => {
            let chain_id = vector["chainId"].as_u64().expect("chainId");
            // The vectors write the contract `...C10b`, not in EIP-55 form; it is trusted text.
            let contract = contract.as_str().expect("verifyingContract is a string");
            let contract = Address::parse_ignoring_checksum(contract).expect("contract address");
            ExchangeDomain::new(chain_id, contract)
        }
    }
}

/// The signature recovers to `signer`, and signing with `signer`'s key gives the same bytes.
fn check_signature(
    root: &Value,
    expected: &Value,
    digest: &[u8; 32],
    signer: &Address,
    name: &str,
) {
    let signature = Signature::from_hex(text(expected, "signature")).expect("signature hex");
    assert_eq!(
        signature.recover_address(digest).as_ref(),
        Ok(signer),
        "{name}: recovery"
    );
    let signed = sign_digest(&key_of(root, signer), digest);
    assert_eq!(signed, signature, "{name}: RFC 6979 signature bytes");
}

#[test]
fn order_vectors_reproduce_hashes_signatures_prices_and_sizes() {
    let root = vectors();
    for vector in list(&root, "orders") {
        let name = text(vector, "name");
        let expected = &vector["expected"];
        let domain = exchange_domain(vector);
        let signed =
            parse_signed_order(&vector["order"], "order").unwrap_or_else(|e| panic!("{name}: {e}"));
        let order = signed.order;
        assert_eq!(text(expected, "type_string"), ORDER_TYPE, "{name}");
        assert_eq!(
            order_type_hash(),
            hex32(expected, "type_hash"),
            "{name}: type hash"
        );
        assert_eq!(
            *domain.separator(),
            hex32(expected, "domain_separator"),
            "{name}: domain"
        );
        assert_eq!(
            order_struct_hash(&order),
            hex32(expected, "struct_hash"),
            "{name}: struct hash"
        );
        let digest = signed.digest(&domain);
        assert_eq!(digest, hex32(expected, "digest"), "{name}: digest");
        assert_eq!(
            signed.signature.to_string(),
            text(expected, "signature"),
            "{name}"
        );
        check_signature(&root, expected, &digest, &order.signer, name);
        let verified = signed
            .verify(&domain)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(verified.hash().0, digest, "{name}: order hash");
        let hashed = signed.hashed(&domain);
        assert_eq!(hashed.hash().0, digest, "{name}: hashed once");
        assert_eq!(
            hashed.verify().ok(),
            Some(verified),
            "{name}: verified once hashed"
        );
        let mut forged = signed;
        forged.order.signer = forged.order.maker;
        if forged.order.signer != signed.order.signer {
            assert!(
                forged.hashed(&domain).verify().is_err(),
                "{name}: other signer"
            );
        }

        let (price_ticks, size_units) = order
            .price_and_size()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            Ok(price_ticks),
            parse_price_ticks(text(vector, "price")),
            "{name}: price"
        );
        let size_shares: u64 = text(vector, "size_shares").parse().expect("size_shares");
        assert_eq!(size_units, size_shares * UNITS_PER_SHARE, "{name}: size");
    }
}

#[test]
fn cancel_vectors_reproduce_hashes_and_signatures() {
    let root = vectors();
    for vector in list(&root, "cancels") {
        let name = text(vector, "name");
        let expected = &vector["expected"];
        let domain = exchange_domain(vector);
        let market_id = B256::from_hex(text(vector, "marketId")).expect("marketId");
        assert_eq!(
            *domain.separator(),
            hex32(expected, "domain_separator"),
            "{name}: domain"
        );
        let (type_string, type_hash, struct_hash, digest) = match vector.get("orderId") {
            Some(order_id) => {
                let order_id = order_id.as_u64().expect("orderId is an integer");
                (
                    CANCEL_ORDER_TYPE,
                    cancel_order_type_hash(),
                    cancel_order_struct_hash(order_id, &market_id),
                    cancel_order_digest(order_id, &market_id, &domain),
                )
            }
            None => (
                CANCEL_MARKET_ORDERS_TYPE,
                cancel_market_orders_type_hash(),
                cancel_market_orders_struct_hash(&market_id),
                cancel_market_orders_digest(&market_id, &domain),
            ),
        };
        assert_eq!(text(expected, "type_string"), type_string, "{name}");
        assert_eq!(type_hash, hex32(expected, "type_hash"), "{name}: type hash");
        assert_eq!(
            struct_hash,
            hex32(expected, "struct_hash"),
            "{name}: struct hash"
        );
        assert_eq!(digest, hex32(expected, "digest"), "{name}: digest");
        check_signature(&root, expected, &digest, &address(vector, "signer"), name);
    }
}

#[test]
fn clob_auth_vectors_reproduce_hashes_and_signatures() {
    let root = vectors();
    let domain = AuthDomain::default();
    for vector in list(&root, "clob_auth") {
        let name = text(vector, "name");
        let expected = &vector["expected"];
        let principal = address(vector, "address");
        let timestamp = text(vector, "timestamp");
        let nonce = U256::from_u64(vector["nonce"].as_u64().expect("nonce is an integer"));
        assert_eq!(text(expected, "type_string"), CLOB_AUTH_TYPE, "{name}");
        assert_eq!(
            clob_auth_type_hash(),
            hex32(expected, "type_hash"),
            "{name}: type hash"
        );
        assert_eq!(
            *domain.separator(),
            hex32(expected, "domain_separator"),
            "{name}: domain"
        );
        let struct_hash = clob_auth_struct_hash(&principal, timestamp, nonce);
        assert_eq!(
            struct_hash,
            hex32(expected, "struct_hash"),
            "{name}: struct hash"
        );
        let digest = clob_auth_digest(&principal, timestamp, nonce, &domain);
        assert_eq!(digest, hex32(expected, "digest"), "{name}: digest");
        // A smart account's ClobAuth is signed by its owner EOA.
        let signer = if vector.get("owner").is_some() {
            address(vector, "owner")
        } else {
            principal
        };
        check_signature(&root, expected, &digest, &signer, name);
    }
}

#[test]
fn hmac_vectors_are_reproduced_and_verified() {
    let root = vectors();
    for vector in list(&root, "hmac") {
        let (secret, timestamp, method) = (
            text(vector, "secret"),
            text(vector, "timestamp"),
            text(vector, "method"),
        );
        let (path, body, expected) = (
            text(vector, "path"),
            text(vector, "body"),
            text(vector, "signature"),
        );
        let signature =
            l2_signature(secret, timestamp, method, path, body.as_bytes()).expect("secret decodes");
        assert_eq!(signature, expected, "{method} {path}");
        assert!(
            verify_l2(secret, timestamp, method, path, body.as_bytes(), expected),
            "{method} {path}"
        );
        assert!(
            !verify_l2(secret, timestamp, method, path, b"tampered", expected),
            "{method} {path}"
        );
    }
}

#[test]
fn owner_uuid_vectors_are_reproduced() {
    let root = vectors();
    let namespace = text(&root["owner_uuid"], "namespace");
    assert_eq!(
        ladder_protocol::owner::OWNER_NAMESPACE.to_string(),
        namespace
    );
    for case in list(&root["owner_uuid"], "cases") {
        let owner = owner_uuid(&address(case, "address"));
        assert_eq!(
            owner.to_string(),
            text(case, "owner"),
            "{}",
            text(case, "address")
        );
    }
}

#[test]
fn key_and_controlled_addresses_format_back_in_eip55_form() {
    let root = vectors();
    let keys = root["keys"]
        .as_object()
        .expect("vectors have a keys object");
    assert!(!keys.is_empty());
    for key in keys.values() {
        for field in ["address", "controls"] {
            assert_eq!(address(key, field).to_string(), text(key, field), "{field}");
        }
        let secret = B256::from_hex(text(key, "private_key")).expect("private key hex");
        let secret = SecretKey::from_byte_array(&secret.0).expect("valid secret key");
        assert_eq!(address_of(&secret), address(key, "address"));
    }
}

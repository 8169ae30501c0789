//! The POST /order and POST /orders bodies (API.md §2.3, 4.4; API.md §1, 6, 18): parsing JSON
//! into a typed `SignedOrder`, and writing the JSON a client sends.

use serde::{Serialize, Serializer};

use crate::address::Address;
use crate::fixed_bytes::{Bytes16, B256};
use crate::order::{Order, SignedOrder};
use crate::signature::Signature;
use crate::u256::U256;
use crate::wire::field::{parse_array, parse_body, FieldError, Fields, FromJson, JsonNode};

/// The most orders one POST /orders body may carry (API.md §8).
pub const POST_ORDERS_BATCH_MAX: usize = 15;

pub use ladder_types::{OrderType, OrderTypeError};

/// Reads a signed order object found at `path` (e.g. `order`). The legacy keys `taker` and
/// `feeRateBps` and any unknown key are ignored.
pub fn parse_signed_order<V: JsonNode>(value: &V, path: &str) -> Result<SignedOrder, FieldError> {
    let fields = Fields::of(value, path)?;
    let order = Order {
        salt: fields.u256_string_or_integer("salt")?,
        maker: fields.address("maker")?,
        signer: fields.address("signer")?,
        beneficiary: fields.address("beneficiary")?,
        token_id: fields.u256_string("tokenId")?,
        maker_amount: fields.u256_string("makerAmount")?,
        taker_amount: fields.u256_string("takerAmount")?,
        expiration: fields.u256_string("expiration")?,
        nonce: fields.u256_string("nonce")?,
        identifier: fields.fixed_bytes::<16>("identifier")?,
        metadata: fields.fixed_bytes::<32>("metadata")?,
        side: fields.side("side")?,
        signature_type: fields.signature_type("signatureType")?,
    };
    let signature = fields.signature("signature")?;
    Ok(SignedOrder { order, signature })
}

/// The JSON form of a signed order: every uint a decimal string, `side` and `signatureType`
/// integers, addresses in EIP-55 form.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SignedOrderJson<'a> {
    salt: &'a U256,
    maker: &'a Address,
    signer: &'a Address,
    beneficiary: &'a Address,
    token_id: &'a U256,
    maker_amount: &'a U256,
    taker_amount: &'a U256,
    expiration: &'a U256,
    nonce: &'a U256,
    identifier: &'a Bytes16,
    metadata: &'a B256,
    side: u8,
    signature_type: u8,
    signature: &'a Signature,
}

/// Writes the signed order in the JSON form the service accepts (API.md §2.3).
impl Serialize for SignedOrder {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let order = &self.order;
        SignedOrderJson {
            salt: &order.salt,
            maker: &order.maker,
            signer: &order.signer,
            beneficiary: &order.beneficiary,
            token_id: &order.token_id,
            maker_amount: &order.maker_amount,
            taker_amount: &order.taker_amount,
            expiration: &order.expiration,
            nonce: &order.nonce,
            identifier: &order.identifier,
            metadata: &order.metadata,
            side: order.side.as_u8(),
            signature_type: order.signature_type.as_u8(),
            signature: &self.signature,
        }
        .serialize(serializer)
    }
}

/// The body of POST /order: `{order, orderType, postOnly}`. Written by clients; read with
/// [`PostOrderRequest::parse`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PostOrderRequest {
    /// The signed order.
    pub order: SignedOrder,
    /// Time in force.
    #[serde(rename = "orderType")]
    pub order_type: OrderType,
    /// Rest only, never take (API.md §8).
    #[serde(rename = "postOnly")]
    pub post_only: bool,
}

impl PostOrderRequest {
    /// Parses a POST /order body. An `owner` key and unknown keys are ignored.
    pub fn parse(body: &[u8]) -> Result<PostOrderRequest, FieldError> {
        parse_body(body)
    }

    /// Reads a POST /order body already parsed as JSON, found at `path` (`""` for the body):
    /// the signed order's fields are named under `order` (`order.makerAmount`).
    pub fn from_value<V: JsonNode>(value: &V, path: &str) -> Result<PostOrderRequest, FieldError> {
        let fields = Fields::of(value, path)?;
        Self::read(&fields, &fields.path_of("order"))
    }

    /// Reads one element of a POST /orders body found at `path` (`orders[3]`): the signed
    /// order's fields are named under the element itself (`orders[3].makerAmount`,
    /// API.md §8), the envelope's beside them (`orders[3].orderType`).
    pub fn from_batch_element<V: JsonNode>(
        value: &V,
        path: &str,
    ) -> Result<PostOrderRequest, FieldError> {
        let fields = Fields::of(value, path)?;
        Self::read(&fields, path)
    }

    /// Reads the envelope's fields, naming the signed order's under `order_path`.
    fn read<V: JsonNode>(
        fields: &Fields<'_, V>,
        order_path: &str,
    ) -> Result<PostOrderRequest, FieldError> {
        let order = parse_signed_order(fields.required("order")?, order_path)?;
        let order_type = fields
            .required("orderType")?
            .text()
            .and_then(|text| text.parse().ok())
            .ok_or_else(|| fields.error("orderType", "expected one of GTC, GTD, FOK, FAK"))?;
        let post_only = fields.bool_or_false("postOnly")?;
        Ok(PostOrderRequest {
            order,
            order_type,
            post_only,
        })
    }

    /// The JSON body.
    pub fn to_json(&self) -> String {
        // Serializing plain strings, integers and booleans into a String cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl FromJson for PostOrderRequest {
    fn from_json<V: JsonNode>(value: &V, path: &str) -> Result<PostOrderRequest, FieldError> {
        PostOrderRequest::from_value(value, path)
    }
}

/// One element of a POST /orders body (its fields named as
/// [`PostOrderRequest::from_batch_element`] names them).
struct BatchElement(PostOrderRequest);

impl FromJson for BatchElement {
    fn from_json<V: JsonNode>(value: &V, path: &str) -> Result<BatchElement, FieldError> {
        PostOrderRequest::from_batch_element(value, path).map(BatchElement)
    }
}

/// Parses a POST /orders body: an array of 1 to 15 POST /order bodies. A malformed element
/// fails the whole batch, naming it (`orders[3].makerAmount: ...`).
pub fn parse_post_orders(body: &[u8]) -> Result<Vec<PostOrderRequest>, FieldError> {
    let elements: Vec<BatchElement> = parse_array(body, "orders", 1, POST_ORDERS_BATCH_MAX)?;
    Ok(elements
        .into_iter()
        .map(|BatchElement(order)| order)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::order::{Side, SignatureType};
    use crate::wire::field::differential::{
        assert_same_as_serde, parse_array_with_serde, parse_body_with_serde,
    };
    use serde_json::{json, Value};

    const SIGNATURE: &str = "0x54554ff3357d0512c7225c528998a6739bdc90c947c3f28f49dfdd904d00862d78cc173a734690ab28ec40508c74219399df817d8199dabd1158d62ef6fb9c811c";

    fn order_json() -> Value {
        json!({
            "salt": "1234567",
            "maker": "0x5a11c0C0a000000000000000000000000000A001",
            "signer": "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
            "beneficiary": "0x5a11c0C0a000000000000000000000000000A001",
            "tokenId": "52114319501245915516055106046884209969926127482827954674443846427813813222426",
            "makerAmount": "5500000",
            "takerAmount": "10000000",
            "expiration": "0",
            "nonce": "0",
            "identifier": "0x00112233445566778899aabbccddeeff",
            "metadata": "0x0000000000000000000000000000000000000000000000000000000000000000",
            "side": 0,
            "signatureType": 3,
            "signature": SIGNATURE
        })
    }

    fn body_with(order: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({ "order": order, "orderType": "GTC" })).unwrap()
    }

    fn error_with(field: &str, value: Value) -> FieldError {
        let mut order = order_json();
        order[field] = value;
        PostOrderRequest::parse(&body_with(order)).unwrap_err()
    }

    fn error_without(field: &str) -> FieldError {
        let mut order = order_json();
        order.as_object_mut().unwrap().remove(field);
        PostOrderRequest::parse(&body_with(order)).unwrap_err()
    }

    #[test]
    fn a_valid_body_parses_into_typed_fields() {
        let request = PostOrderRequest::parse(&body_with(order_json())).unwrap();
        let order = request.order.order;
        assert_eq!(request.order_type, OrderType::Gtc);
        assert!(!request.post_only);
        assert_eq!(order.salt, U256::from_u64(1_234_567));
        assert_eq!(order.maker_amount, U256::from_u64(5_500_000));
        assert_eq!(order.side, Side::Buy);
        assert_eq!(order.signature_type, SignatureType::SmartAccount);
        assert_eq!(request.order.signature.to_string(), SIGNATURE);
    }

    #[test]
    fn every_missing_field_is_named() {
        let names = [
            "salt",
            "maker",
            "signer",
            "beneficiary",
            "tokenId",
            "makerAmount",
            "takerAmount",
            "expiration",
            "nonce",
            "identifier",
            "metadata",
            "side",
            "signatureType",
            "signature",
        ];
        for name in names {
            let error = error_without(name);
            assert_eq!(error.path, format!("order.{name}"));
            assert_eq!(error.rule, "is required");
        }
    }

    #[test]
    fn every_wrongly_typed_field_is_named() {
        let names = [
            "salt",
            "maker",
            "signer",
            "beneficiary",
            "tokenId",
            "makerAmount",
            "takerAmount",
            "expiration",
            "nonce",
            "identifier",
            "metadata",
            "side",
            "signatureType",
            "signature",
        ];
        for name in names {
            let error = error_with(name, json!([1]));
            assert_eq!(error.path, format!("order.{name}"), "{error}");
        }
    }

    #[test]
    fn uints_must_be_decimal_strings() {
        let error = error_with("makerAmount", json!(5_500_000));
        assert_eq!(
            error.to_string(),
            "order.makerAmount: expected a decimal integer string, found a number"
        );
        let error = error_with("takerAmount", json!("1e7"));
        assert_eq!(
            error.to_string(),
            "order.takerAmount: expected a decimal integer string, found \"1e7\""
        );
        let error = error_with("nonce", json!("-1"));
        assert_eq!(error.path, "order.nonce");
        let error = error_with("tokenId", json!("1".repeat(80)));
        assert_eq!(
            error.to_string(),
            "order.tokenId: decimal integer does not fit in 256 bits"
        );
    }

    #[test]
    fn salt_may_be_a_string_or_an_integer() {
        let mut order = order_json();
        order["salt"] = json!(1_234_567);
        let request = PostOrderRequest::parse(&body_with(order)).unwrap();
        assert_eq!(request.order.order.salt, U256::from_u64(1_234_567));
        // A JSON integer past 64 bits keeps every digit (API.md §1: salt is a uint256).
        let wide = "123456789012345678901234567890123456789012345678901234567890";
        let body = serde_json::to_string(&json!({ "order": order_json(), "orderType": "GTC" }))
            .unwrap()
            .replace(r#""salt":"1234567""#, &format!(r#""salt":{wide}"#));
        assert!(body.contains(wide), "{body}");
        let request = PostOrderRequest::parse(body.as_bytes()).unwrap();
        assert_eq!(request.order.order.salt.to_string(), wide);
        assert_eq!(error_with("salt", json!(-1)).path, "order.salt");
        assert_eq!(error_with("salt", json!(1.5)).path, "order.salt");
    }

    #[test]
    fn side_accepts_0_1_buy_and_sell_only() {
        for (value, side) in [
            (json!(0), Side::Buy),
            (json!(1), Side::Sell),
            (json!("BUY"), Side::Buy),
            (json!("SELL"), Side::Sell),
        ] {
            let mut order = order_json();
            order["side"] = value;
            assert_eq!(
                PostOrderRequest::parse(&body_with(order))
                    .unwrap()
                    .order
                    .order
                    .side,
                side
            );
        }
        for bad in [json!(2), json!("buy"), json!("0"), json!(-1), json!(0.5)] {
            let error = error_with("side", bad);
            assert_eq!(
                error.to_string(),
                "order.side: expected 0 (BUY), 1 (SELL), \"BUY\" or \"SELL\""
            );
        }
    }

    #[test]
    fn signature_type_is_any_uint8_and_nothing_else() {
        for (given, parsed) in [
            (0, SignatureType::Eoa),
            (3, SignatureType::SmartAccount),
            (1, SignatureType::Other(1)),
            (255, SignatureType::Other(255)),
        ] {
            let mut order = order_json();
            order["signatureType"] = json!(given);
            let request = PostOrderRequest::parse(&body_with(order)).unwrap();
            assert_eq!(request.order.order.signature_type, parsed);
        }
        for bad in [json!(256), json!(-1), json!(3.5), json!("3")] {
            let error = error_with("signatureType", bad);
            assert_eq!(
                error.to_string(),
                "order.signatureType: expected an integer from 0 to 255 (3: smart account, 0: EOA)"
            );
        }
    }

    #[test]
    fn addresses_with_a_bad_checksum_name_the_field_and_eip55() {
        let error = error_with("maker", json!("0x5A11c0C0a000000000000000000000000000A001"));
        assert_eq!(error.path, "order.maker");
        assert!(error.rule.contains("EIP-55"), "{error}");
        let error = error_with("signer", json!("0x1234"));
        assert_eq!(error.path, "order.signer");
    }

    #[test]
    fn identifier_metadata_and_signature_lengths_are_checked() {
        let error = error_with("identifier", json!("0x0011"));
        assert!(
            error
                .to_string()
                .starts_with("order.identifier: expected 0x followed by 32 hex digits (16 bytes)"),
            "{error}"
        );
        let error = error_with("metadata", json!("0x00"));
        assert!(
            error
                .to_string()
                .starts_with("order.metadata: expected 0x followed by 64 hex digits (32 bytes)"),
            "{error}"
        );
        let error = error_with("signature", json!(&SIGNATURE[..130]));
        assert_eq!(
            error.to_string(),
            "order.signature: expected 0x followed by 130 hex digits (a 65-byte signature)"
        );
        // A value of the wrong JSON type says what was expected once.
        let error = error_with("metadata", json!(123));
        assert_eq!(
            error.to_string(),
            "order.metadata: expected 0x followed by 64 hex digits (32 bytes), found a number"
        );
        let error = error_with("signature", json!(true));
        assert_eq!(
            error.to_string(),
            "order.signature: expected 0x followed by 130 hex digits (a 65-byte signature), \
             found a boolean"
        );
    }

    #[test]
    fn legacy_and_unknown_keys_are_ignored() {
        let mut order = order_json();
        order["taker"] = json!("0x0000000000000000000000000000000000000000");
        order["feeRateBps"] = json!("100");
        order["somethingNew"] = json!({"x": 1});
        let body = json!({ "order": order, "orderType": "FOK", "owner": "key", "extra": 1 });
        let request = PostOrderRequest::parse(&serde_json::to_vec(&body).unwrap()).unwrap();
        assert_eq!(request.order_type, OrderType::Fok);
        assert_eq!(
            request.order,
            PostOrderRequest::parse(&body_with(order_json()))
                .unwrap()
                .order
        );
    }

    #[test]
    fn envelope_errors_name_order_type_post_only_and_body() {
        let body = json!({ "order": order_json(), "orderType": "MARKET" });
        let error = PostOrderRequest::parse(&serde_json::to_vec(&body).unwrap()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "orderType: expected one of GTC, GTD, FOK, FAK"
        );
        let body = json!({ "order": order_json() });
        let error = PostOrderRequest::parse(&serde_json::to_vec(&body).unwrap()).unwrap_err();
        assert_eq!(error.to_string(), "orderType: is required");
        let body = json!({ "order": order_json(), "orderType": "GTC", "postOnly": "yes" });
        let error = PostOrderRequest::parse(&serde_json::to_vec(&body).unwrap()).unwrap_err();
        assert_eq!(error.path, "postOnly");
        let body = json!({ "order": 5, "orderType": "GTC" });
        let error = PostOrderRequest::parse(&serde_json::to_vec(&body).unwrap()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "order: expected a JSON object, found a number"
        );
        assert_eq!(PostOrderRequest::parse(b"{").unwrap_err().path, "body");
        assert_eq!(PostOrderRequest::parse(b"[]").unwrap_err().path, "body");
    }

    #[test]
    fn post_only_is_read() {
        let body = json!({ "order": order_json(), "orderType": "GTD", "postOnly": true });
        let request = PostOrderRequest::parse(&serde_json::to_vec(&body).unwrap()).unwrap();
        assert!(request.post_only);
        assert!(request.order_type.rests());
    }

    #[test]
    fn written_json_parses_back_to_the_same_request() {
        let request = PostOrderRequest::parse(&body_with(order_json())).unwrap();
        let json = request.to_json();
        assert!(json.starts_with("{\"order\":{\"salt\":\"1234567\",\"maker\":\"0x5a11c0C0a000000000000000000000000000A001\""), "{json}");
        assert!(json.contains("\"side\":0,\"signatureType\":3,"), "{json}");
        assert!(
            json.ends_with("},\"orderType\":\"GTC\",\"postOnly\":false}"),
            "{json}"
        );
        assert_eq!(PostOrderRequest::parse(json.as_bytes()).unwrap(), request);
    }

    #[test]
    fn batches_name_the_bad_element_and_are_bounded() {
        let good = json!({ "order": order_json(), "orderType": "GTC" });
        let mut bad_order = order_json();
        bad_order["makerAmount"] = json!("x");
        let bad = json!({ "order": bad_order, "orderType": "GTC" });
        let body = serde_json::to_vec(&json!([good, good, good, bad])).unwrap();
        let error = parse_post_orders(&body).unwrap_err();
        assert_eq!(error.path, "orders[3].makerAmount");
        let no_type = json!({ "order": order_json() });
        let body = serde_json::to_vec(&json!([good, no_type])).unwrap();
        assert_eq!(
            parse_post_orders(&body).unwrap_err().path,
            "orders[1].orderType"
        );
        let body = serde_json::to_vec(&json!([good, good])).unwrap();
        assert_eq!(parse_post_orders(&body).unwrap().len(), 2);
        assert_eq!(parse_post_orders(b"[]").unwrap_err().path, "orders");
        let sixteen = serde_json::to_vec(&vec![good; 16]).unwrap();
        assert_eq!(
            parse_post_orders(&sixteen).unwrap_err().to_string(),
            "orders: expected between 1 and 15 elements, found 16"
        );
    }

    #[test]
    fn simd_json_reads_bodies_as_serde_json_did() {
        let mut integer_salt = order_json();
        integer_salt["salt"] = json!(1_234_567);
        integer_salt["side"] = json!("SELL");
        let seeds = vec![
            body_with(order_json()),
            serde_json::to_vec(
                &json!({ "order": integer_salt, "orderType": "GTD", "postOnly": true }),
            )
            .unwrap(),
        ];
        let parsed = assert_same_as_serde(
            &seeds,
            20_000,
            PostOrderRequest::parse,
            parse_body_with_serde::<PostOrderRequest>,
        );
        assert!(parsed > 500, "only {parsed} mutated bodies parsed");
        let good = json!({ "order": order_json(), "orderType": "GTC" });
        let seeds = vec![serde_json::to_vec(&json!([good, good])).unwrap()];
        let parsed = assert_same_as_serde(&seeds, 5_000, parse_post_orders, |body| {
            parse_array_with_serde(body, "orders", 1, POST_ORDERS_BATCH_MAX)
                .map(|elements: Vec<BatchElement>| elements.into_iter().map(|e| e.0).collect())
        });
        assert!(parsed > 100, "only {parsed} mutated batches parsed");
    }
}

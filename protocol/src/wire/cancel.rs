//! The signed cancel bodies: DELETE /order (API.md §10), DELETE /orders (an array of those,
//! API.md §10) and DELETE /cancel-market-orders (API.md §10).

use serde::Serialize;

use crate::address::Address;
use crate::eip712::{cancel_market_orders_digest, cancel_order_digest, ExchangeDomain};
use crate::fixed_bytes::B256;
use crate::order::SignatureType;
use crate::signature::Signature;
use crate::u256::U256;
use crate::wire::field::{parse_array, parse_body, FieldError, Fields, FromJson, JsonNode};

/// The most cancels one DELETE /orders body may carry (API.md §10).
pub const CANCEL_ORDERS_BATCH_MAX: usize = 1000;

/// DELETE /order: cancel one order, signed as `CancelOrder(orderId, marketId)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelOrderRequest {
    /// The order's numeric id (a JSON integer, int64).
    pub order_id: u64,
    /// The order's market (condition id).
    pub market_id: B256,
    /// Signature over the `CancelOrder` digest.
    pub signature: Signature,
    /// 0: signed by the maker's own key; 3: signed by `signer`, who controls the maker.
    pub signature_type: SignatureType,
    /// The signing EOA; present whenever `signature_type` is 3.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signer: Option<Address>,
}

impl CancelOrderRequest {
    /// Parses a DELETE /order body.
    pub fn parse(body: &[u8]) -> Result<CancelOrderRequest, FieldError> {
        parse_body(body)
    }

    /// Reads a DELETE /order body already parsed as JSON, found at `path`.
    pub fn from_value<V: JsonNode>(
        value: &V,
        path: &str,
    ) -> Result<CancelOrderRequest, FieldError> {
        let fields = Fields::of(value, path)?;
        let order_id = fields.int64_non_negative("orderId")?;
        let market_id = fields.fixed_bytes::<32>("marketId")?;
        let signature = fields.signature("signature")?;
        let signature_type = fields.cancel_signature_type("signatureType")?;
        let signer = fields.cancel_signer("signer", signature_type)?;
        Ok(CancelOrderRequest {
            order_id,
            market_id,
            signature,
            signature_type,
            signer,
        })
    }

    /// The EIP-712 digest the signature must cover.
    pub fn digest(&self, domain: &ExchangeDomain) -> [u8; 32] {
        cancel_order_digest(self.order_id, &self.market_id, domain)
    }

    /// The JSON body.
    pub fn to_json(&self) -> String {
        // Serializing strings and integers into a String cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl FromJson for CancelOrderRequest {
    fn from_json<V: JsonNode>(value: &V, path: &str) -> Result<CancelOrderRequest, FieldError> {
        CancelOrderRequest::from_value(value, path)
    }
}

/// Parses a DELETE /orders body: an array of at most 1,000 DELETE /order bodies. A malformed
/// element fails the whole body, naming it (`orders[3].orderId: ...`).
pub fn parse_cancel_orders(body: &[u8]) -> Result<Vec<CancelOrderRequest>, FieldError> {
    parse_array(body, "orders", 0, CANCEL_ORDERS_BATCH_MAX)
}

/// DELETE /cancel-market-orders: cancel every order of the caller on one market (optionally one
/// token), signed as `CancelMarketOrders(marketId)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelMarketOrdersRequest {
    /// The market (condition id).
    pub market_id: B256,
    /// Signature over the `CancelMarketOrders` digest.
    pub signature: Signature,
    /// 0: signed by the maker's own key; 3: signed by `signer`, who controls the maker.
    pub signature_type: SignatureType,
    /// The signing EOA; present whenever `signature_type` is 3.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signer: Option<Address>,
    /// Limits the cancel to one token of the market.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_id: Option<U256>,
}

impl CancelMarketOrdersRequest {
    /// Parses a DELETE /cancel-market-orders body.
    pub fn parse(body: &[u8]) -> Result<CancelMarketOrdersRequest, FieldError> {
        parse_body(body)
    }

    /// Reads a DELETE /cancel-market-orders body already parsed as JSON.
    pub fn from_value<V: JsonNode>(value: &V) -> Result<CancelMarketOrdersRequest, FieldError> {
        CancelMarketOrdersRequest::from_json(value, "")
    }

    /// The EIP-712 digest the signature must cover.
    pub fn digest(&self, domain: &ExchangeDomain) -> [u8; 32] {
        cancel_market_orders_digest(&self.market_id, domain)
    }

    /// The JSON body.
    pub fn to_json(&self) -> String {
        // Serializing strings and integers into a String cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl FromJson for CancelMarketOrdersRequest {
    fn from_json<V: JsonNode>(
        value: &V,
        path: &str,
    ) -> Result<CancelMarketOrdersRequest, FieldError> {
        let fields = Fields::of(value, path)?;
        let market_id = fields.fixed_bytes::<32>("marketId")?;
        let signature = fields.signature("signature")?;
        let signature_type = fields.cancel_signature_type("signatureType")?;
        let signer = fields.cancel_signer("signer", signature_type)?;
        let token_id = match fields.optional("tokenId") {
            None => None,
            Some(_) => Some(fields.u256_string("tokenId")?),
        };
        Ok(CancelMarketOrdersRequest {
            market_id,
            signature,
            signature_type,
            signer,
            token_id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::field::differential::{
        assert_same_as_serde, parse_array_with_serde, parse_body_with_serde,
    };
    use serde_json::{json, Value};

    const MARKET: &str = "0x3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b";
    const SIGNER: &str = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
    const SIGNATURE: &str = "0xfc7b3575ac376285221ded348e51c4e7ded666bc836adf70a5aa5519ab7eb3ec6810d58ee3882f2ceeba7883e369ff46f9b344aee2ee578ecd508a038905face1b";

    fn cancel_json() -> Value {
        json!({
            "orderId": 42,
            "marketId": MARKET,
            "signature": SIGNATURE,
            "signatureType": 3,
            "signer": SIGNER
        })
    }

    fn parse(value: &Value) -> Result<CancelOrderRequest, FieldError> {
        CancelOrderRequest::parse(&serde_json::to_vec(value).unwrap())
    }

    #[test]
    fn cancel_order_parses_and_writes_back() {
        let request = parse(&cancel_json()).unwrap();
        assert_eq!(request.order_id, 42);
        assert_eq!(
            request.signer.map(|s| s.to_string()).as_deref(),
            Some(SIGNER)
        );
        assert_eq!(
            request.to_json(),
            format!("{{\"orderId\":42,\"marketId\":\"{MARKET}\",\"signature\":\"{SIGNATURE}\",\"signatureType\":3,\"signer\":\"{SIGNER}\"}}")
        );
        assert_eq!(
            CancelOrderRequest::parse(request.to_json().as_bytes()),
            Ok(request)
        );
    }

    #[test]
    fn signer_is_required_for_type_3_only() {
        let mut body = cancel_json();
        body.as_object_mut().unwrap().remove("signer");
        assert_eq!(
            parse(&body).unwrap_err().to_string(),
            "signer: is required when signatureType is 3"
        );
        body["signatureType"] = json!(0);
        assert_eq!(parse(&body).unwrap().signer, None);
    }

    #[test]
    fn a_missing_signature_type_is_required_and_another_one_named() {
        let mut body = cancel_json();
        body.as_object_mut().unwrap().remove("signatureType");
        assert_eq!(
            parse(&body).unwrap_err().to_string(),
            "signatureType: is required"
        );
        body["signatureType"] = json!(2);
        assert_eq!(
            parse(&body).unwrap_err().to_string(),
            "signatureType: expected the integer 0 (EOA) or 3 (smart account)"
        );
    }

    #[test]
    fn cancel_fields_are_named() {
        for (field, value) in [
            ("orderId", json!("42")),
            ("orderId", json!(-1)),
            ("orderId", json!(u64::MAX)),
            ("marketId", json!("0x3b")),
            ("signature", json!("0x00")),
            ("signatureType", json!(1)),
            ("signer", json!("nope")),
        ] {
            let mut body = cancel_json();
            body[field] = value;
            assert_eq!(parse(&body).unwrap_err().path, field);
        }
    }

    #[test]
    fn cancel_batches_name_the_element() {
        let mut bad = cancel_json();
        bad["marketId"] = json!(1);
        let body = serde_json::to_vec(&json!([cancel_json(), bad])).unwrap();
        assert_eq!(
            parse_cancel_orders(&body).unwrap_err().path,
            "orders[1].marketId"
        );
        assert_eq!(parse_cancel_orders(b"[]").unwrap(), vec![]);
    }

    #[test]
    fn cancel_market_orders_reads_an_optional_token() {
        let body = json!({
            "marketId": MARKET, "signature": SIGNATURE, "signatureType": 3, "signer": SIGNER,
            "tokenId": "52114319501245915516055106046884209969926127482827954674443846427813813222426"
        });
        let request =
            CancelMarketOrdersRequest::parse(&serde_json::to_vec(&body).unwrap()).unwrap();
        assert!(request.token_id.is_some());
        assert_eq!(
            CancelMarketOrdersRequest::parse(request.to_json().as_bytes()),
            Ok(request)
        );
        let body = json!({ "marketId": MARKET, "signature": SIGNATURE, "signatureType": 3, "signer": SIGNER, "tokenId": 5 });
        let error =
            CancelMarketOrdersRequest::parse(&serde_json::to_vec(&body).unwrap()).unwrap_err();
        assert_eq!(error.path, "tokenId");
    }

    #[test]
    fn simd_json_reads_bodies_as_serde_json_did() {
        let mut eoa = cancel_json();
        eoa["signatureType"] = json!(0);
        eoa.as_object_mut().unwrap().remove("signer");
        let seeds = vec![
            serde_json::to_vec(&cancel_json()).unwrap(),
            serde_json::to_vec(&eoa).unwrap(),
        ];
        let parsed = assert_same_as_serde(
            &seeds,
            10_000,
            CancelOrderRequest::parse,
            parse_body_with_serde::<CancelOrderRequest>,
        );
        assert!(parsed > 500, "only {parsed} mutated bodies parsed");
        let seeds = vec![serde_json::to_vec(&json!([cancel_json(), eoa])).unwrap()];
        let parsed = assert_same_as_serde(&seeds, 5_000, parse_cancel_orders, |body| {
            parse_array_with_serde(body, "orders", 0, CANCEL_ORDERS_BATCH_MAX)
        });
        assert!(parsed > 100, "only {parsed} mutated batches parsed");
        let seeds = vec![serde_json::to_vec(&json!({
            "marketId": MARKET, "signature": SIGNATURE, "signatureType": 3, "signer": SIGNER,
            "tokenId": "52114319501245915516055106046884209969926127482827954674443846427813813222426"
        }))
        .unwrap()];
        let parsed = assert_same_as_serde(
            &seeds,
            10_000,
            CancelMarketOrdersRequest::parse,
            parse_body_with_serde::<CancelMarketOrdersRequest>,
        );
        assert!(parsed > 500, "only {parsed} mutated bodies parsed");
    }
}

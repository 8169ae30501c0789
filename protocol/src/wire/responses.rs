//! Response bodies (API.md §2 and the shapes of the sections after it), with the exact key casing: cancel,
//! order-placement and credential payloads in camelCase; open-order, trade, market and
//! claimable payloads in snake_case. Prices are held in ticks and written as trimmed decimals;
//! sizes are held as integers and written as decimal strings.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::address::Address;
use crate::fixed_bytes::B256;
use crate::order::Side;
use crate::u256::U256;
use crate::units::TickSize;
use crate::wire::order::OrderType;
use crate::wire::text::{dec, empty_or, price};

pub use ladder_types::{OrderStatus, Outcome, TradeStatus};

/// Whether the caller was the maker or the taker of a trade.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum TraderSide {
    /// The caller's order was resting.
    Maker,
    /// The caller's order was incoming.
    Taker,
}

/// Why a position is claimable (API.md §2.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefundReason {
    /// A winning position of a resolved market.
    ResolvedWinner,
    /// A position of a voided market.
    VoidedRefund,
}

/// The page envelope of lists (API.md §2.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Page<T> {
    /// Items of the page.
    pub data: Vec<T>,
    /// Cursor of the next page; `LTE=` at the end; never null.
    pub next_cursor: String,
    /// Items in this page.
    pub count: usize,
    /// Page size.
    pub limit: usize,
}

impl<T> Page<T> {
    /// A page of `data` with its `count` filled in.
    pub fn new(data: Vec<T>, next_cursor: String, limit: usize) -> Page<T> {
        Page {
            count: data.len(),
            data,
            next_cursor,
            limit,
        }
    }
}

/// An element of the open-orders page (API.md §2.1); also the body of `order` events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenOrder {
    /// Numeric order id, written as a decimal string.
    #[serde(with = "dec")]
    pub id: u64,
    /// Condition id.
    pub market: B256,
    /// Token id; `""` when the market is not registered.
    #[serde(with = "empty_or")]
    pub asset_id: Option<U256>,
    /// `Yes` or `No`.
    pub outcome: Outcome,
    /// `BUY` or `SELL`.
    pub side: Side,
    /// The signed price.
    #[serde(rename = "price", with = "price")]
    pub price_ticks: u32,
    /// The signed size in whole shares.
    #[serde(rename = "original_size", with = "dec")]
    pub original_size_shares: u64,
    /// Shares filled so far.
    #[serde(rename = "size_matched", with = "dec")]
    pub size_matched_shares: u64,
    /// `live` or `delayed` (events also use `matched` and `canceled`).
    pub status: OrderStatus,
    /// Unix seconds, a bare JSON integer.
    #[serde(rename = "created_at")]
    pub created_at_s: i64,
    /// The EIP-712 order digest.
    pub order_hash: B256,
    /// The maker (EIP-55).
    pub maker_address: Address,
    /// UUIDv5 of the maker (see `owner::owner_uuid`).
    pub owner: Uuid,
    /// Unix seconds; 0 means none.
    #[serde(rename = "expiration", with = "dec")]
    pub expiration_s: u64,
    /// `GTC`, `GTD`, `FOK` or `FAK`.
    pub order_type: OrderType,
}

/// The order-placement result (API.md §2.4), camelCase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderPlacementResult {
    /// Whether the order was accepted.
    pub success: bool,
    /// `null` on success, otherwise a stable message.
    #[serde(rename = "errorMsg")]
    pub error_msg: Option<String>,
    /// Maker-side total of the fills: collateral units for a BUY, shares for a SELL.
    #[serde(rename = "makingAmount", with = "dec")]
    pub making_amount: u64,
    /// Taker-side total of the fills, in the opposite unit.
    #[serde(rename = "takingAmount", with = "dec")]
    pub taking_amount: u64,
    /// The order hash; `""` when the order could not be hashed.
    #[serde(rename = "orderID", with = "empty_or")]
    pub order_id: Option<B256>,
    /// `live`, `matched` or `delayed`.
    pub status: OrderStatus,
    /// Settlement transaction hashes, one per matched batch.
    #[serde(rename = "transactionsHashes")]
    pub transactions_hashes: Vec<B256>,
    /// Trade ids of the fills of this order.
    #[serde(rename = "tradeIds")]
    pub trade_ids: Vec<B256>,
}

impl OrderPlacementResult {
    /// A rejection (API.md §8): `success: false`, the message, amounts `"0"`, empty arrays and
    /// status `delayed`.
    pub fn rejected(error_msg: impl Into<String>, order_id: Option<B256>) -> OrderPlacementResult {
        OrderPlacementResult {
            success: false,
            error_msg: Some(error_msg.into()),
            making_amount: 0,
            taking_amount: 0,
            order_id,
            status: OrderStatus::Delayed,
            transactions_hashes: Vec::new(),
            trade_ids: Vec::new(),
        }
    }
}

/// The result of every cancel operation (API.md §2.5), camelCase.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelResult {
    /// Ids of the cancelled orders, as decimal strings.
    pub canceled: Vec<String>,
    /// Order id to reason (`not found`, `not owner`, `already filled`, ...); `{}` when none.
    #[serde(rename = "notCanceled")]
    pub not_canceled: BTreeMap<String, String>,
}

/// One maker-side fill of a trade (API.md §2.6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MakerOrder {
    /// The maker order's decimal id (API.md §2.6).
    #[serde(with = "dec")]
    pub order_id: u64,
    /// The maker.
    pub maker_address: Address,
    /// UUIDv5 of the maker.
    pub owner: Uuid,
    /// Shares filled against this maker order.
    #[serde(rename = "matched_amount", with = "dec")]
    pub matched_amount_shares: u64,
    /// The maker order's price.
    #[serde(rename = "price", with = "price")]
    pub price_ticks: u32,
    /// Always `"0"` (API.md §2.6).
    #[serde(with = "dec")]
    pub fee_rate_bps: u32,
    /// The maker order's token.
    pub asset_id: U256,
    /// The maker order's outcome.
    pub outcome: Outcome,
}

/// A trade (API.md §2.6), from the caller's point of view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trade {
    /// Trade id.
    pub id: B256,
    /// Condition id.
    pub market: B256,
    /// Outcome of the taker's token.
    pub outcome: Outcome,
    /// `BUY` or `SELL`.
    pub side: Side,
    /// Trimmed decimal price.
    #[serde(rename = "price", with = "price")]
    pub price_ticks: u32,
    /// Shares traded.
    #[serde(rename = "size", with = "dec")]
    pub size_shares: u64,
    /// Settlement status.
    pub status: TradeStatus,
    /// Unix seconds of the match, as a string.
    #[serde(rename = "match_time", with = "dec")]
    pub match_time_s: u64,
    /// Unix seconds of the last status change, as a string.
    #[serde(rename = "last_update", with = "dec")]
    pub last_update_s: u64,
    /// Always 0.
    pub bucket_index: u32,
    /// Settlement transaction hash.
    pub transaction_hash: B256,
    /// Hash of the taker order.
    pub taker_order_id: B256,
    /// Token traded.
    pub asset_id: U256,
    /// Always `"0"` (API.md §2.6).
    #[serde(with = "dec")]
    pub fee_rate_bps: u32,
    /// UUIDv5 of the caller.
    pub owner: Uuid,
    /// The taker order's maker (funding) address; each maker order's is in `maker_orders`.
    pub maker_address: Address,
    /// Whether the caller was maker or taker.
    pub trader_side: TraderSide,
    /// Maker-side fills.
    pub maker_orders: Vec<MakerOrder>,
}

/// A token of a market (API.md §2.7).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarketToken {
    /// Token id.
    pub token_id: U256,
    /// `Yes` or `No`.
    pub outcome: Outcome,
    /// Current price (trimmed decimal; may be `0` or `1`).
    #[serde(rename = "price", with = "price")]
    pub price_ticks: u32,
}

/// A market (API.md §2.7).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Market {
    /// Condition id.
    pub condition_id: B256,
    /// The Yes and No tokens.
    pub tokens: Vec<MarketToken>,
    /// Minimum price tick, a JSON number.
    pub minimum_tick_size: TickSize,
    /// Negative-risk flag.
    pub neg_risk: bool,
    /// Whether the market accepts orders.
    pub active: bool,
}

/// An element of the GET /last-trades-prices request body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenIdQuery {
    /// Token id.
    pub token_id: U256,
}

/// An element of the GET /last-trades-prices response (API.md §2.8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastTradePrice {
    /// Token id.
    pub token_id: U256,
    /// Price of the last trade.
    #[serde(rename = "price", with = "price")]
    pub price_ticks: u32,
    /// Side of the last trade's taker.
    pub side: Side,
}

/// A claimable position (API.md §2.9).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimableEntry {
    /// Condition id.
    pub market_id: B256,
    /// Outcome of the token.
    pub outcome: Outcome,
    /// Token id.
    pub token_id: U256,
    /// Balance in base units (6 decimals).
    #[serde(rename = "balance", with = "dec")]
    pub balance_units: u64,
    /// `resolved_winner` or `voided_refund`.
    pub refund_reason: RefundReason,
}

/// The GET /claimable response (API.md §2.9).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimableResponse {
    /// The address asked about.
    pub address: Address,
    /// Its claimable positions.
    pub claimable: Vec<ClaimableEntry>,
}

/// API credentials (API.md §2.10), camelCase.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiCredentials {
    /// The key id (UUIDv4).
    #[serde(rename = "apiKey")]
    pub api_key: Uuid,
    /// Base64 HMAC secret.
    pub secret: String,
    /// Passphrase.
    pub passphrase: String,
}

/// Credentials are secret: debug output shows only the key id.
impl std::fmt::Debug for ApiCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiCredentials")
            .field("api_key", &self.api_key)
            .finish_non_exhaustive()
    }
}

/// GET /auth/api-keys (API.md §7).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKeysList {
    /// The address's key ids.
    #[serde(rename = "apiKeys")]
    pub api_keys: Vec<Uuid>,
}

/// DELETE /auth/api-key (API.md §7).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeletedApiKey {
    /// The deleted key id.
    pub deleted: Uuid,
}

/// GET /balance-allowance (API.md §13): base units as decimal strings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BalanceAllowance {
    /// Balance in base units.
    #[serde(rename = "balance", with = "dec")]
    pub balance_units: u64,
    /// Unreserved balance in base units.
    #[serde(rename = "allowance", with = "dec")]
    pub allowance_units: u64,
}

/// GET /admin/state-hash (API.md §19).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateHashResponse {
    /// Last applied sequence number.
    pub seq: u64,
    /// `0x` + 64 hex.
    pub state_hash: B256,
}

/// Every error body: `{"error": "..."}` (API.md §2.11).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// The message.
    pub error: String,
}

impl ErrorBody {
    /// An error body with this message.
    pub fn new(error: impl Into<String>) -> ErrorBody {
        ErrorBody {
            error: error.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const MARKET: &str = "0x3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b3b";
    const MAKER: &str = "0x5a11c0C0a000000000000000000000000000A001";

    fn b256(text: &str) -> B256 {
        text.parse().unwrap()
    }

    #[test]
    fn open_order_has_snake_case_strings_and_a_bare_created_at() {
        let order = OpenOrder {
            id: 7,
            market: b256(MARKET),
            asset_id: None,
            outcome: Outcome::Yes,
            side: Side::Buy,
            price_ticks: 5500,
            original_size_shares: 10,
            size_matched_shares: 0,
            status: OrderStatus::Live,
            created_at_s: 1_700_000_000,
            order_hash: B256::ZERO,
            maker_address: MAKER.parse().unwrap(),
            owner: "804d344b-d875-5663-82af-dbcd3738a1a2".parse().unwrap(),
            expiration_s: 0,
            order_type: OrderType::Gtc,
        };
        let value = serde_json::to_value(&order).unwrap();
        assert_eq!(
            value,
            json!({
                "id": "7", "market": MARKET, "asset_id": "", "outcome": "Yes", "side": "BUY",
                "price": "0.55", "original_size": "10", "size_matched": "0", "status": "live",
                "created_at": 1_700_000_000, "order_hash": format!("0x{}", "0".repeat(64)),
                "maker_address": MAKER, "owner": "804d344b-d875-5663-82af-dbcd3738a1a2",
                "expiration": "0", "order_type": "GTC"
            })
        );
        assert_eq!(serde_json::from_value::<OpenOrder>(value).unwrap(), order);
    }

    #[test]
    fn placement_rejection_has_camel_case_keys_zero_amounts_and_delayed() {
        let value = serde_json::to_value(OrderPlacementResult::rejected("invalid signature", None))
            .unwrap();
        assert_eq!(
            value,
            json!({
                "success": false, "errorMsg": "invalid signature", "makingAmount": "0",
                "takingAmount": "0", "orderID": "", "status": "delayed",
                "transactionsHashes": [], "tradeIds": []
            })
        );
    }

    #[test]
    fn placement_success_has_a_null_error_msg() {
        let result = OrderPlacementResult {
            success: true,
            error_msg: None,
            making_amount: 5_500_000,
            taking_amount: 10,
            order_id: Some(b256(MARKET)),
            status: OrderStatus::Matched,
            transactions_hashes: vec![b256(MARKET)],
            trade_ids: vec![],
        };
        let text = serde_json::to_string(&result).unwrap();
        assert!(
            text.starts_with("{\"success\":true,\"errorMsg\":null,\"makingAmount\":\"5500000\""),
            "{text}"
        );
        assert_eq!(
            serde_json::from_str::<OrderPlacementResult>(&text).unwrap(),
            result
        );
    }

    #[test]
    fn cancel_result_is_camel_case_with_an_empty_map() {
        let result = CancelResult {
            canceled: vec!["42".into()],
            not_canceled: BTreeMap::new(),
        };
        assert_eq!(
            serde_json::to_string(&result).unwrap(),
            "{\"canceled\":[\"42\"],\"notCanceled\":{}}"
        );
    }

    #[test]
    fn market_writes_the_tick_size_as_a_number() {
        let market = Market {
            condition_id: b256(MARKET),
            tokens: vec![MarketToken {
                token_id: U256::from_u64(1),
                outcome: Outcome::No,
                price_ticks: 10_000,
            }],
            minimum_tick_size: TickSize::Hundredth,
            neg_risk: false,
            active: true,
        };
        let text = serde_json::to_string(&market).unwrap();
        assert_eq!(
            text,
            format!("{{\"condition_id\":\"{MARKET}\",\"tokens\":[{{\"token_id\":\"1\",\"outcome\":\"No\",\"price\":\"1\"}}],\"minimum_tick_size\":0.01,\"neg_risk\":false,\"active\":true}}")
        );
        assert_eq!(serde_json::from_str::<Market>(&text).unwrap(), market);
    }

    #[test]
    fn trade_has_integer_bucket_and_string_fee() {
        let trade = Trade {
            id: b256(MARKET),
            market: b256(MARKET),
            outcome: Outcome::Yes,
            side: Side::Sell,
            price_ticks: 4200,
            size_shares: 25,
            status: TradeStatus::Matched,
            match_time_s: 1_700_000_000,
            last_update_s: 1_700_000_001,
            bucket_index: 0,
            transaction_hash: b256(MARKET),
            taker_order_id: b256(MARKET),
            asset_id: U256::from_u64(9),
            fee_rate_bps: 0,
            owner: Uuid::nil(),
            maker_address: MAKER.parse().unwrap(),
            trader_side: TraderSide::Taker,
            maker_orders: vec![MakerOrder {
                order_id: 3,
                maker_address: MAKER.parse().unwrap(),
                owner: Uuid::nil(),
                matched_amount_shares: 25,
                price_ticks: 4200,
                fee_rate_bps: 0,
                asset_id: U256::from_u64(9),
                outcome: Outcome::Yes,
            }],
        };
        let value = serde_json::to_value(&trade).unwrap();
        assert_eq!(value["bucket_index"], json!(0));
        assert_eq!(value["fee_rate_bps"], json!("0"));
        assert_eq!(value["status"], json!("MATCHED"));
        assert_eq!(value["trader_side"], json!("TAKER"));
        assert_eq!(value["match_time"], json!("1700000000"));
        assert_eq!(value["maker_orders"][0]["order_id"], json!("3"));
        assert_eq!(value["maker_orders"][0]["matched_amount"], json!("25"));
        assert_eq!(serde_json::from_value::<Trade>(value).unwrap(), trade);
    }

    #[test]
    fn claimable_and_credentials_shapes() {
        let claimable = ClaimableResponse {
            address: MAKER.parse().unwrap(),
            claimable: vec![ClaimableEntry {
                market_id: b256(MARKET),
                outcome: Outcome::Yes,
                token_id: U256::from_u64(1),
                balance_units: 10_000_000,
                refund_reason: RefundReason::VoidedRefund,
            }],
        };
        let value = serde_json::to_value(&claimable).unwrap();
        assert_eq!(
            value["claimable"][0]["refund_reason"],
            json!("voided_refund")
        );
        assert_eq!(value["claimable"][0]["balance"], json!("10000000"));
        let credentials = ApiCredentials {
            api_key: Uuid::nil(),
            secret: "s".into(),
            passphrase: "p".into(),
        };
        let value = serde_json::to_value(&credentials).unwrap();
        assert_eq!(
            value,
            json!({"apiKey": Uuid::nil().to_string(), "secret": "s", "passphrase": "p"})
        );
        assert!(!format!("{credentials:?}").contains("passphrase: \"p\""));
        assert_eq!(
            serde_json::to_string(&ErrorBody::new("not found")).unwrap(),
            "{\"error\":\"not found\"}"
        );
    }

    #[test]
    fn page_counts_its_data() {
        let page = Page::new(vec![1, 2], "LTE=".to_string(), 100);
        assert_eq!(
            serde_json::to_value(&page).unwrap(),
            json!({"data": [1, 2], "next_cursor": "LTE=", "count": 2, "limit": 100})
        );
    }
}

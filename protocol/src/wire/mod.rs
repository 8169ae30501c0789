//! JSON payloads of the HTTP interface: request bodies parsed field by field into typed values
//! (errors name the field), and response bodies with the exact key casing of API.md §2.

mod big_salt;
pub mod cancel;
pub mod cursor;
pub mod field;
pub mod order;
pub mod responses;
pub mod text;

pub use cancel::{
    parse_cancel_orders, CancelMarketOrdersRequest, CancelOrderRequest, CANCEL_ORDERS_BATCH_MAX,
};
pub use cursor::{
    clamp_limit, decode_cursor, encode_cursor, next_cursor, Cursor, CursorError, END_CURSOR,
    PAGE_LIMIT_DEFAULT, PAGE_LIMIT_MAX, START_CURSOR,
};
pub use field::FieldError;
pub use order::{
    parse_post_orders, parse_signed_order, OrderType, OrderTypeError, PostOrderRequest,
    POST_ORDERS_BATCH_MAX,
};
pub use responses::{
    ApiCredentials, ApiKeysList, BalanceAllowance, CancelResult, ClaimableEntry, ClaimableResponse,
    DeletedApiKey, ErrorBody, LastTradePrice, MakerOrder, Market, MarketToken, OpenOrder,
    OrderPlacementResult, OrderStatus, Outcome, Page, RefundReason, StateHashResponse,
    TokenIdQuery, Trade, TradeStatus, TraderSide,
};

//! The texts of the engine's refusals (API.md §8): one stable message per cause, naming
//! the offending value and the allowed one. The engine decides ([`Reject`]); the gateway
//! words it here, for placement results, admin errors and the bundler's errors.

use std::fmt;

use ladder_engine::{format_price_ticks, PriceTicks, Reject, Units, PRICE_SCALE, UNITS_PER_SHARE};

/// The text of a FOK that could not fill entirely (API.md §18, API.md §8).
pub const FOK_NOT_FILLED: &str =
    "order couldn't be fully filled, FOK orders are fully filled or killed";
/// The text of a reservation that cannot be met (API.md §9).
pub const NOT_ENOUGH_BALANCE: &str = "not enough balance / allowance";
/// The text of a post-only FAK or FOK order (API.md §8).
pub const POST_ONLY_NEEDS_RESTING_TYPE: &str = "postOnly orders must use orderType GTC or GTD";
/// The text of a post-only order that would match (API.md §8).
pub const POST_ONLY_WOULD_CROSS: &str = "post-only order would cross resting liquidity";

/// A refusal as clients read it (`reject.words()`, see [`Worded`]).
#[derive(Clone, Copy, Debug)]
pub struct RefusalText<'a>(pub &'a Reject);

/// `reject.words()`: a refusal's text, as `path.display()` is a path's.
pub trait Worded {
    /// The text clients read.
    fn words(&self) -> RefusalText<'_>;
}

impl Worded for Reject {
    fn words(&self) -> RefusalText<'_> {
        RefusalText(self)
    }
}

impl fmt::Display for RefusalText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let price = |t: PriceTicks| format_price_ticks(t);
        match *self.0 {
            Reject::InvalidSignature => f.write_str("invalid signature"),
            Reject::UnsupportedSignatureType { given } => write!(
                f,
                "unsupported signature type {given}: only smart-account orders (signatureType 3) are accepted"
            ),
            Reject::MakerMismatch => f.write_str("order maker does not match the API key's address"),
            Reject::SignerNotController => {
                f.write_str("invalid signature: signer does not control the maker account")
            }
            Reject::UnknownToken => f.write_str("unknown token: no market has this tokenId"),
            Reject::UnknownMarket => f.write_str("unknown market: no market has this condition id"),
            Reject::MarketExists => f.write_str("market already exists"),
            Reject::TokenIdsEqual => f.write_str("no_token_id: must differ from yes_token_id"),
            Reject::TokenInUse { outcome } => write!(
                f,
                "{}_token_id: already a token of another market",
                match outcome {
                    ladder_engine::Outcome::Yes => "yes",
                    ladder_engine::Outcome::No => "no",
                }
            ),
            Reject::MarketNotActive { state } => write!(f, "market not active: it is {state}"),
            Reject::PriceOffTick { price_ticks, tick_ticks } => {
                f.write_str(&off_tick_message(&price(price_ticks), tick_ticks))
            }
            Reject::PriceOutOfRange { price_ticks, tick_ticks } => {
                f.write_str(&price_out_of_range_message(&price(price_ticks), tick_ticks))
            }
            Reject::SizeNotWhole { size_units } => write!(
                f,
                "invalid size {size_units} base units: must be a non-zero whole number of shares ({UNITS_PER_SHARE} base units each)"
            ),
            Reject::BelowMinimumSize { size_units, minimum_units } => write!(
                f,
                "order size {} is below the market's min_order_size {}",
                format_shares(size_units),
                format_shares(minimum_units)
            ),
            Reject::GtdWithoutExpiration => {
                f.write_str("GTD orders need a non-zero expiration")
            }
            Reject::ExpirationPast { expiration_s, now_s } => write!(
                f,
                "expiration {expiration_s} is not in the future (server time {now_s})"
            ),
            Reject::ExpirationNotGtd => {
                f.write_str("only GTD orders may have a non-zero expiration")
            }
            Reject::DuplicateOrder => f.write_str("duplicate order: an order with this hash was already placed"),
            Reject::NotEnoughBalance => f.write_str(NOT_ENOUGH_BALANCE),
            Reject::BalanceLimit { collateral, max_units } => write!(
                f,
                "balance limit: this order's fills could take the maker's {} balance past {max_units} base units",
                if collateral { "collateral" } else { "token" }
            ),
            Reject::FokNotFilled => f.write_str(FOK_NOT_FILLED),
            Reject::FakNoMatch => f.write_str("no orders found to match with FAK order"),
            Reject::PostOnlyWouldCross => f.write_str(POST_ONLY_WOULD_CROSS),
            Reject::PostOnlyNeedsRestingType => f.write_str(POST_ONLY_NEEDS_RESTING_TYPE),
            Reject::TooManyOrders => f.write_str("the exchange is at its open-order limit, try later"),
            Reject::TooManyMarkets => f.write_str("the exchange is at its market limit"),
            Reject::ApiKeyLimit => f.write_str("api key limit reached"),
            Reject::UnknownApiKey => f.write_str("api key not found"),
            Reject::ApiKeyExists => f.write_str("api key already exists"),
            Reject::AccountNotDeployed => f.write_str("AA20 account not deployed"),
            Reject::UserOpSignature => f.write_str("AA24 signature error"),
            Reject::UserOpNonce { .. } => f.write_str("AA25 invalid account nonce"),
            Reject::NothingToRedeem => f.write_str("nothing to redeem"),
            Reject::ApiKeyRaced { .. } => f.write_str(
                "SVC_NONCE: a key of this nonce was created at the same moment; try again",
            ),
            Reject::ApiKeyNonceUsed => f.write_str(
                "SVC_NONCE: this address already has an api key created with this nonce; \
                 GET /auth/derive-api-key returns it",
            ),
            Reject::WithdrawalExceedsFree { amount_units, free_units } => write!(
                f,
                "withdrawal of {amount_units} exceeds the free (unreserved) balance {free_units}"
            ),
            Reject::ZeroAmount => f.write_str("amount must be greater than 0"),
            Reject::InvalidTickSize => {
                f.write_str("minimum_tick_size must be one of 0.1, 0.01, 0.001, 0.0001")
            }
            Reject::UnknownTransaction => f.write_str("unknown transaction hash"),
            Reject::InvalidStatusChange => f.write_str("trade status cannot move that way"),
            Reject::MarketNotResolved => f.write_str("market is not resolved or voided"),
            Reject::Overflow => f.write_str("amount too large"),
        }
    }
}

/// Why `price` (as the order gives it) is refused on a market whose tick is `tick_ticks`:
/// it is not a multiple of the tick (API.md §8 names the offending value and the allowed one).
pub fn off_tick_message(price: &str, tick_ticks: PriceTicks) -> String {
    format!(
        "invalid price {price}: must be a multiple of the tick size {}",
        format_price_ticks(tick_ticks)
    )
}

/// Why `price` is refused on a market whose tick is `tick_ticks`: it is outside
/// `[tick, 1 - tick]` (API.md §1).
pub fn price_out_of_range_message(price: &str, tick_ticks: PriceTicks) -> String {
    format!(
        "invalid price {price}: must be between {} and {}",
        format_price_ticks(tick_ticks),
        format_price_ticks(PRICE_SCALE - tick_ticks)
    )
}

/// Base units as human shares; exact for whole shares, else with decimals.
pub fn format_shares(units: Units) -> String {
    let whole = units / UNITS_PER_SHARE;
    let frac = units % UNITS_PER_SHARE;
    if frac == 0 {
        return whole.to_string();
    }
    let digits = format!("{frac:06}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fok_message_is_the_contract_text() {
        assert_eq!(
            Reject::FokNotFilled.words().to_string(),
            "order couldn't be fully filled, FOK orders are fully filled or killed"
        );
        assert_eq!(
            Reject::NotEnoughBalance.words().to_string(),
            "not enough balance / allowance"
        );
    }
}

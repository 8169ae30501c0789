//! Why a command was refused: one variant per cause, with the values that explain it (the
//! offending value and the allowed one). Wording them for clients is the gateway's job.

use crate::types::{Outcome, PriceTicks, Units};

/// A refusal: the placement result's `errorMsg`, an admin error or a bundler error once the
/// gateway words it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reject {
    /// The signature does not recover to the signer.
    InvalidSignature,
    /// The order is not signed as a smart-account order.
    UnsupportedSignatureType {
        /// The signature type given.
        given: u8,
    },
    /// The order's maker is not the API key's address.
    MakerMismatch,
    /// The signer does not control the maker account.
    SignerNotController,
    /// No market has this token.
    UnknownToken,
    /// No market has this condition id.
    UnknownMarket,
    /// A market with this condition id already exists.
    MarketExists,
    /// A new market's two token ids are the same.
    TokenIdsEqual,
    /// A new market's token id already belongs to a market.
    TokenInUse {
        /// Which of the new market's tokens.
        outcome: Outcome,
    },
    /// The market refuses orders.
    MarketNotActive {
        /// Why: paused, resolved or voided.
        state: &'static str,
    },
    /// The price is not a multiple of the market's tick.
    PriceOffTick {
        /// The order's price.
        price_ticks: PriceTicks,
        /// The market's tick.
        tick_ticks: PriceTicks,
    },
    /// The price lies outside `[tick, 1 - tick]`.
    PriceOutOfRange {
        /// The order's price.
        price_ticks: PriceTicks,
        /// The market's tick.
        tick_ticks: PriceTicks,
    },
    /// The share amount is not a whole number of shares, or is zero.
    SizeNotWhole {
        /// The order's size.
        size_units: Units,
    },
    /// The size is below the market's minimum.
    BelowMinimumSize {
        /// The order's size.
        size_units: Units,
        /// The market's minimum.
        minimum_units: Units,
    },
    /// A GTD order without an expiration.
    GtdWithoutExpiration,
    /// An expiration at or before the current time.
    ExpirationPast {
        /// The order's expiration.
        expiration_s: u64,
        /// The sequencer's time.
        now_s: u64,
    },
    /// A non-GTD order with an expiration.
    ExpirationNotGtd,
    /// An order with this hash was placed before.
    DuplicateOrder,
    /// The reservation cannot be met.
    NotEnoughBalance,
    /// A crossing order's fills could take what its maker holds of the asset it receives
    /// past the largest balance (`EngineLimits::balance_units_max`).
    BalanceLimit {
        /// Whether that asset is collateral (else the order's token).
        collateral: bool,
        /// The largest balance, in base units.
        max_units: Units,
    },
    /// A FOK order could not fill entirely.
    FokNotFilled,
    /// A FAK order found nothing to match.
    FakNoMatch,
    /// A post-only order would match.
    PostOnlyWouldCross,
    /// A post-only order with an order type that does not rest.
    PostOnlyNeedsRestingType,
    /// The open-order table is full.
    TooManyOrders,
    /// The market table is full.
    TooManyMarkets,
    /// The address has the maximum number of API keys.
    ApiKeyLimit,
    /// No such API key for this address.
    UnknownApiKey,
    /// An API key with this id already exists.
    ApiKeyExists,
    /// The address already has a key created with this L1 nonce (derive it instead).
    ApiKeyNonceUsed,
    /// A key of the same address and nonce was created while this one was asked for: its id
    /// was derived from a count that is no longer current.
    ApiKeyRaced {
        /// Keys created so far for the address and nonce.
        creations: u32,
    },
    /// A user operation's sender is no smart account of the registry.
    AccountNotDeployed,
    /// A user operation's signer is not an owner of its sender.
    UserOpSignature,
    /// A user operation's nonce is not the sender's next one.
    UserOpNonce {
        /// The sequence number expected.
        expected: u64,
    },
    /// The sender holds no position to redeem in that market.
    NothingToRedeem,
    /// A withdrawal would go below what is reserved.
    WithdrawalExceedsFree {
        /// Asked for.
        amount_units: Units,
        /// Free to withdraw.
        free_units: Units,
    },
    /// A zero amount.
    ZeroAmount,
    /// The tick size is not one of 0.1, 0.01, 0.001, 0.0001.
    InvalidTickSize,
    /// A settlement update for a transaction hash the engine does not know.
    UnknownTransaction,
    /// The settlement status cannot follow the current one.
    InvalidStatusChange,
    /// The market is not resolved or voided.
    MarketNotResolved,
    /// A balance would overflow.
    Overflow,
}

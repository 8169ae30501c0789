//! Commands: the engine's only input, and what the journal stores (versioned by the
//! journal's record type, encoded with bincode).

use serde::{Deserialize, Serialize};

use crate::types::{
    Address, Bytes32, ConditionId, Hash32, OrderId, OrderType, PriceTicks, Side, TokenId, Units,
};

/// One state change, as stamped and journaled by the sequencer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub enum Command {
    /// Create a market (API.md §15).
    CreateMarket(MarketSpec),
    /// Stop accepting orders on a market; resting orders stay, cancels still work.
    PauseMarket {
        /// The market.
        condition_id: ConditionId,
    },
    /// Accept orders on a paused market again.
    ResumeMarket {
        /// The market.
        condition_id: ConditionId,
    },
    /// Resolve a market to a winner, or void it; cancels its open orders.
    ResolveMarket {
        /// The market.
        condition_id: ConditionId,
        /// Yes, No or void.
        resolution: Resolution,
    },
    /// Change a market's minimum tick size (finer or coarser).
    SetTickSize {
        /// The market.
        condition_id: ConditionId,
        /// The new tick in price ticks of 0.0001.
        tick_size_ticks: PriceTicks,
    },
    /// Record that `owner` controls smart account `account` (built-in registry).
    LinkAccount {
        /// The smart account.
        account: Address,
        /// An EOA that controls it.
        owner: Address,
    },
    /// Remove a link made by `LinkAccount`.
    UnlinkAccount {
        /// The smart account.
        account: Address,
        /// The EOA.
        owner: Address,
    },
    /// Record a new API key (its secret is derived outside the engine and never stored),
    /// as journals written before `CreateCountedApiKey` hold it.
    CreateApiKey(ApiKeySpec),
    /// Delete an API key.
    DeleteApiKey {
        /// The address that owns the key.
        address: Address,
        /// Who signed the request: the address itself, or an owner of that smart account.
        signer: Address,
        /// The key id (UUID bytes).
        key_id: [u8; 16],
    },
    /// Credit base units of collateral or of a token.
    Deposit {
        /// The credited address.
        address: Address,
        /// Collateral or a token.
        asset: Asset,
        /// Base units.
        amount: Units,
    },
    /// Debit base units; never below what open orders reserve.
    Withdraw {
        /// The debited address.
        address: Address,
        /// Collateral or a token.
        asset: Asset,
        /// Base units.
        amount: Units,
    },
    /// Place an order already authenticated and validated for form by the gateway.
    PlaceOrder(NewOrder),
    /// Cancel one order.
    CancelOrder {
        /// Who asks (the API key's address).
        requester: Address,
        /// The order.
        order_id: OrderId,
        /// The market the cancel was signed for; another market's order is `not found`.
        condition_id: Option<ConditionId>,
        /// A smart-account cancel's signer: it must control the requester (else the reason
        /// is `invalid signature`). `None` when the signature recovered to the requester.
        signer: Option<Address>,
    },
    /// Cancel the requester's orders on one market, optionally one token only.
    CancelMarket {
        /// Who asks.
        requester: Address,
        /// The market.
        condition_id: ConditionId,
        /// Only this token's orders, when given.
        token_id: Option<TokenId>,
        /// A smart-account cancel's signer, which must control the requester.
        signer: Option<Address>,
    },
    /// Cancel all the requester's open orders.
    CancelAll {
        /// Who asks.
        requester: Address,
    },
    /// Time passes: expire GTD orders and match delayed ones that are due.
    Tick,
    /// A settlement batch changed status.
    SettlementUpdate {
        /// The batch's transaction hash.
        transaction_hash: Hash32,
        /// Its new status.
        status: TradeStatus,
    },
    /// An on-chain redemption of `address`'s positions in a resolved or voided market.
    RecordRedemption {
        /// The redeeming address.
        address: Address,
        /// The market.
        condition_id: ConditionId,
    },
    /// Record a new API key, made after `creations_before` others for its address and nonce.
    /// Its id, and so its secret, derives from that count: a key deleted and created again
    /// gets new credentials (API.md §7). Refused when the count has changed meanwhile (a
    /// concurrent create or delete of that nonce's key). `CreateApiKey` is the form journals
    /// written before it hold.
    CreateCountedApiKey {
        /// The key.
        spec: ApiKeySpec,
        /// Keys created before it for the same address and nonce.
        creations_before: u32,
    },
    /// Start (or restart) the heartbeats of an API key (API.md §16).
    StartHeartbeats {
        /// The key.
        key_id: [u8; 16],
        /// Its address.
        address: Address,
    },
    /// Stop the heartbeats of an API key; nothing is cancelled.
    StopHeartbeats {
        /// The key.
        key_id: [u8; 16],
    },
    /// No beat came in time: cancel every open order of the key's address and stop its
    /// heartbeats (stamped with the sequencer's time, like a tick).
    HeartbeatsExpired {
        /// The key.
        key_id: [u8; 16],
        /// Its address.
        address: Address,
    },
    /// A redeem user operation through the service's bundler (API.md §13), its owner's
    /// signature recovered by the gateway.
    RedeemUserOp {
        /// The operation's userOpHash.
        user_op_hash: Hash32,
        /// The smart account.
        sender: Address,
        /// Who signed it.
        signer: Address,
        /// Its sequence number (the nonce, key 0).
        nonce: u64,
        /// The market to redeem.
        condition_id: ConditionId,
    },
    /// The history store holds every record up to `through_seq`: the trades that became
    /// final by then leave the engine (API.md §19, "History and bounded state"). Journaled by the primary's runtime.
    ForgetHistory {
        /// The last sequence the store holds.
        through_seq: u64,
    },
    /// A node took the lead of its cluster (CONTRACT 22): journaled first by a new leader, so
    /// that every node can tell which leader wrote what follows and refuse an older one.
    BeginTerm {
        /// The term: one more than the one before, at every change of leader.
        term: u64,
    },
    /// A `/ws/user` connection with `cancel_on_disconnect` was accepted (API.md §16): when
    /// it ends, every open order of `address` goes.
    ArmDeadManSwitch {
        /// The process that holds the connection (an id of its own, such as its start time).
        process: u64,
        /// The connection, numbered within that process.
        connection: u64,
        /// The API key's address.
        address: Address,
    },
    /// A connection with `cancel_on_disconnect` ended: every open order of `address` is
    /// cancelled (as `CancelAll`) and the connection's arming, if journaled, is forgotten.
    DeadManSwitchTripped {
        /// The process that held the connection.
        process: u64,
        /// The connection, numbered within that process.
        connection: u64,
        /// The API key's address.
        address: Address,
    },
    /// Process `process` serves now (a start-up, a promotion): the connections other processes
    /// armed ended with those processes, unseen, so each one's address loses its open orders.
    DeadManSwitchesLost {
        /// The process that serves now.
        process: u64,
    },
    /// A clean stop (SIGTERM): every armed connection but those in `keep` is forgotten and
    /// nothing is cancelled. `keep` holds connections that ended before the stop and whose
    /// cancel could not be journaled (a full disk): the next start cancels for them.
    DisarmDeadManSwitches {
        /// Connections (process, number) that stay armed.
        keep: Vec<(u64, u64)>,
    },
}

impl Command {
    /// Every name `type_name` gives, in the enum's order.
    pub const TYPE_NAMES: [&'static str; 29] = [
        "create_market",
        "pause_market",
        "resume_market",
        "resolve_market",
        "set_tick_size",
        "link_account",
        "unlink_account",
        "create_api_key_v1",
        "delete_api_key",
        "deposit",
        "withdraw",
        "place_order",
        "cancel_order",
        "cancel_market",
        "cancel_all",
        "tick",
        "settlement_update",
        "record_redemption",
        "create_api_key",
        "start_heartbeats",
        "stop_heartbeats",
        "heartbeats_expired",
        "redeem_user_op",
        "forget_history",
        "begin_term",
        "arm_dead_man_switch",
        "dead_man_switch_tripped",
        "dead_man_switches_lost",
        "disarm_dead_man_switches",
    ];

    /// A short stable name for logs, metrics and `ladder journal dump --type`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Command::CreateMarket(_) => "create_market",
            Command::PauseMarket { .. } => "pause_market",
            Command::ResumeMarket { .. } => "resume_market",
            Command::ResolveMarket { .. } => "resolve_market",
            Command::SetTickSize { .. } => "set_tick_size",
            Command::LinkAccount { .. } => "link_account",
            Command::UnlinkAccount { .. } => "unlink_account",
            Command::CreateApiKey(_) => "create_api_key_v1",
            Command::DeleteApiKey { .. } => "delete_api_key",
            Command::Deposit { .. } => "deposit",
            Command::Withdraw { .. } => "withdraw",
            Command::PlaceOrder(_) => "place_order",
            Command::CancelOrder { .. } => "cancel_order",
            Command::CancelMarket { .. } => "cancel_market",
            Command::CancelAll { .. } => "cancel_all",
            Command::Tick => "tick",
            Command::SettlementUpdate { .. } => "settlement_update",
            Command::RecordRedemption { .. } => "record_redemption",
            Command::CreateCountedApiKey { .. } => "create_api_key",
            Command::StartHeartbeats { .. } => "start_heartbeats",
            Command::StopHeartbeats { .. } => "stop_heartbeats",
            Command::HeartbeatsExpired { .. } => "heartbeats_expired",
            Command::RedeemUserOp { .. } => "redeem_user_op",
            Command::ForgetHistory { .. } => "forget_history",
            Command::BeginTerm { .. } => "begin_term",
            Command::ArmDeadManSwitch { .. } => "arm_dead_man_switch",
            Command::DeadManSwitchTripped { .. } => "dead_man_switch_tripped",
            Command::DeadManSwitchesLost { .. } => "dead_man_switches_lost",
            Command::DisarmDeadManSwitches { .. } => "disarm_dead_man_switches",
        }
    }
}

/// A market's definition (API.md §15).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub struct MarketSpec {
    /// The condition id.
    pub condition_id: ConditionId,
    /// The Yes token.
    pub yes_token_id: TokenId,
    /// The No token.
    pub no_token_id: TokenId,
    /// Minimum tick in price ticks of 0.0001 (100 = 0.01).
    pub tick_size_ticks: PriceTicks,
    /// Minimum order size in base units.
    pub min_order_size_units: Units,
    /// The neg-risk flag (reported, not acted on).
    pub neg_risk: bool,
    /// Taker delay in milliseconds (0 = none).
    pub taker_delay_ms: u64,
    /// Taker fee in basis points of the notional.
    pub fee_rate_bps: u32,
}

/// How a market ended.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    bincode::Encode,
    bincode::Decode,
)]
pub enum Resolution {
    /// Yes won.
    Yes,
    /// No won.
    No,
    /// The market was voided: every position is refunded.
    Void,
}

/// An API key record: what lets the gateway re-derive the secret, never the secret.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub struct ApiKeySpec {
    /// The address that created the key (L1).
    pub address: Address,
    /// Who signed the L1 request: the address itself, or an owner of that smart account.
    pub signer: Address,
    /// The key id (UUID bytes).
    pub key_id: [u8; 16],
    /// The L1 ClobAuth nonce (a uint256, big-endian) the key was created with.
    pub nonce: Bytes32,
    /// The per-address limit in force when the key was asked for.
    pub max_keys_per_address: u32,
}

/// What a deposit or withdrawal moves.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    bincode::Encode,
    bincode::Decode,
)]
pub enum Asset {
    /// Collateral.
    #[serde(rename = "COLLATERAL")]
    Collateral,
    /// An outcome token.
    #[serde(rename = "CONDITIONAL")]
    Token(TokenId),
}

/// An order that the gateway has parsed, authenticated and checked for form.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub struct NewOrder {
    /// EIP-712 digest of the signed order.
    pub order_hash: Hash32,
    /// The funding account (the smart account).
    pub maker: Address,
    /// The EOA whose key signed.
    pub signer: Address,
    /// The token traded.
    pub token_id: TokenId,
    /// BUY or SELL.
    pub side: Side,
    /// Limit price in ticks of 0.0001, derived exactly from the signed amounts.
    pub price_ticks: PriceTicks,
    /// Size in base units of the token (a whole number of shares).
    pub size_units: Units,
    /// GTC, GTD, FOK or FAK.
    pub order_type: OrderType,
    /// Rest only, never take.
    pub post_only: bool,
    /// Unix seconds; 0 = none.
    pub expiration_s: u64,
    /// Whether the signer's control of the maker was already verified outside the engine
    /// (ERC-1271 over RPC). When false, the engine's registry decides.
    pub signer_verified: bool,
    /// The signed order's remaining fields, kept in the journal for settlement and audit
    /// (boxed: the engine never reads them, and commands stay small).
    pub signed: Option<Box<SignedFields>>,
}

/// The parts of a signed order the engine does not match on, kept verbatim.
#[derive(
    Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize, bincode::Encode, bincode::Decode,
)]
pub struct SignedFields {
    /// Big-endian U256 salt.
    pub salt: [u8; 32],
    /// Beneficiary address.
    pub beneficiary: Address,
    /// Signed maker amount (base units).
    pub maker_amount: Units,
    /// Signed taker amount (base units).
    pub taker_amount: Units,
    /// Nonce (big-endian U256).
    pub nonce: [u8; 32],
    /// 16-byte identifier.
    pub identifier: [u8; 16],
    /// 32-byte metadata.
    pub metadata: [u8; 32],
    /// 0 EOA, 3 smart account.
    pub signature_type: u8,
    /// The 65-byte signature, r ‖ s ‖ v.
    pub signature: Vec<u8>,
}

pub use ladder_types::TradeStatus;

//! Replies: what a command answers to whoever sent it.

use crate::event::OrderStatus;
use crate::reject::Reject;
use smallvec::SmallVec;

use crate::types::{Hash32, OrderId, Units};

/// The answer to one command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Done, nothing to report.
    Ok,
    /// An order was accepted.
    Placed(Placement),
    /// Cancels were applied.
    Canceled(CancelReport),
    /// The command was refused; nothing changed.
    Rejected(Reject),
}

/// The result of an accepted order (API.md §2.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The numeric id.
    pub order_id: OrderId,
    /// The order's EIP-712 hash.
    pub order_hash: Hash32,
    /// `live`, `matched` or `delayed`.
    pub status: OrderStatus,
    /// Collateral units paid (BUY) or shares given, in base units (SELL).
    pub making_units: Units,
    /// Shares received in base units (BUY) or collateral units received (SELL).
    pub taking_units: Units,
    /// Ids of the trades this order made, in match order.
    pub trade_ids: Vec<Hash32>,
    /// The settlement batch's transaction hash, when it traded.
    pub transaction_hash: Option<Hash32>,
}

/// Why an order was not cancelled (API.md §2.5, API.md §10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotCanceled {
    /// No order has this id.
    NotFound,
    /// The order belongs to someone else.
    NotOwner,
    /// The order filled entirely.
    AlreadyFilled,
    /// The order was cancelled before.
    AlreadyCanceled,
    /// The cancel's signer does not control the requester.
    InvalidSignature,
    /// The order closed long ago and the engine has forgotten it: its owner and fate are in
    /// the history store, where the gateway finds the reason to give (never shown as such).
    Forgotten,
}

impl NotCanceled {
    /// The reason text of `notCanceled`.
    pub fn as_str(self) -> &'static str {
        match self {
            NotCanceled::NotFound => "not found",
            NotCanceled::NotOwner => "not owner",
            NotCanceled::AlreadyFilled => "already filled",
            NotCanceled::AlreadyCanceled => "already canceled",
            NotCanceled::InvalidSignature => "invalid signature",
            // Resolved from the history store by the gateway; without one, not found.
            NotCanceled::Forgotten => "not found",
        }
    }
}

/// Order ids of a cancel report: one is kept inline (a single cancel allocates nothing).
pub type CancelIds = SmallVec<[OrderId; 1]>;

/// Order ids not cancelled, with the reason: one is kept inline.
pub type NotCanceledIds = SmallVec<[(OrderId, NotCanceled); 1]>;

/// The result of a cancel (API.md §2.5).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CancelReport {
    /// Orders cancelled, by id.
    pub canceled: CancelIds,
    /// Orders not cancelled, with the reason.
    pub not_canceled: NotCanceledIds,
}

impl CancelReport {
    /// A cancel that took none of `ids`, each for `reason`.
    pub fn none_canceled(ids: Vec<OrderId>, reason: NotCanceled) -> CancelReport {
        CancelReport {
            canceled: CancelIds::new(),
            not_canceled: ids.into_iter().map(|id| (id, reason)).collect(),
        }
    }
}

//! The statuses of an order and of a trade (API.md §2.6, §3).
//!
//! In JSON each is written by its API name; binary formats write the variant's index, so the
//! order of the variants is part of the journal's and the snapshots' format.

use serde::{Deserialize, Serialize};

/// An order's status as reported outside (API.md §3): `live`, `delayed`, `matched` or
/// `canceled`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OrderStatus {
    /// Resting on the book.
    Live,
    /// Waiting out the market's taker delay.
    Delayed,
    /// Fully filled.
    Matched,
    /// Cancelled (by its owner, self-trade prevention, expiry, resolution or a kill).
    Canceled,
}

impl OrderStatus {
    /// `live`, `delayed`, `matched` or `canceled`.
    pub const fn as_str(self) -> &'static str {
        match self {
            OrderStatus::Live => "live",
            OrderStatus::Delayed => "delayed",
            OrderStatus::Matched => "matched",
            OrderStatus::Canceled => "canceled",
        }
    }
}

/// A trade's settlement status (API.md §2.6): `MATCHED`, `MINED`, `CONFIRMED`, `RETRYING` or
/// `FAILED`.
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
#[serde(rename_all = "UPPERCASE")]
pub enum TradeStatus {
    /// Matched by the engine, not yet on chain.
    Matched,
    /// Included in a block.
    Mined,
    /// Past the confirmation depth: final.
    Confirmed,
    /// Submission failed and is being retried.
    Retrying,
    /// Settlement failed: the ledger movement was reversed. Final.
    Failed,
}

impl TradeStatus {
    /// `MATCHED`, `MINED`, `CONFIRMED`, `RETRYING` or `FAILED`.
    pub const fn as_str(self) -> &'static str {
        match self {
            TradeStatus::Matched => "MATCHED",
            TradeStatus::Mined => "MINED",
            TradeStatus::Confirmed => "CONFIRMED",
            TradeStatus::Retrying => "RETRYING",
            TradeStatus::Failed => "FAILED",
        }
    }

    /// Whether no further change can follow.
    pub const fn is_final(self) -> bool {
        matches!(self, TradeStatus::Confirmed | TradeStatus::Failed)
    }

    /// Whether `next` may follow `self` (MATCHED → MINED → CONFIRMED, or via RETRYING to FAILED).
    pub const fn may_move_to(self, next: TradeStatus) -> bool {
        use TradeStatus::*;
        matches!(
            (self, next),
            (Matched, Mined)
                | (Matched, Retrying)
                | (Matched, Failed)
                | (Mined, Confirmed)
                | (Mined, Retrying)
                | (Mined, Failed)
                | (Retrying, Mined)
                | (Retrying, Retrying)
                | (Retrying, Failed)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_names_match_as_str() {
        for status in [
            OrderStatus::Live,
            OrderStatus::Delayed,
            OrderStatus::Matched,
            OrderStatus::Canceled,
        ] {
            let json = serde_json::to_string(&status).unwrap();
            assert_eq!(json, format!("\"{}\"", status.as_str()));
        }
        let json = serde_json::to_string(&TradeStatus::Retrying).unwrap();
        assert_eq!(json, "\"RETRYING\"");
    }
}

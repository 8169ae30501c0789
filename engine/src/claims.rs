//! What positions are worth after a market ends (API.md §2.9, API.md §13).

use crate::command::Resolution;
use crate::types::{Outcome, Units};

/// Collateral paid for `held_units` of `outcome` when the market ended as `resolution`:
/// one unit per winning token, nothing for a losing one, half a unit per token of either
/// outcome in a voided market.
pub fn payout_units(resolution: Resolution, outcome: Outcome, held_units: Units) -> Units {
    match (resolution, outcome) {
        (Resolution::Void, _) => held_units / 2,
        (Resolution::Yes, Outcome::Yes) | (Resolution::No, Outcome::No) => held_units,
        _ => 0,
    }
}

/// Collateral paid for a holder's whole position in a market that ended as `resolution`:
/// `yes_units` and `no_units` held. In a voided market the two are taken together, so that a
/// pair of one base unit each pays one unit (half of each, rounded down apart, would pay
/// nothing); rounding down applies once, to the total.
pub fn position_payout_units(resolution: Resolution, yes_units: Units, no_units: Units) -> Units {
    match resolution {
        Resolution::Void => ((u128::from(yes_units) + u128::from(no_units)) / 2) as Units,
        _ => {
            payout_units(resolution, Outcome::Yes, yes_units)
                + payout_units(resolution, Outcome::No, no_units)
        }
    }
}

/// Why a position is claimable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimReason {
    /// A winning token of a resolved market.
    ResolvedWinner,
    /// A token of a voided market.
    VoidedRefund,
}

impl ClaimReason {
    /// `resolved_winner` or `voided_refund`.
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimReason::ResolvedWinner => "resolved_winner",
            ClaimReason::VoidedRefund => "voided_refund",
        }
    }

    /// Whether a position of `outcome` is claimable after `resolution`, and why.
    pub fn of(resolution: Resolution, outcome: Outcome) -> Option<ClaimReason> {
        match (resolution, outcome) {
            (Resolution::Void, _) => Some(ClaimReason::VoidedRefund),
            (Resolution::Yes, Outcome::Yes) | (Resolution::No, Outcome::No) => {
                Some(ClaimReason::ResolvedWinner)
            }
            _ => None,
        }
    }
}

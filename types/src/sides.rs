//! An order's side, its outcome token and its lifetime policy.
//!
//! In JSON each is written by its API name (`BUY`, `Yes`, `GTC`); binary formats (the journal,
//! snapshots) write the variant's index, so the order of the variants is part of the journal's
//! format.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Order side. In a signed order it is the integer `0` (BUY) or `1` (SELL); in responses the
/// strings `BUY` and `SELL`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    bincode::Encode,
    bincode::Decode,
)]
#[serde(rename_all = "UPPERCASE")]
pub enum Side {
    /// Pays collateral for shares.
    Buy,
    /// Gives shares for collateral.
    Sell,
}

impl Side {
    /// The signed-order integer: 0 for BUY, 1 for SELL.
    pub const fn as_u8(self) -> u8 {
        match self {
            Side::Buy => 0,
            Side::Sell => 1,
        }
    }

    /// The side of a signed-order integer.
    pub const fn from_u8(value: u8) -> Option<Side> {
        match value {
            0 => Some(Side::Buy),
            1 => Some(Side::Sell),
            _ => None,
        }
    }

    /// `BUY` or `SELL`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Side::Buy => "BUY",
            Side::Sell => "SELL",
        }
    }

    /// The other side.
    pub const fn opposite(self) -> Side {
        match self {
            Side::Buy => Side::Sell,
            Side::Sell => Side::Buy,
        }
    }
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One of a market's two outcome tokens: `Yes` or `No`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Outcome {
    /// The Yes token: the book's price axis.
    Yes,
    /// The No token: its prices are mirrored (`1 - p`) on the Yes axis.
    No,
}

impl Outcome {
    /// `Yes` or `No`, as on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            Outcome::Yes => "Yes",
            Outcome::No => "No",
        }
    }

    /// The other outcome.
    pub const fn other(self) -> Outcome {
        match self {
            Outcome::Yes => Outcome::No,
            Outcome::No => Outcome::Yes,
        }
    }

    /// 0 for Yes, 1 for No: an index into per-outcome arrays.
    pub const fn index(self) -> usize {
        match self {
            Outcome::Yes => 0,
            Outcome::No => 1,
        }
    }
}

/// Order time-in-force (API.md §3): `GTC`, `GTD`, `FOK` or `FAK`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    bincode::Encode,
    bincode::Decode,
)]
#[serde(rename_all = "UPPERCASE")]
pub enum OrderType {
    /// Good till cancelled: rests.
    Gtc,
    /// Good till date: rests until its non-zero `expiration`.
    Gtd,
    /// Fill or kill: fills entirely at the signed price or not at all.
    Fok,
    /// Fill and kill: fills what it can and cancels the rest.
    Fak,
}

/// Why a string is not an order type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("orderType: expected one of GTC, GTD, FOK, FAK")]
pub struct OrderTypeError;

impl OrderType {
    /// `GTC`, `GTD`, `FOK` or `FAK`.
    pub const fn as_str(self) -> &'static str {
        match self {
            OrderType::Gtc => "GTC",
            OrderType::Gtd => "GTD",
            OrderType::Fok => "FOK",
            OrderType::Fak => "FAK",
        }
    }

    /// True for the types that may rest on the book (GTC, GTD), the only ones `postOnly` allows.
    pub const fn rests(self) -> bool {
        matches!(self, OrderType::Gtc | OrderType::Gtd)
    }
}

impl FromStr for OrderType {
    type Err = OrderTypeError;

    fn from_str(text: &str) -> Result<OrderType, OrderTypeError> {
        match text {
            "GTC" => Ok(OrderType::Gtc),
            "GTD" => Ok(OrderType::Gtd),
            "FOK" => Ok(OrderType::Fok),
            "FAK" => Ok(OrderType::Fak),
            _ => Err(OrderTypeError),
        }
    }
}

impl fmt::Display for OrderType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_names_are_the_api_names() {
        assert_eq!(serde_json::to_string(&Side::Sell).unwrap(), "\"SELL\"");
        assert_eq!(serde_json::to_string(&Outcome::No).unwrap(), "\"No\"");
        assert_eq!(serde_json::to_string(&OrderType::Fak).unwrap(), "\"FAK\"");
        for order_type in [
            OrderType::Gtc,
            OrderType::Gtd,
            OrderType::Fok,
            OrderType::Fak,
        ] {
            assert_eq!(order_type.as_str().parse(), Ok(order_type));
        }
        assert_eq!("gtc".parse::<OrderType>(), Err(OrderTypeError));
    }

    #[test]
    fn binary_formats_write_the_variant_index() {
        let config = bincode::config::standard();
        let serde_bytes = bincode::serde::encode_to_vec(OrderType::Fok, config).unwrap();
        let derived = bincode::encode_to_vec(OrderType::Fok, config).unwrap();
        assert_eq!(serde_bytes, vec![2]);
        assert_eq!(derived, serde_bytes);
        assert_eq!(
            bincode::serde::encode_to_vec(Side::Sell, config).unwrap(),
            vec![1]
        );
    }
}

//! Serde adapters for values the wire writes as strings: decimal integers, trimmed-decimal
//! prices and values that may be the empty string.

/// A number written as a decimal string (`"42"`), for any `Display + FromStr` integer.
pub mod dec {
    use std::fmt::Display;
    use std::str::FromStr;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes the value as a decimal string.
    pub fn serialize<T: Display, S: Serializer>(
        value: &T,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_str(value)
    }

    /// Reads a decimal string.
    pub fn deserialize<'de, T, D>(deserializer: D) -> Result<T, D::Error>
    where
        T: FromStr,
        T::Err: Display,
        D: Deserializer<'de>,
    {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A price held in ticks of 0.0001 and written as a trimmed decimal string (`5500` ↔ `"0.55"`).
pub mod price {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::units::{parse_decimal_ticks, PriceTicksDisplay};

    /// Writes price ticks as a trimmed decimal.
    pub fn serialize<S: Serializer>(price_ticks: &u32, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&PriceTicksDisplay(*price_ticks))
    }

    /// Reads a decimal price into ticks.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        parse_decimal_ticks(&text).map_err(serde::de::Error::custom)
    }
}

/// An optional value written as its string form, or as `""` when absent.
pub mod empty_or {
    use std::fmt::Display;
    use std::str::FromStr;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes the value, or `""` for `None`.
    pub fn serialize<T: Display, S: Serializer>(
        value: &Option<T>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(value) => serializer.collect_str(value),
            None => serializer.serialize_str(""),
        }
    }

    /// Reads `""` as `None`, anything else as the value.
    pub fn deserialize<'de, T, D>(deserializer: D) -> Result<Option<T>, D::Error>
    where
        T: FromStr,
        T::Err: Display,
        D: Deserializer<'de>,
    {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        if text.is_empty() {
            return Ok(None);
        }
        text.parse().map(Some).map_err(serde::de::Error::custom)
    }
}

//! `FieldError` and the field-by-field readers of request bodies: every error names the field
//! that is missing or has the wrong type or form (CONTRACT 6, 18).

use std::fmt;

use serde_json::{Map, Value};

use crate::address::{Address, AddressError};
use crate::fixed_bytes::FixedBytes;
use crate::order::{Side, SignatureType};
use crate::signature::Signature;
use crate::u256::{U256Error, U256};

/// The longest piece of client input quoted back in an error message.
const QUOTED_INPUT_MAX: usize = 80;

/// A request body field that is missing or has the wrong type or form. Displays as
/// `path: rule`, for example `order.makerAmount: expected a decimal integer string`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {rule}")]
pub struct FieldError {
    /// Where the field is: `order.makerAmount`, `orders[3].order.side`, `body`.
    pub path: String,
    /// What the field must be.
    pub rule: String,
}

impl FieldError {
    /// An error at `path`.
    pub fn new(path: impl Into<String>, rule: impl Into<String>) -> FieldError {
        FieldError {
            path: path.into(),
            rule: rule.into(),
        }
    }

    /// The same error inside an outer element, e.g. `orders[3]` + `order.side`.
    pub fn within(self, outer: &str) -> FieldError {
        FieldError {
            path: join(outer, &self.path),
            rule: self.rule,
        }
    }
}

/// `outer.name`, or `name` at the top level; `outer[3]` when `name` is an index.
pub(crate) fn join(outer: &str, name: &str) -> String {
    if outer.is_empty() {
        name.to_string()
    } else if name.starts_with('[') {
        format!("{outer}{name}")
    } else {
        format!("{outer}.{name}")
    }
}

/// The JSON type of a value, for messages.
pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Client input quoted for a message, cut to a bounded length.
struct Quoted<'a>(&'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cut = self
            .0
            .char_indices()
            .nth(QUOTED_INPUT_MAX)
            .map_or(self.0.len(), |(at, _)| at);
        if cut < self.0.len() {
            write!(f, "{:?}...", &self.0[..cut])
        } else {
            write!(f, "{:?}", self.0)
        }
    }
}

/// Parses a whole body as JSON (error path `body`).
pub(crate) fn parse_json(body: &[u8]) -> Result<Value, FieldError> {
    serde_json::from_slice(body)
        .map_err(|error| FieldError::new("body", format!("not valid JSON ({error})")))
}

/// A JSON object being read field by field, with the path of the object for messages.
pub(crate) struct Fields<'a> {
    map: &'a Map<String, Value>,
    path: &'a str,
}

impl<'a> Fields<'a> {
    /// Reads `value` as an object found at `path` (`""` for the body itself).
    pub(crate) fn of(value: &'a Value, path: &'a str) -> Result<Fields<'a>, FieldError> {
        match value {
            Value::Object(map) => Ok(Fields { map, path }),
            other => {
                let at = if path.is_empty() { "body" } else { path };
                Err(FieldError::new(
                    at,
                    format!("expected a JSON object, found {}", kind(other)),
                ))
            }
        }
    }

    /// An error at field `name` of this object.
    pub(crate) fn error(&self, name: &str, rule: impl Into<String>) -> FieldError {
        FieldError::new(join(self.path, name), rule)
    }

    /// The path of field `name`.
    pub(crate) fn path_of(&self, name: &str) -> String {
        join(self.path, name)
    }

    /// The value of an optional field; `null` counts as absent.
    pub(crate) fn optional(&self, name: &str) -> Option<&'a Value> {
        self.map.get(name).filter(|value| !value.is_null())
    }

    /// The value of a required field.
    pub(crate) fn required(&self, name: &str) -> Result<&'a Value, FieldError> {
        self.optional(name)
            .ok_or_else(|| self.error(name, "is required"))
    }

    /// A required string field; `what` describes the expected form.
    fn string(&self, name: &str, what: &str) -> Result<&'a str, FieldError> {
        match self.required(name)? {
            Value::String(text) => Ok(text),
            other => Err(self.error(name, format!("expected {what}, found {}", kind(other)))),
        }
    }

    /// A decimal `uint256` written as a string.
    pub(crate) fn u256_string(&self, name: &str) -> Result<U256, FieldError> {
        let text = self.string(name, "a decimal integer string")?;
        self.u256_text(name, text)
    }

    /// A decimal `uint256` written as a string or as a non-negative JSON integer.
    pub(crate) fn u256_string_or_integer(&self, name: &str) -> Result<U256, FieldError> {
        match self.required(name)? {
            Value::String(text) => self.u256_text(name, text),
            Value::Number(number) => number.as_u64().map(U256::from_u64).ok_or_else(|| {
                self.error(
                    name,
                    format!("expected a non-negative integer, found {number}"),
                )
            }),
            other => Err(self.error(
                name,
                format!(
                    "expected a decimal integer string or integer, found {}",
                    kind(other)
                ),
            )),
        }
    }

    fn u256_text(&self, name: &str, text: &str) -> Result<U256, FieldError> {
        U256::from_dec_str(text).map_err(|error| match error {
            U256Error::Overflow => self.error(name, "decimal integer does not fit in 256 bits"),
            _ => self.error(
                name,
                format!("expected a decimal integer string, found {}", Quoted(text)),
            ),
        })
    }

    /// A `0x` address in any case (mixed case must pass EIP-55).
    pub(crate) fn address(&self, name: &str) -> Result<Address, FieldError> {
        let text = self.string(name, "a 0x-prefixed 20-byte hex address")?;
        Address::parse(text).map_err(|error| match error {
            AddressError::Malformed => self.error(name, format!("{error}, found {}", Quoted(text))),
            AddressError::BadChecksum { .. } => self.error(name, error.to_string()),
        })
    }

    /// `0x` followed by `2N` hex digits.
    pub(crate) fn fixed_bytes<const N: usize>(
        &self,
        name: &str,
    ) -> Result<FixedBytes<N>, FieldError> {
        let rule = || format!("expected 0x followed by {} hex digits ({N} bytes)", 2 * N);
        let text = self.string(name, &rule())?;
        FixedBytes::from_hex(text)
            .map_err(|_| self.error(name, format!("{}, found {}", rule(), Quoted(text))))
    }

    /// A 65-byte signature: `0x` + 130 hex digits.
    pub(crate) fn signature(&self, name: &str) -> Result<Signature, FieldError> {
        const RULE: &str = "expected 0x followed by 130 hex digits (a 65-byte signature)";
        let text = self.string(name, RULE)?;
        Signature::from_hex(text).map_err(|_| self.error(name, RULE))
    }

    /// Order side: `0`, `1`, `"BUY"` or `"SELL"`.
    pub(crate) fn side(&self, name: &str) -> Result<Side, FieldError> {
        let side = match self.required(name)? {
            Value::Number(number) => number
                .as_u64()
                .and_then(|value| u8::try_from(value).ok())
                .and_then(Side::from_u8),
            Value::String(text) if text == "BUY" => Some(Side::Buy),
            Value::String(text) if text == "SELL" => Some(Side::Sell),
            _ => None,
        };
        side.ok_or_else(|| self.error(name, "expected 0 (BUY), 1 (SELL), \"BUY\" or \"SELL\""))
    }

    /// Signature type: the integer `0` or `3`.
    pub(crate) fn signature_type(&self, name: &str) -> Result<SignatureType, FieldError> {
        let value = self.required(name)?;
        value
            .as_u64()
            .and_then(|value| u8::try_from(value).ok())
            .and_then(SignatureType::from_u8)
            .ok_or_else(|| self.error(name, "expected the integer 0 (EOA) or 3 (smart account)"))
    }

    /// An optional boolean, `false` when absent.
    pub(crate) fn bool_or_false(&self, name: &str) -> Result<bool, FieldError> {
        match self.optional(name) {
            None => Ok(false),
            Some(Value::Bool(flag)) => Ok(*flag),
            Some(other) => Err(self.error(
                name,
                format!("expected true or false, found {}", kind(other)),
            )),
        }
    }

    /// A required non-negative JSON integer that fits in `int64`.
    pub(crate) fn int64_non_negative(&self, name: &str) -> Result<u64, FieldError> {
        self.required(name)?
            .as_u64()
            .filter(|value| i64::try_from(*value).is_ok())
            .ok_or_else(|| self.error(name, "expected a non-negative int64 integer"))
    }

    /// The signer of a cancel: required when the signature type is 3.
    pub(crate) fn cancel_signer(
        &self,
        name: &str,
        signature_type: SignatureType,
    ) -> Result<Option<Address>, FieldError> {
        match (self.optional(name), signature_type) {
            (None, SignatureType::SmartAccount) => {
                Err(self.error(name, "is required when signatureType is 3"))
            }
            (None, SignatureType::Eoa) => Ok(None),
            (Some(_), _) => self.address(name).map(Some),
        }
    }
}

/// Reads a body that must be a JSON array of `elements_min..=elements_max` elements, parsing
/// each element with `parse_element(value, "name[index]")`.
pub(crate) fn parse_array<T>(
    body: &[u8],
    name: &str,
    elements_min: usize,
    elements_max: usize,
    parse_element: impl Fn(&Value, &str) -> Result<T, FieldError>,
) -> Result<Vec<T>, FieldError> {
    let value = parse_json(body)?;
    let Value::Array(elements) = &value else {
        return Err(FieldError::new(
            "body",
            format!("expected a JSON array, found {}", kind(&value)),
        ));
    };
    if elements.len() < elements_min || elements.len() > elements_max {
        return Err(FieldError::new(
            name,
            format!(
                "expected between {elements_min} and {elements_max} elements, found {}",
                elements.len()
            ),
        ));
    }
    elements
        .iter()
        .enumerate()
        .map(|(index, element)| parse_element(element, &format!("{name}[{index}]")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_displays_path_then_rule() {
        let error = FieldError::new("order.makerAmount", "expected a decimal integer string");
        assert_eq!(
            error.to_string(),
            "order.makerAmount: expected a decimal integer string"
        );
        assert_eq!(
            error.within("orders[3]").path,
            "orders[3].order.makerAmount"
        );
        assert_eq!(
            FieldError::new("[2].orderId", "x").within("orders").path,
            "orders[2].orderId"
        );
    }

    #[test]
    fn long_input_is_cut_in_messages() {
        let value = serde_json::json!({ "amount": "x".repeat(500) });
        let fields = Fields::of(&value, "").unwrap();
        let error = fields.u256_string("amount").unwrap_err();
        assert!(error.rule.len() < 200, "{}", error.rule);
        assert!(error.rule.ends_with("..."), "{}", error.rule);
    }
}

//! `FieldError` and the field-by-field readers of request bodies: every error names the field
//! that is missing or has the wrong type or form (CONTRACT 6, 18).

use std::fmt;

use simd_json::{BorrowedValue, StaticNode};

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

/// Deepest nesting of arrays and objects a body may have (serde_json's limit too): the
/// parser recurses per level, and a deeper body would exhaust the thread's stack.
pub const JSON_DEPTH_MAX: usize = 128;

/// What the field readers need of a parsed JSON value. Implemented by simd-json's borrowed
/// DOM (the request path: bodies are parsed with simd-json) and by `serde_json::Value`
/// (values built in code, such as the signing vectors).
pub trait JsonNode: Sized {
    /// The JSON type, for messages: `a string`, `null`...
    fn kind(&self) -> &'static str;
    /// The member `key` of an object (the last one if the key repeats); `None` otherwise.
    fn member(&self, key: &str) -> Option<&Self>;
    /// Whether this is an object.
    fn is_object(&self) -> bool;
    /// The elements of an array.
    fn elements(&self) -> Option<&[Self]>;
    /// Whether this is `null`.
    fn is_null(&self) -> bool;
    /// The text of a string.
    fn text(&self) -> Option<&str>;
    /// A non-negative integer (not a float, not negative).
    fn unsigned(&self) -> Option<u64>;
    /// A boolean.
    fn flag(&self) -> Option<bool>;
    /// The number as written back, for messages; `None` if this is not a number.
    fn number_text(&self) -> Option<String>;
}

impl JsonNode for BorrowedValue<'_> {
    fn kind(&self) -> &'static str {
        match self {
            BorrowedValue::Static(StaticNode::Null) => "null",
            BorrowedValue::Static(StaticNode::Bool(_)) => "a boolean",
            BorrowedValue::Static(_) => "a number",
            BorrowedValue::String(_) => "a string",
            BorrowedValue::Array(_) => "an array",
            BorrowedValue::Object(_) => "an object",
        }
    }
    fn member(&self, key: &str) -> Option<&Self> {
        match self {
            BorrowedValue::Object(object) => object
                .iter()
                .filter(|(name, _)| name.as_ref() == key)
                .map(|(_, value)| value)
                .last(),
            _ => None,
        }
    }
    fn is_object(&self) -> bool {
        matches!(self, BorrowedValue::Object(_))
    }
    fn elements(&self) -> Option<&[Self]> {
        match self {
            BorrowedValue::Array(elements) => Some(elements.as_slice()),
            _ => None,
        }
    }
    fn is_null(&self) -> bool {
        matches!(self, BorrowedValue::Static(StaticNode::Null))
    }
    fn text(&self) -> Option<&str> {
        match self {
            BorrowedValue::String(text) => Some(text),
            _ => None,
        }
    }
    fn unsigned(&self) -> Option<u64> {
        match self {
            BorrowedValue::Static(StaticNode::U64(value)) => Some(*value),
            BorrowedValue::Static(StaticNode::I64(value)) => u64::try_from(*value).ok(),
            _ => None,
        }
    }
    fn flag(&self) -> Option<bool> {
        match self {
            BorrowedValue::Static(StaticNode::Bool(flag)) => Some(*flag),
            _ => None,
        }
    }
    fn number_text(&self) -> Option<String> {
        match self {
            BorrowedValue::Static(StaticNode::U64(value)) => Some(value.to_string()),
            BorrowedValue::Static(StaticNode::I64(value)) => Some(value.to_string()),
            BorrowedValue::Static(StaticNode::F64(value)) => Some(format!("{value:?}")),
            _ => None,
        }
    }
}

impl JsonNode for serde_json::Value {
    fn kind(&self) -> &'static str {
        match self {
            serde_json::Value::Null => "null",
            serde_json::Value::Bool(_) => "a boolean",
            serde_json::Value::Number(_) => "a number",
            serde_json::Value::String(_) => "a string",
            serde_json::Value::Array(_) => "an array",
            serde_json::Value::Object(_) => "an object",
        }
    }
    fn member(&self, key: &str) -> Option<&Self> {
        self.as_object().and_then(|object| object.get(key))
    }
    fn is_object(&self) -> bool {
        self.is_object()
    }
    fn elements(&self) -> Option<&[Self]> {
        self.as_array().map(Vec::as_slice)
    }
    fn is_null(&self) -> bool {
        self.is_null()
    }
    fn text(&self) -> Option<&str> {
        self.as_str()
    }
    fn unsigned(&self) -> Option<u64> {
        self.as_u64()
    }
    fn flag(&self) -> Option<bool> {
        self.as_bool()
    }
    fn number_text(&self) -> Option<String> {
        self.as_number().map(ToString::to_string)
    }
}

/// Whether `body`'s arrays and objects nest at most `max` deep (brackets inside strings do
/// not count). Malformed input passes: the parser reports it.
fn nesting_within(body: &[u8], max: usize) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &byte in body {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return false;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    true
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

/// Parses a whole body with simd-json (into `scratch`, which it rewrites in place) and
/// reads it with `read`; errors have the path `body`.
pub(crate) fn with_json<T>(
    body: &[u8],
    read: impl FnOnce(&BorrowedValue<'_>) -> Result<T, FieldError>,
) -> Result<T, FieldError> {
    if !nesting_within(body, JSON_DEPTH_MAX) {
        return Err(FieldError::new(
            "body",
            format!("not valid JSON (nested deeper than {JSON_DEPTH_MAX} levels)"),
        ));
    }
    let mut scratch = body.to_vec();
    let value = simd_json::to_borrowed_value(&mut scratch)
        .map_err(|error| FieldError::new("body", format!("not valid JSON ({error})")))?;
    read(&value)
}

/// A JSON object being read field by field, with the path of the object for messages.
pub(crate) struct Fields<'a, V: JsonNode> {
    object: &'a V,
    path: &'a str,
}

impl<'a, V: JsonNode> Fields<'a, V> {
    /// Reads `value` as an object found at `path` (`""` for the body itself).
    pub(crate) fn of(value: &'a V, path: &'a str) -> Result<Fields<'a, V>, FieldError> {
        if value.is_object() {
            return Ok(Fields {
                object: value,
                path,
            });
        }
        let at = if path.is_empty() { "body" } else { path };
        Err(FieldError::new(
            at,
            format!("expected a JSON object, found {}", value.kind()),
        ))
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
    pub(crate) fn optional(&self, name: &str) -> Option<&'a V> {
        self.object.member(name).filter(|value| !value.is_null())
    }

    /// The value of a required field.
    pub(crate) fn required(&self, name: &str) -> Result<&'a V, FieldError> {
        self.optional(name)
            .ok_or_else(|| self.error(name, "is required"))
    }

    /// A required string field; `what` describes the expected form.
    fn string(&self, name: &str, what: &str) -> Result<&'a str, FieldError> {
        let value = self.required(name)?;
        value
            .text()
            .ok_or_else(|| self.error(name, format!("expected {what}, found {}", value.kind())))
    }

    /// A decimal `uint256` written as a string.
    pub(crate) fn u256_string(&self, name: &str) -> Result<U256, FieldError> {
        let text = self.string(name, "a decimal integer string")?;
        self.u256_text(name, text)
    }

    /// A decimal `uint256` written as a string or as a non-negative JSON integer.
    pub(crate) fn u256_string_or_integer(&self, name: &str) -> Result<U256, FieldError> {
        let value = self.required(name)?;
        if let Some(text) = value.text() {
            return self.u256_text(name, text);
        }
        if let Some(number) = value.number_text() {
            return value.unsigned().map(U256::from_u64).ok_or_else(|| {
                self.error(
                    name,
                    format!("expected a non-negative integer, found {number}"),
                )
            });
        }
        Err(self.error(
            name,
            format!(
                "expected a decimal integer string or integer, found {}",
                value.kind()
            ),
        ))
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
        let value = self.required(name)?;
        let side = match value.text() {
            Some("BUY") => Some(Side::Buy),
            Some("SELL") => Some(Side::Sell),
            Some(_) => None,
            None => value
                .unsigned()
                .and_then(|value| u8::try_from(value).ok())
                .and_then(Side::from_u8),
        };
        side.ok_or_else(|| self.error(name, "expected 0 (BUY), 1 (SELL), \"BUY\" or \"SELL\""))
    }

    /// Signature type: the integer `0` or `3`.
    pub(crate) fn signature_type(&self, name: &str) -> Result<SignatureType, FieldError> {
        let value = self.required(name)?;
        value
            .unsigned()
            .and_then(|value| u8::try_from(value).ok())
            .and_then(SignatureType::from_u8)
            .ok_or_else(|| self.error(name, "expected the integer 0 (EOA) or 3 (smart account)"))
    }

    /// An optional boolean, `false` when absent.
    pub(crate) fn bool_or_false(&self, name: &str) -> Result<bool, FieldError> {
        match self.optional(name) {
            None => Ok(false),
            Some(value) => value.flag().ok_or_else(|| {
                self.error(
                    name,
                    format!("expected true or false, found {}", value.kind()),
                )
            }),
        }
    }

    /// A required non-negative JSON integer that fits in `int64`.
    pub(crate) fn int64_non_negative(&self, name: &str) -> Result<u64, FieldError> {
        self.required(name)?
            .unsigned()
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
    parse_element: impl Fn(&BorrowedValue<'_>, &str) -> Result<T, FieldError>,
) -> Result<Vec<T>, FieldError> {
    with_json(body, |value| {
        read_array(value, name, elements_min, elements_max, parse_element)
    })
}

/// Reads `value` as an array of `elements_min..=elements_max` elements (see [`parse_array`]).
fn read_array<T, V: JsonNode>(
    value: &V,
    name: &str,
    elements_min: usize,
    elements_max: usize,
    parse_element: impl Fn(&V, &str) -> Result<T, FieldError>,
) -> Result<Vec<T>, FieldError> {
    let Some(elements) = value.elements() else {
        return Err(FieldError::new(
            "body",
            format!("expected a JSON array, found {}", value.kind()),
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
    fn deep_nesting_is_refused_before_the_parser_recurses() {
        for body in [
            format!("{}{}", "[".repeat(200_000), "]".repeat(200_000)),
            format!("{}1{}", "{\"a\":".repeat(100_000), "}".repeat(100_000)),
        ] {
            let error = with_json(body.as_bytes(), |_| Ok(())).unwrap_err();
            assert_eq!(error.path, "body");
            assert!(
                error.rule.contains("nested deeper than 128"),
                "{}",
                error.rule
            );
        }
        let fine = format!("{}{}", "[".repeat(128), "]".repeat(128));
        assert!(with_json(fine.as_bytes(), |_| Ok(())).is_ok());
        // Brackets inside strings, escaped quotes included, do not count.
        let quoted = format!(r#"{{"a":"{}\"{}"}}"#, "[".repeat(300), "{".repeat(300));
        assert!(with_json(quoted.as_bytes(), |_| Ok(())).is_ok());
    }

    #[test]
    fn both_parsers_read_fields_alike() {
        let text = r#"{"n":7,"neg":-3,"f":1.5,"s":"x","b":true,"z":null,"k":1,"k":2}"#;
        let serde_value: serde_json::Value = serde_json::from_str(text).unwrap();
        type Read<'a> = &'a dyn Fn(&str) -> (Option<u64>, Option<String>, &'static str);
        let check = |fields: Read<'_>| {
            assert_eq!(fields("n"), (Some(7), Some("7".into()), "a number"));
            assert_eq!(fields("neg"), (None, Some("-3".into()), "a number"));
            assert_eq!(fields("f"), (None, Some("1.5".into()), "a number"));
            assert_eq!(fields("s"), (None, None, "a string"));
            assert_eq!(fields("b"), (None, None, "a boolean"));
            assert_eq!(fields("z"), (None, None, "null"));
            assert_eq!(
                fields("k").0,
                Some(2),
                "a repeated key: the last one counts"
            );
        };
        check(&|name| {
            let v = serde_value.member(name).unwrap();
            (v.unsigned(), v.number_text(), v.kind())
        });
        with_json(text.as_bytes(), |value| {
            check(&|name| {
                let v = value.member(name).unwrap();
                (v.unsigned(), v.number_text(), v.kind())
            });
            let fields = Fields::of(value, "")?;
            assert!(fields.optional("z").is_none());
            assert_eq!(fields.bool_or_false("b"), Ok(true));
            Ok(())
        })
        .unwrap();
        let error = with_json(b"{\"a\":", |_| Ok(())).unwrap_err();
        assert_eq!(error.path, "body");
        assert!(error.rule.starts_with("not valid JSON ("), "{}", error.rule);
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

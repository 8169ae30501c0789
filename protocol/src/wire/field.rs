//! `FieldError` and the field-by-field readers of request bodies: every error names the field
//! that is missing or has the wrong type or form (API.md §8, 18).

use std::fmt;
use std::marker::PhantomData;

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

/// Deepest nesting of arrays and objects a body may have, serde_json's limit (it refuses the
/// 128th level): simd-json recurses per level while it builds its DOM, and a deeper body
/// would exhaust the thread's stack (an abort, not a panic).
pub const JSON_DEPTH_MAX: usize = 127;

/// The most members of an object simd-json keeps in order: a larger object becomes a hash
/// map, where a repeated key no longer reliably reads as its last value.
const OBJECT_IN_ORDER_MAX: usize = 32;

/// What the field readers need of a parsed JSON value. Implemented by simd-json's borrowed
/// DOM (the request path: bodies are parsed with simd-json) and by `serde_json::Value` (the
/// few bodies simd-json would read differently, see `scan`, and values built in code, such as
/// the signing vectors).
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
            // As serde_json writes it (`1e+20`), though such bodies are read with serde_json
            // (see `scan`).
            BorrowedValue::Static(StaticNode::F64(value)) => Some(
                serde_json::Number::from_f64(*value)
                    .map_or_else(|| format!("{value:?}"), |number| number.to_string()),
            ),
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

/// How [`scan`] finds a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Nested deeper than [`JSON_DEPTH_MAX`]: refused before any parser runs.
    TooDeep,
    /// Read by simd-json exactly as serde_json reads it: parsed with simd-json.
    Plain,
    /// Holds something simd-json reads differently from serde_json: parsed with serde_json,
    /// as every body was before. Client bodies rarely hold these.
    Unusual,
}

/// Marks an open array in [`scan`]'s stack of levels (an open object holds its comma count).
const OPEN_ARRAY: u8 = u8::MAX;

/// Looks at a body in one linear pass, without recursion: its nesting depth and whether it holds
/// something simd-json reads differently from serde_json (brackets and numbers inside strings
/// do not count):
/// - a number with a fraction or an exponent: simd-json rounds some differently, and the
///   number is quoted back in messages;
/// - the integer `-0`: simd-json reads the integer 0, serde_json the float -0.0 (so `"side":-0`
///   is not an integer);
/// - an integer of more than 18 digits: simd-json refuses the body beyond 64 bits, serde_json
///   reads a float;
/// - a `\u` escape: simd-json accepts a lone surrogate (`"\ud800"`), serde_json refuses it;
/// - a NUL byte outside strings: simd-json takes it for whitespace after a number or literal
///   (`{"side":0\0}` is JSON to it);
/// - an object of more than [`OBJECT_IN_ORDER_MAX`] members (see there).
///
/// Malformed input may come out either way: both parsers refuse it.
fn scan(body: &[u8]) -> Shape {
    let mut levels = [0u8; JSON_DEPTH_MAX];
    let (mut at, mut depth, mut unusual) = (0usize, 0usize, false);
    while let Some(&byte) = body.get(at) {
        at += 1;
        match byte {
            b'"' => loop {
                // To the closing quote, past escapes (or to the end of a malformed body).
                at += quote_or_backslash(body.get(at..).unwrap_or_default());
                if body.get(at) == Some(&b'\\') {
                    unusual |= body.get(at + 1) == Some(&b'u');
                    at += 2;
                } else {
                    at += 1;
                    break;
                }
            },
            b'-' | b'0'..=b'9' => {
                let start = at - 1;
                while body.get(at).is_some_and(|byte| {
                    matches!(byte, b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')
                }) {
                    at += 1;
                }
                unusual |= number_is_unusual(body.get(start..at).unwrap_or_default());
            }
            b'\0' => unusual = true,
            b'[' | b'{' => {
                let Some(level) = levels.get_mut(depth) else {
                    return Shape::TooDeep;
                };
                *level = if byte == b'[' { OPEN_ARRAY } else { 0 };
                depth += 1;
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b',' => {
                if let Some(commas) = depth.checked_sub(1).and_then(|top| levels.get_mut(top)) {
                    if *commas != OPEN_ARRAY {
                        // A comma more than the members before it.
                        *commas = commas.saturating_add(1);
                        unusual |= usize::from(*commas) >= OBJECT_IN_ORDER_MAX;
                    }
                }
            }
            _ => {}
        }
    }
    if unusual {
        Shape::Unusual
    } else {
        Shape::Plain
    }
}

/// The index of the first `"` or `\` in `bytes` (`bytes.len()` if none), eight bytes at a
/// time: string contents are most of a body.
fn quote_or_backslash(bytes: &[u8]) -> usize {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    const HIGHS: u64 = ONES << 7;
    // The high bit of every zero byte of `word` (exact up to the first zero byte: the lowest
    // set bit marks the first one).
    let zero_bytes = |word: u64| word.wrapping_sub(ONES) & !word & HIGHS;
    let mut chunks = bytes.chunks_exact(8);
    let mut at = 0;
    for chunk in &mut chunks {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        let word = u64::from_le_bytes(word);
        let found = zero_bytes(word ^ (ONES * u64::from(b'"')))
            | zero_bytes(word ^ (ONES * u64::from(b'\\')));
        if found != 0 {
            return at + found.trailing_zeros() as usize / 8;
        }
        at += 8;
    }
    let rest = chunks.remainder();
    at + rest
        .iter()
        .position(|&byte| byte == b'"' || byte == b'\\')
        .unwrap_or(rest.len())
}

/// Whether simd-json reads this number differently from serde_json (see [`scan`]).
fn number_is_unusual(number: &[u8]) -> bool {
    let (negative, digits) = match number.strip_prefix(b"-") {
        Some(digits) => (true, digits),
        None => (false, number),
    };
    (negative && digits == b"0") || digits.len() > 18 || !digits.iter().all(u8::is_ascii_digit)
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

/// A body type read field by field from either parser's DOM.
pub(crate) trait FromJson: Sized {
    /// Reads the value found at `path` (`""` for the body itself).
    fn from_json<V: JsonNode>(value: &V, path: &str) -> Result<Self, FieldError>;
}

/// What is read from a parsed body, whichever parser parsed it.
trait ReadBody {
    /// What the body reads as.
    type Output;
    /// Reads the whole body.
    fn read<V: JsonNode>(self, value: &V) -> Result<Self::Output, FieldError>;
}

/// The body is one `T`.
struct One<T>(PhantomData<fn() -> T>);

impl<T: FromJson> ReadBody for One<T> {
    type Output = T;
    fn read<V: JsonNode>(self, value: &V) -> Result<T, FieldError> {
        T::from_json(value, "")
    }
}

/// The body is an array of `elements_min..=elements_max` of `T`, elements named `name[index]`.
struct ArrayOf<'a, T> {
    name: &'a str,
    elements_min: usize,
    elements_max: usize,
    element: PhantomData<fn() -> T>,
}

impl<T: FromJson> ReadBody for ArrayOf<'_, T> {
    type Output = Vec<T>;
    fn read<V: JsonNode>(self, value: &V) -> Result<Vec<T>, FieldError> {
        read_array(
            value,
            self.name,
            self.elements_min,
            self.elements_max,
            T::from_json,
        )
    }
}

/// Why `body` is not JSON, in words a client can act on: serde_json's message (a stable
/// text with line and column), not simd-json's internal error names. Run only for a body
/// already refused, so the second parse costs nothing on the accepted path.
fn readable_json_error(body: &[u8], simd_error: &simd_json::Error) -> String {
    match serde_json::from_slice::<serde::de::IgnoredAny>(body) {
        Err(error) => error.to_string(),
        Ok(_) => format!("at character {}", simd_error.index()),
    }
}

/// Parses a whole body and reads it with `reader`; errors of the JSON itself have the path
/// `body`. A plain body (see [`scan`]) is parsed with simd-json's borrowed DOM (into a copy,
/// which simd-json rewrites in place), an unusual one with serde_json.
fn with_json<R: ReadBody>(body: &[u8], reader: R) -> Result<R::Output, FieldError> {
    let invalid =
        |detail: &dyn fmt::Display| FieldError::new("body", format!("not valid JSON ({detail})"));
    match scan(body) {
        Shape::TooDeep => Err(invalid(&format_args!(
            "nested deeper than {JSON_DEPTH_MAX} levels"
        ))),
        Shape::Plain => {
            let mut scratch = body.to_vec();
            let value = simd_json::to_borrowed_value(&mut scratch)
                .map_err(|e| invalid(&readable_json_error(body, &e)))?;
            reader.read(&value)
        }
        Shape::Unusual => {
            // A `salt` integer past 64 bits is read as the decimal string it also may be.
            let quoted = super::big_salt::quote_wide_salts(body);
            let body = quoted.as_deref().unwrap_or(body);
            let value: serde_json::Value = serde_json::from_slice(body).map_err(|e| invalid(&e))?;
            reader.read(&value)
        }
    }
}

/// Parses a whole body as one `T` (see [`with_json`]).
pub(crate) fn parse_body<T: FromJson>(body: &[u8]) -> Result<T, FieldError> {
    with_json(body, One(PhantomData))
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
        let form = format!("0x followed by {} hex digits ({N} bytes)", 2 * N);
        let text = self.string(name, &form)?;
        FixedBytes::from_hex(text)
            .map_err(|_| self.error(name, format!("expected {form}, found {}", Quoted(text))))
    }

    /// A 65-byte signature: `0x` + 130 hex digits.
    pub(crate) fn signature(&self, name: &str) -> Result<Signature, FieldError> {
        const FORM: &str = "0x followed by 130 hex digits (a 65-byte signature)";
        let text = self.string(name, FORM)?;
        Signature::from_hex(text).map_err(|_| self.error(name, format!("expected {FORM}")))
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

    /// An order's signature type: any `uint8` (whether it is accepted is the placement's
    /// decision, a rejection rather than a bad field: API.md §8).
    pub(crate) fn signature_type(&self, name: &str) -> Result<SignatureType, FieldError> {
        let value = self.required(name)?;
        value
            .unsigned()
            .and_then(|value| u8::try_from(value).ok())
            .map(SignatureType::from_u8)
            .ok_or_else(|| {
                self.error(
                    name,
                    "expected an integer from 0 to 255 (3: smart account, 0: EOA)",
                )
            })
    }

    /// A cancel's signature type: the integer `0` or `3`, the two that say how to check it.
    pub(crate) fn cancel_signature_type(&self, name: &str) -> Result<SignatureType, FieldError> {
        match self.signature_type(name) {
            Ok(SignatureType::Other(_)) => {
                Err(self.error(name, "expected the integer 0 (EOA) or 3 (smart account)"))
            }
            // A missing field says so ("required"), as every other does.
            Err(missing) if self.required(name).is_err() => Err(missing),
            Err(_) => Err(self.error(name, "expected the integer 0 (EOA) or 3 (smart account)")),
            Ok(known) => Ok(known),
        }
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
            (None, SignatureType::Eoa | SignatureType::Other(_)) => Ok(None),
            (Some(_), _) => self.address(name).map(Some),
        }
    }
}

/// Reads a body that must be a JSON array of `elements_min..=elements_max` elements, each a
/// `T` named `name[index]` in errors.
pub(crate) fn parse_array<T: FromJson>(
    body: &[u8],
    name: &str,
    elements_min: usize,
    elements_max: usize,
) -> Result<Vec<T>, FieldError> {
    with_json(
        body,
        ArrayOf {
            name,
            elements_min,
            elements_max,
            element: PhantomData,
        },
    )
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
pub(crate) mod differential {
    //! The request parsers against the serde_json reading they replaced, on bodies mutated at
    //! random: both must come to the same result.

    use super::*;

    /// The reading before simd-json: serde_json's DOM, then the same field readers.
    fn with_serde<R: ReadBody>(body: &[u8], reader: R) -> Result<R::Output, FieldError> {
        // Wide `salt` integers quoted, as `with_json` does: a reading of its own, not a
        // difference between the two parsers.
        let quoted = crate::wire::big_salt::quote_wide_salts(body);
        let body = quoted.as_deref().unwrap_or(body);
        let value: serde_json::Value = serde_json::from_slice(body)
            .map_err(|error| FieldError::new("body", format!("not valid JSON ({error})")))?;
        reader.read(&value)
    }

    /// [`parse_body`] as it was.
    pub(crate) fn parse_body_with_serde<T: FromJson>(body: &[u8]) -> Result<T, FieldError> {
        with_serde(body, One(PhantomData))
    }

    /// [`parse_array`] as it was.
    pub(crate) fn parse_array_with_serde<T: FromJson>(
        body: &[u8],
        name: &str,
        elements_min: usize,
        elements_max: usize,
    ) -> Result<Vec<T>, FieldError> {
        let reader = ArrayOf {
            name,
            elements_min,
            elements_max,
            element: PhantomData,
        };
        with_serde(body, reader)
    }

    /// Pieces spliced into bodies: JSON syntax, the numbers and escapes simd-json reads
    /// differently, bytes that are not JSON, and members that repeat a key.
    #[rustfmt::skip]
    const PIECES: &[&[u8]] = &[
        b"{", b"}", b"[", b"]", b"\"", b":", b",", b"0", b"1", b"3", b"-", b"-0", b"1.0", b"1e3",
        b"1E+2", b".", b"e", b"+", b"\\", b"\\\"", b"\\u0041", b"\\ud800", b"\\uDE00", b"\\n",
        b"\\x", b" ", b"\t", b"\n", b"\r", b"\x0b", b"\x0c", b"\0", b"\x01", b"\x7f", b"\xff",
        b"\xc3\xa9", b"\xc3", b"\xef\xbb\xbf", b"null", b"true", b"false", b"nul",
        b"18446744073709551615", b"18446744073709551616", b"-9223372036854775808",
        b"-9223372036854775809", b"123456789012345678", b"9223372036854775808",
    ];

    /// Members inserted after a `{` or `,`, often repeating a key already there.
    #[rustfmt::skip]
    const MEMBERS: &[&[u8]] = &[
        b"\"side\":1,", b"\"side\":-0,", b"\"side\":\"SELL\",", b"\"side\":1.0,", b"\"salt\":7,",
        b"\"salt\":1e3,", b"\"salt\":-0,", b"\"salt\":18446744073709551616,", b"\"salt\":null,",
        b"\"orderType\":\"FOK\",", b"\"postOnly\":true,", b"\"signatureType\":0,",
        b"\"orderId\":-0,", b"\"orderId\":9223372036854775808,", b"\"orderId\":7,",
        b"\"tokenId\":\"\\u0031\",", b"\"tokenId\":null,", b"\"x\":\"\\ud800\",", b"\"x\":[[[]]],",
        b"\"x\":{\"a\":1,\"a\":2},", b"\"signer\":null,", b"\"makerAmount\":\"9\",",
    ];

    /// xorshift64*: a fixed sequence, so a failure repeats.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            let next = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d);
            (next >> 33) as usize % n.max(1)
        }
        fn pick<'a>(&mut self, pieces: &[&'a [u8]]) -> &'a [u8] {
            pieces[self.below(pieces.len())]
        }
    }

    /// `seed` changed in one to three places.
    fn mutate(seed: &[u8], rng: &mut Rng) -> Vec<u8> {
        let mut body = seed.to_vec();
        for _ in 0..=rng.below(3) {
            let at = rng.below(body.len() + 1);
            match rng.below(6) {
                0 if at < body.len() => {
                    let piece = rng.pick(PIECES);
                    body.splice(at..at + 1, piece.iter().copied());
                }
                1 => {
                    let piece = rng.pick(PIECES);
                    body.splice(at..at, piece.iter().copied());
                }
                2 => {
                    let end = (at + 1 + rng.below(8)).min(body.len());
                    body.drain(at.min(end)..end);
                }
                3 => {
                    let end = (at + rng.below(64)).min(body.len());
                    let copy = body[at.min(end)..end].to_vec();
                    let to = rng.below(body.len() + 1);
                    body.splice(to..to, copy);
                }
                _ => {
                    let opens: Vec<usize> = (0..body.len())
                        .filter(|&i| body[i] == b'{' || body[i] == b',')
                        .collect();
                    if !opens.is_empty() {
                        let after = opens[rng.below(opens.len())] + 1;
                        let member = rng.pick(MEMBERS);
                        body.splice(after..after, member.iter().copied());
                    }
                }
            }
        }
        body
    }

    /// Whether both errors say the body is not JSON (the detail differs by parser).
    fn both_invalid(a: &FieldError, b: &FieldError) -> bool {
        let invalid = |e: &FieldError| e.path == "body" && e.rule.starts_with("not valid JSON (");
        invalid(a) && invalid(b)
    }

    /// Checks `parse` against `parse_with_serde` on the seeds and on `count` mutations of them;
    /// returns how many mutated bodies parsed (so a test can check it tried valid ones too).
    pub(crate) fn assert_same_as_serde<T: PartialEq + fmt::Debug>(
        seeds: &[Vec<u8>],
        count: usize,
        parse: impl Fn(&[u8]) -> Result<T, FieldError>,
        parse_with_serde: impl Fn(&[u8]) -> Result<T, FieldError>,
    ) -> usize {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut parsed = 0;
        let bodies = seeds.iter().cloned().chain((0..count).map(|index| {
            let seed = &seeds[index % seeds.len()];
            mutate(seed, &mut rng)
        }));
        for body in bodies {
            let (new, old) = (parse(&body), parse_with_serde(&body));
            let same = match (&new, &old) {
                (Err(a), Err(b)) => a == b || both_invalid(a, b),
                _ => new == old,
            };
            assert!(
                same,
                "{:?}\n  simd-json path: {new:?}\n  serde_json:     {old:?}",
                String::from_utf8_lossy(&body)
            );
            parsed += usize::from(new.is_ok());
        }
        parsed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::order::Side;

    /// Reads nothing: the body need only be JSON.
    #[derive(Debug)]
    struct Anything;

    impl FromJson for Anything {
        fn from_json<V: JsonNode>(_: &V, _: &str) -> Result<Anything, FieldError> {
            Ok(Anything)
        }
    }

    /// Whether the body parses as JSON, and its error if not.
    fn json(body: &[u8]) -> Result<(), FieldError> {
        parse_body::<Anything>(body).map(|_| ())
    }

    /// Field `x` read every way a number may be read, for comparing the two parsers.
    #[derive(Debug, PartialEq)]
    struct Readings {
        side: Result<Side, FieldError>,
        uint: Result<U256, FieldError>,
        int64: Result<u64, FieldError>,
    }

    impl FromJson for Readings {
        fn from_json<V: JsonNode>(value: &V, path: &str) -> Result<Readings, FieldError> {
            let fields = Fields::of(value, path)?;
            Ok(Readings {
                side: fields.side("x"),
                uint: fields.u256_string_or_integer("x"),
                int64: fields.int64_non_negative("x"),
            })
        }
    }

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
            "[".repeat(100_000),
            format!("{}{}", "[".repeat(200_000), "]".repeat(200_000)),
            format!("{}1{}", "{\"a\":".repeat(100_000), "}".repeat(100_000)),
        ] {
            let error = json(body.as_bytes()).unwrap_err();
            assert_eq!(error.path, "body");
            assert!(
                error.rule.contains("nested deeper than 127"),
                "{}",
                error.rule
            );
            let error = parse_array::<Anything>(body.as_bytes(), "orders", 0, 10).unwrap_err();
            assert_eq!(error.path, "body");
        }
        // The limit is serde_json's: 127 levels parse, 128 do not.
        let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert!(json(nested(127).as_bytes()).is_ok());
        assert!(serde_json::from_str::<serde_json::Value>(&nested(127)).is_ok());
        assert!(json(nested(128).as_bytes()).is_err());
        assert!(serde_json::from_str::<serde_json::Value>(&nested(128)).is_err());
        // Brackets inside strings, escaped quotes included, do not count.
        let quoted = format!(r#"{{"a":"{}\"{}"}}"#, "[".repeat(300), "{".repeat(300));
        assert!(json(quoted.as_bytes()).is_ok());
    }

    #[test]
    fn quote_or_backslash_finds_the_first_of_either() {
        let naive = |bytes: &[u8]| {
            bytes
                .iter()
                .position(|&byte| byte == b'"' || byte == b'\\')
                .unwrap_or(bytes.len())
        };
        for filler in [
            b'a', b'0', 0x00, 0x01, 0x21, 0x23, 0x5b, 0x5d, 0x7f, 0x80, 0xa2, 0xdc, 0xff,
        ] {
            for len in 0..20 {
                let mut bytes = vec![filler; len];
                assert_eq!(quote_or_backslash(&bytes), naive(&bytes));
                for first in 0..len {
                    for (target, other) in [(b'"', b'\\'), (b'\\', b'"')] {
                        bytes.fill(filler);
                        bytes[first] = target;
                        assert_eq!(quote_or_backslash(&bytes), first, "{filler} {len} {first}");
                        for later in first + 1..len {
                            bytes[later] = other;
                            assert_eq!(quote_or_backslash(&bytes), first);
                            bytes[later] = 0;
                            assert_eq!(quote_or_backslash(&bytes), first);
                            bytes[later] = filler;
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn scan_sends_only_plain_bodies_to_simd_json() {
        let members = |count: usize| {
            let members: Vec<String> = (0..count).map(|i| format!("\"k{i}\":{i}")).collect();
            format!("{{{}}}", members.join(","))
        };
        let many = format!("[{}]", vec!["{\"a\":1}"; 1000].join(","));
        let long_array = format!("{{\"a\":[{}]}}", vec!["1"; 100].join(","));
        for plain in [
            r#"{"a":"1.5","b":"-0","c":"\\u","d":"1e3"}"#,
            r#"{"n":-1,"m":0,"k":123456789012345678,"j":-123456789012345678}"#,
            "[0,-1,10]",
            "7",
            &members(32),
            &many,
            &long_array,
        ] {
            assert_eq!(scan(plain.as_bytes()), Shape::Plain, "{plain}");
        }
        // Malformed bodies end the scan without a panic.
        for malformed in [
            "\"", "\"\\", "\"abc\\", "[\"a", "-", "{\"a\":1", "]]]}}", "\\u",
        ] {
            assert_eq!(scan(malformed.as_bytes()), Shape::Plain, "{malformed}");
        }
        for unusual in [
            r#"{"side":-0}"#,
            "[1,-0]",
            "-0",
            r#"{"side":1.0}"#,
            r#"{"salt":1e3}"#,
            r#"{"salt":1E+3}"#,
            r#"{"salt":1234567890123456789}"#,
            r#"{"salt":-1234567890123456789}"#,
            r#"{"salt":"\u0031"}"#,
            r#"{"\u0073alt":"1"}"#,
            &members(33),
            &format!("[{}]", members(40)),
        ] {
            assert_eq!(scan(unusual.as_bytes()), Shape::Unusual, "{unusual}");
        }
    }

    #[test]
    fn unusual_bodies_read_as_with_serde_json() {
        let read = |body: &str| parse_body::<Readings>(body.as_bytes());
        // -0 is a float to serde_json, so neither a side, an unsigned integer nor an int64.
        let readings = read(r#"{"x":-0}"#).unwrap();
        assert!(readings.side.is_err() && readings.int64.is_err());
        assert_eq!(
            readings.uint.unwrap_err().to_string(),
            "x: expected a non-negative integer, found -0.0"
        );
        // An integer beyond 64 bits is a float, not a refused body.
        assert_eq!(
            read(r#"{"x":18446744073709551616}"#)
                .unwrap()
                .uint
                .unwrap_err()
                .to_string(),
            "x: expected a non-negative integer, found 1.8446744073709552e+19"
        );
        assert_eq!(
            read(r#"{"x":1,"ignored":-100000000000000000000}"#)
                .unwrap()
                .uint,
            Ok(U256::from_u64(1))
        );
        assert_eq!(
            read(r#"{"x":1e20}"#).unwrap().uint.unwrap_err().rule,
            "expected a non-negative integer, found 1e+20"
        );
        // A lone surrogate is not JSON; a whole escaped character is.
        let error = read(r#"{"x":1,"y":"\ud800"}"#).unwrap_err();
        assert!(error.rule.starts_with("not valid JSON ("), "{error}");
        // What is wrong is said in words with where, never simd-json's internal names.
        assert_eq!(
            read(r#"{"x":1}{"#).unwrap_err().rule,
            "not valid JSON (trailing characters at line 1 column 8)"
        );
        let error = read("\u{feff}{\"x\":1}").unwrap_err();
        assert!(!error.rule.contains("Error("), "{error}");
        assert_eq!(
            read(r#"{"x":"\u0031\u0032"}"#).unwrap().uint,
            Ok(U256::from_u64(12))
        );
        // A repeated key reads as its last value in any object, small or large.
        for padding in 0..100 {
            let pad: String = (0..padding).map(|i| format!("\"p{i}\":0,")).collect();
            let body = format!(r#"{{"x":0,{pad}"x":1}}"#);
            assert_eq!(read(&body).unwrap().side, Ok(Side::Sell), "{padding}");
        }
        for body in [
            r#"{"x":-0}"#,
            r#"{"x":0}"#,
            r#"{"x":-1}"#,
            r#"{"x":1.0}"#,
            r#"{"x":12345678901234567.0}"#,
            r#"{"x":100000000000000000000.0}"#,
            r#"{"x":1e-7}"#,
            r#"{"x":18446744073709551615}"#,
            r#"{"x":-9223372036854775809}"#,
            r#"{"x":123456789012345678901234567890}"#,
            r#"{"x":1e400}"#,
        ] {
            let (new, old) = (
                read(body),
                differential::parse_body_with_serde::<Readings>(body.as_bytes()),
            );
            match (&new, &old) {
                (Err(a), Err(b)) => assert_eq!(a.path, b.path, "{body}"),
                _ => assert_eq!(new, old, "{body}"),
            }
        }
    }

    #[test]
    fn both_parsers_read_fields_alike() {
        let text = r#"{"n":7,"neg":-3,"f":1.5,"e":1e20,"s":"x","b":true,"z":null,"k":1,"k":2}"#;
        let serde_value: serde_json::Value = serde_json::from_str(text).unwrap();
        let mut scratch = text.as_bytes().to_vec();
        let simd_value = simd_json::to_borrowed_value(&mut scratch).unwrap();
        type Read<'a> = &'a dyn Fn(&str) -> (Option<u64>, Option<String>, &'static str);
        let check = |fields: Read<'_>| {
            assert_eq!(fields("n"), (Some(7), Some("7".into()), "a number"));
            assert_eq!(fields("neg"), (None, Some("-3".into()), "a number"));
            assert_eq!(fields("f"), (None, Some("1.5".into()), "a number"));
            assert_eq!(fields("e"), (None, Some("1e+20".into()), "a number"));
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
        check(&|name| {
            let v = simd_value.member(name).unwrap();
            (v.unsigned(), v.number_text(), v.kind())
        });
        let fields = Fields::of(&simd_value, "").unwrap();
        assert!(fields.optional("z").is_none());
        assert_eq!(fields.bool_or_false("b"), Ok(true));
        let error = json(b"{\"a\":").unwrap_err();
        assert_eq!(error.path, "body");
        assert!(error.rule.starts_with("not valid JSON ("), "{}", error.rule);
        let error = json(b"{\"a\":1.5").unwrap_err();
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
        let mut body = serde_json::to_vec(&value).unwrap();
        let value = simd_json::to_borrowed_value(&mut body).unwrap();
        assert_eq!(
            Fields::of(&value, "").unwrap().u256_string("amount"),
            Err(error)
        );
    }
}

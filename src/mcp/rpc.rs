//! JSON-RPC 2.0 messages for the MCP server, whatever carries them (a stdio line, an HTTP body):
//! strict classification of each incoming message, request ids kept exactly as sent and
//! compared as JSON-RPC compares them, and the responses we write.
//!
//! Nothing here knows MCP methods; the engine (`engine`) decides what each request means.
//!
//! # Request ids
//!
//! An id is echoed **byte for byte** as the client wrote it: the envelope is decoded with every
//! member as a [`RawValue`], and an answer is written around the id's raw text, never through a
//! `Value` (which would turn `18446744073709551616` into `1.8446744073709552e19` and `-0` into
//! `-0.0`). An id must be a string or a number (JSON-RPC 2.0); MCP also forbids `null`. Anything
//! else is answered with `-32600` and id `null`.
//!
//! Two ids are the same request (duplicate detection, `notifications/cancelled`) when JSON-RPC
//! 2.0 would call them equal, as [`IdKey`] decides: a string only equals the same string (after
//! unescaping: `"a"` and `"\u0061"` are one id), a number only the same number by value, exactly
//! (arbitrary precision, no float rounding): `1`, `1.0`, `1e0` and `10e-1` are one id, `-0`
//! equals `0`, and `"1"` is never `1`.
//!
//! # Lone surrogates
//!
//! JSON's grammar allows `"\ud800"`, which is no Unicode text. Such an escape (a high surrogate
//! without its low one, or a low one alone) is read as U+FFFD, so the request is answered with
//! its own id instead of a parse error; the id itself is still echoed exactly as sent, and
//! compared as JavaScript or Python read it, by UTF-16 code units: `"\ud800"` and `"\ud801"`
//! are two ids, `"\ud83d\ude00"` and `"😀"` one.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::quote::{clipped, quoted};

/// JSON-RPC error codes we answer with.
pub(crate) mod code {
    /// The line is not JSON (or not UTF-8), or longer than the limit.
    pub const PARSE_ERROR: i64 = -32700;
    /// Valid JSON, but not a JSON-RPC 2.0 request or notification.
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// The method's params are unusable.
    pub const INVALID_PARAMS: i64 = -32602;
}

/// A request's id: its JSON text exactly as the client sent it (a string or a number).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Id {
    /// The id's JSON text from the client's line, echoed as is.
    raw: Box<str>,
}

impl Id {
    /// The id's JSON text as the client sent it.
    pub(crate) fn raw(&self) -> &str {
        &self.raw
    }

    /// What it compares by (computed when asked: only calls that run on a worker need it).
    pub(crate) fn key(&self) -> IdKey {
        // `classify` checked that the id is a string or a number.
        IdKey::of(&self.raw).unwrap_or(IdKey::Str(Vec::new()))
    }
}

#[cfg(test)]
impl Id {
    /// The id of a request whose id is the JSON text `raw`.
    pub(crate) fn parse(raw: &str) -> Id {
        match classify(format!(r#"{{"jsonrpc":"2.0","id":{raw},"method":"ping"}}"#).as_bytes()) {
            Some(Incoming::Request { id, .. }) => id,
            other => panic!("{raw} is no request id: {other:?}"),
        }
    }
}

/// For log lines and messages: the id's JSON text as sent, clipped and escaped
/// ([`crate::quote::clipped`]); [`Id::raw`] is what answers echo.
impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", clipped(&self.raw))
    }
}

/// Why a JSON value is no request id.
#[derive(Debug, PartialEq)]
enum NotAnId {
    /// `null`: allowed by JSON-RPC 2.0, forbidden by MCP.
    Null,
    /// An object, an array or a boolean.
    WrongType,
}

/// Whether the JSON value `raw` may be a request id (a string or a number).
fn id_kind(raw: &str) -> Result<(), NotAnId> {
    match raw.as_bytes().first() {
        Some(b'"' | b'-' | b'0'..=b'9') => Ok(()),
        Some(b'n') => Err(NotAnId::Null),
        _ => Err(NotAnId::WrongType),
    }
}

/// The text of the JSON string `raw` (lone surrogates already replaced); `None` for anything
/// else. A string without escapes is taken as it is, without running the decoder.
fn string(raw: &RawValue) -> Option<String> {
    let raw = raw.get();
    match raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
        Some(plain) if !plain.contains('\\') => Some(plain.to_string()),
        _ => serde_json::from_str(raw).ok(),
    }
}

/// A copy of `text` in which every lone surrogate escape (`\uD800`-`\uDFFF` not part of a
/// high-low pair) is replaced by `\uFFFD`: the same length and the same bytes elsewhere, so a
/// slice of the copy maps back to the same range of `text`. Borrowed when there is none.
fn lone_surrogates_replaced(text: &str) -> Cow<'_, str> {
    if !text.contains("\\u") {
        return Cow::Borrowed(text);
    }
    let bytes = text.as_bytes();
    let escape_at = |at: usize| -> Option<u16> {
        if bytes.get(at..at + 2)? != b"\\u" {
            return None;
        }
        let hex = std::str::from_utf8(bytes.get(at + 2..at + 6)?).ok()?;
        u16::from_str_radix(hex, 16).ok()
    };
    let mut out: Option<Vec<u8>> = None;
    let (mut i, mut in_string) = (0, false);
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                in_string = !in_string;
                i += 1;
            }
            b'\\' if in_string => match escape_at(i) {
                Some(0xD800..=0xDBFF)
                    if escape_at(i + 6).is_some_and(|lo| (0xDC00..=0xDFFF).contains(&lo)) =>
                {
                    i += 12;
                }
                Some(0xD800..=0xDFFF) => {
                    let buf = out.get_or_insert_with(|| bytes.to_vec());
                    buf[i..i + 6].copy_from_slice(b"\\uFFFD");
                    i += 6;
                }
                // Any other escape: skip the backslash and the character it escapes.
                _ => i += 2,
            },
            _ => i += 1,
        }
    }
    match out {
        // Only ASCII bytes inside an escape were replaced: still UTF-8.
        Some(buf) => Cow::Owned(String::from_utf8(buf).unwrap_or_else(|_| text.to_string())),
        None => Cow::Borrowed(text),
    }
}

/// A JSON-RPC error response, as one line of JSON text. `id` is `None` when the request's id
/// could not be read (then `null`).
pub(crate) fn error(id: Option<&Id>, code: i64, message: impl Into<String>) -> String {
    error_line(id, json!({"code": code, "message": message.into()}))
}

/// A JSON-RPC error response with `data`, as one line of JSON text.
pub(crate) fn error_with_data(id: Option<&Id>, code: i64, message: &str, data: &Value) -> String {
    error_line(id, json!({"code": code, "message": message, "data": data}))
}

/// An error response carrying `error`.
fn error_line(id: Option<&Id>, error: Value) -> String {
    let id = id.map_or("null", Id::raw);
    format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{error}}}"#)
}

/// A JSON-RPC success response, as one line of JSON text.
pub(crate) fn result(id: &Id, result: &Value) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{},"result":{result}}}"#, id.raw())
}

/// A JSON-RPC notification (server to client).
pub(crate) fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

/// What one incoming line is.
#[derive(Debug, PartialEq)]
pub(crate) enum Incoming {
    /// A request: must be answered (unless cancelled).
    Request {
        /// A string or a number, as sent.
        id: Id,
        /// The method name.
        method: String,
        /// An object, or `Null` when absent.
        params: Value,
    },
    /// A notification: never answered.
    Notification {
        /// The method name.
        method: String,
        /// An object, or `Null` when absent.
        params: Value,
        /// The request that `params.requestId` names, if it is an id (MCP's
        /// `notifications/cancelled`), read from its raw text: a big number keeps its value.
        request_id: Option<IdKey>,
    },
    /// A request whose params are an object the JSON decoder cannot read (nested deeper than
    /// 128 levels, a number beyond `f64`): answered with its id, as the method's error.
    Unreadable {
        /// A string or a number, as sent.
        id: Id,
        /// The method name.
        method: String,
        /// What the decoder said.
        why: String,
    },
    /// A response from the client (we send no requests): not answered.
    Response,
    /// Not a usable message: send this error response (one line of JSON text).
    Invalid(String),
}

/// The members of a JSON-RPC message, each as its raw text (present even when `null`), except
/// `params` (`None` when absent or `null`): decoded at once (`P = Value`, one pass over the
/// line), or raw (`P = &RawValue`) when that failed, so that the id can still be read.
#[derive(Deserialize)]
#[serde(bound(deserialize = "P: Deserialize<'de>"))]
struct Envelope<'a, P> {
    #[serde(borrow, default, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    params: Option<P>,
    #[serde(borrow, default, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

/// `params` of an [`Envelope`], decoded or raw.
enum Params<'a> {
    Decoded(Option<Value>),
    Raw(Option<&'a RawValue>),
}

impl<'a, P> Envelope<'a, P> {
    /// The envelope without its params, and the params.
    fn split(self, params: impl FnOnce(Option<P>) -> Params<'a>) -> (Envelope<'a, ()>, Params<'a>) {
        let Envelope {
            jsonrpc,
            id,
            method,
            params: p,
            result,
            error,
        } = self;
        let head = Envelope {
            jsonrpc,
            id,
            method,
            params: None,
            result,
            error,
        };
        (head, params(p))
    }
}

/// A member that is there, `null` included (`Option`'s own impl would make `null` absent).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// `params.requestId` of a notification.
#[derive(Deserialize)]
struct NamesRequest<'a> {
    #[serde(borrow, rename = "requestId", default, deserialize_with = "present")]
    request_id: Option<&'a RawValue>,
}

/// Classifies one line strictly (JSON-RPC 2.0, MCP flavour). `None` for a blank line.
pub(crate) fn classify(line: &[u8]) -> Option<Incoming> {
    let Ok(text) = std::str::from_utf8(line) else {
        return Some(Incoming::Invalid(error(
            None,
            code::PARSE_ERROR,
            "parse error: the line is not valid UTF-8",
        )));
    };
    let text = text.trim_matches([' ', '\t', '\r', '\n']);
    if text.is_empty() {
        return None;
    }
    let readable = lone_surrogates_replaced(text);
    let readable: &str = &readable;
    let parse_error = |e: serde_json::Error| {
        Some(Incoming::Invalid(error(
            None,
            code::PARSE_ERROR,
            format!("parse error: {e}"),
        )))
    };
    let invalid = |id: Option<&Id>, why: &str| {
        Some(Incoming::Invalid(error(
            id,
            code::INVALID_REQUEST,
            format!("invalid request: {why}"),
        )))
    };
    if !readable.starts_with('{') {
        // Not an object: tell a syntax error from a well-formed non-object.
        if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(readable) {
            return parse_error(e);
        }
        return invalid(
            None,
            if readable.starts_with('[') {
                "JSON-RPC batches are not supported (no protocol version this server speaks has them); send one message per line"
            } else {
                "expected a JSON object"
            },
        );
    }
    // Requests whose params decode: one pass. Everything else (notifications, whose
    // `requestId` is read raw, and params the decoder refuses) is read raw first.
    let (msg, params) = match serde_json::from_str::<Envelope<'_, Value>>(readable) {
        Ok(m) if m.id.is_some() => m.split(Params::Decoded),
        _ => match serde_json::from_str::<Envelope<'_, &RawValue>>(readable) {
            Ok(m) => m.split(Params::Raw),
            // A duplicate member: well-formed JSON, but no message we can trust.
            Err(e) if e.classify() == serde_json::error::Category::Data => {
                return invalid(None, &e.to_string());
            }
            Err(e) => return parse_error(e),
        },
    };
    if msg.method.is_none() && (msg.result.is_some() || msg.error.is_some()) {
        return Some(Incoming::Response);
    }
    let id = match msg.id {
        None => None,
        Some(raw) => match id_kind(raw.get()) {
            Ok(()) => Some(Id {
                raw: as_sent(text, readable, raw.get()).into(),
            }),
            Err(NotAnId::Null) => {
                return invalid(
                    None,
                    "id must be a string or a number (MCP does not allow null)",
                );
            }
            Err(NotAnId::WrongType) => return invalid(None, "id must be a string or a number"),
        },
    };
    if msg.jsonrpc.and_then(string).as_deref() != Some("2.0") {
        return invalid(id.as_ref(), "\"jsonrpc\": \"2.0\" is required");
    }
    let Some(method) = msg.method.and_then(string) else {
        return invalid(id.as_ref(), "method must be a string");
    };
    let bad_params = |id: Option<Id>, why: String| {
        Some(Incoming::Invalid(match id {
            Some(id) => error(
                Some(&id),
                code::INVALID_PARAMS,
                format!("invalid params: {why}"),
            ),
            None => error(
                None,
                code::INVALID_REQUEST,
                format!("invalid request: {why}"),
            ),
        }))
    };
    let request_id = match (&id, &params) {
        (None, Params::Raw(Some(p))) => serde_json::from_str::<NamesRequest<'_>>(p.get())
            .ok()
            .and_then(|n| n.request_id)
            .and_then(|r| IdKey::of(as_sent(text, readable, r.get())).ok()),
        _ => None,
    };
    let params = match params {
        Params::Decoded(None) | Params::Raw(None) => Value::Null,
        Params::Decoded(Some(p @ Value::Object(_))) => p,
        Params::Decoded(Some(_)) => return bad_params(id, "params must be an object".into()),
        Params::Raw(Some(raw)) if raw.get().starts_with('{') => {
            match serde_json::from_str(raw.get()) {
                Ok(p) => p,
                // Nested deeper than 128 levels, or a number out of range.
                Err(e) => {
                    return Some(match id {
                        Some(id) => Incoming::Unreadable {
                            id,
                            method,
                            why: e.to_string(),
                        },
                        None => Incoming::Invalid(error(
                            None,
                            code::INVALID_REQUEST,
                            format!("invalid request: params cannot be read: {e}"),
                        )),
                    });
                }
            }
        }
        Params::Raw(Some(_)) => return bad_params(id, "params must be an object".into()),
    };
    Some(match id {
        Some(id) => Incoming::Request { id, method, params },
        None => Incoming::Notification {
            method,
            params,
            request_id,
        },
    })
}

/// The text of `part` (a slice of `readable`) as `original` has it: [`lone_surrogates_replaced`]
/// keeps every byte's position, so the same range of the original is what the client sent.
fn as_sent<'a>(original: &'a str, readable: &str, part: &'a str) -> &'a str {
    let start = (part.as_ptr() as usize).wrapping_sub(readable.as_ptr() as usize);
    original
        .get(start..start.saturating_add(part.len()))
        .unwrap_or(part)
}

/// What an id is equal to (module doc): a string by its value, a number by its exact
/// value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum IdKey {
    /// A string id, unescaped into UTF-16 code units, as JavaScript and Python read it: lone
    /// surrogates stay themselves, so `"\ud800"` and `"\ud801"` are two ids.
    Str(Vec<u16>),
    /// A number id in canonical form (`-?<digits without leading or trailing zeros>e<exp>`,
    /// `0` for zero); `literal:<text>` when the exponent does not fit in an `i64`.
    Num(String),
}

/// For log lines: the id quoted and clipped ([`crate::quote`]).
impl std::fmt::Display for IdKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IdKey::Str(units) => write!(f, "{}", quoted(&String::from_utf16_lossy(units))),
            IdKey::Num(n) => write!(f, "{}", clipped(n)),
        }
    }
}

impl IdKey {
    /// The key of the JSON value `raw` (valid JSON text, lone surrogates as the client sent
    /// them).
    fn of(raw: &str) -> Result<IdKey, NotAnId> {
        match raw.as_bytes().first() {
            Some(b'"') => utf16_units(raw).map(IdKey::Str).ok_or(NotAnId::WrongType),
            Some(b'-' | b'0'..=b'9') => Ok(IdKey::Num(canonical_number(raw))),
            Some(b'n') => Err(NotAnId::Null),
            _ => Err(NotAnId::WrongType),
        }
    }
}

/// The UTF-16 code units of the JSON string literal `raw` (quotes included), every `\uXXXX`
/// escape taken as the one code unit it names; `None` when it is no string literal.
fn utf16_units(raw: &str) -> Option<Vec<u16>> {
    let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
    let mut units = Vec::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            units.extend(c.encode_utf16(&mut [0; 2]).iter());
            continue;
        }
        let unit = match chars.next()? {
            'u' => {
                let hex: String = chars.by_ref().take(4).collect();
                (hex.len() == 4).then(|| u16::from_str_radix(&hex, 16).ok())??
            }
            'b' => 0x08,
            'f' => 0x0c,
            'n' => 0x0a,
            'r' => 0x0d,
            't' => 0x09,
            c @ ('"' | '\\' | '/') => c as u16,
            _ => return None,
        };
        units.push(unit);
    }
    Some(units)
}

/// The exact value of a JSON number in one spelling: sign, significant digits, exponent
/// (`1.50e1` -> `15e0`, `-0.0` -> `0`). Falls back to the literal text when the exponent does
/// not fit in an `i64` (such ids then match only the same text).
fn canonical_number(text: &str) -> String {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, "0"),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits: String = [int, frac].concat();
    let significant = digits.trim_start_matches('0');
    if significant.is_empty() {
        return "0".into();
    }
    let trimmed = significant.trim_end_matches('0');
    let exp = exponent.parse::<i64>().ok().and_then(|e| {
        e.checked_sub(i64::try_from(frac.len()).ok()?)?
            .checked_add(i64::try_from(significant.len() - trimmed.len()).ok()?)
    });
    match exp {
        Some(e) => format!("{}{trimmed}e{e}", if negative { "-" } else { "" }),
        None => format!("literal:{text}"),
    }
}

#[cfg(test)]
mod tests;

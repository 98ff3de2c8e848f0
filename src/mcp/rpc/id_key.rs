//! What a request id is equal to (`rpc.rs`'s module doc): a string by its UTF-16 code units, a
//! number by its exact value.

use super::NotAnId;
use crate::quote::{clipped, quoted};

/// What an id is equal to (`rpc.rs`'s module doc): a string by its value, a number by its exact
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
    pub(super) fn of(raw: &str) -> Result<IdKey, NotAnId> {
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

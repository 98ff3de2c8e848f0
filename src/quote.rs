//! The one way an error or log line quotes a value it got from a caller, the page or the wire:
//! small, printable, and built in time linear in what it shows, never in what it was given.
//!
//! [`quoted`] shows a string in double quotes with control and invisible characters escaped
//! (`\n`, `\u{202e}`), as much of it as fits in [`QUOTE_MAX`] characters once escaped; when it
//! had more, `…` and its full length follow the closing quote: `"xxxx"… (1000000 bytes)`. [`clipped`] does the same
//! for text that is already in a syntax of its own (a JSON-RPC id as sent, a number as written):
//! no quotes around it, so a short clean text shows exactly as it is. [`quoted_json`] does the
//! same for a JSON value's text without ever serialising more of it than it shows (a value
//! nested 100,000 deep or 1 GiB long costs what 64 characters cost), so a message never grows
//! faster than its input, and never with the nesting of its input.
//!
//! Escaped: control characters (`Cc`), format characters (`Cf`: bidi overrides and isolates,
//! zero-width characters, soft hyphen, tags, BOM), line and paragraph separators and every
//! space but U+0020: whatever could rewrite, hide or fake the text around it in a log line.

use std::fmt::{self, Write as _};

use serde_json::Value;

/// The most characters of a value a message shows (escapes included).
pub const QUOTE_MAX: usize = 64;

/// `s` as a message shows it: see the module doc.
pub fn quoted(s: &str) -> Quoted<'_> {
    Quoted(s)
}

/// `text` (already in a syntax of its own) as a message shows it, without quotes: see the
/// module doc.
pub fn clipped(text: &str) -> Clipped<'_> {
    Clipped(text)
}

/// A string quoted for a message ([`quoted`]); formats without allocating.
#[derive(Clone, Copy, Debug)]
pub struct Quoted<'a>(&'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('"')?;
        let clipped = write_head(f, self.0, true)?;
        f.write_char('"')?;
        if clipped {
            write!(f, "… ({} bytes)", self.0.len())?;
        }
        Ok(())
    }
}

/// Text shown unquoted for a message ([`clipped`]); formats without allocating.
#[derive(Clone, Copy, Debug)]
pub struct Clipped<'a>(&'a str);

impl fmt::Display for Clipped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if write_head(f, self.0, false)? {
            write!(f, "… ({} bytes)", self.0.len())?;
        }
        Ok(())
    }
}

/// `v`'s JSON text as a message shows it (see the module doc): strings are quoted as by
/// [`quoted`], anything else shows its JSON text clipped the same way.
pub fn quoted_json(v: &Value) -> String {
    if let Value::String(s) = v {
        return quoted(s).to_string();
    }
    let mut head = Head::default();
    // Serialisation stops (with an error) as soon as `head` is full: the cost is bounded by
    // what is shown, whatever the size or depth of `v`.
    let complete = serde_json::to_writer(&mut head, v).is_ok();
    let mut out = String::new();
    let clipped = write_head(&mut out, &head.text, false).is_ok_and(|c| c);
    if !complete || clipped {
        out.push_str("… (a longer ");
        out.push_str(kind(v));
        out.push(')');
    }
    out
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

/// The first bytes of a serialisation; refuses more once it holds a little over `QUOTE_MAX`
/// characters' worth.
#[derive(Default)]
struct Head {
    text: String,
}

impl std::io::Write for Head {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // Four bytes per character at most, plus one to know that something was left out.
        if self.text.len() > QUOTE_MAX * 4 {
            return Err(std::io::Error::other("enough"));
        }
        self.text.push_str(&String::from_utf8_lossy(buf));
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Writes the head of `s` that fits in [`QUOTE_MAX`] characters once escaped (and `"`, `\`
/// too when `in_quotes`); true when `s` had more.
fn write_head(f: &mut impl fmt::Write, s: &str, in_quotes: bool) -> Result<bool, fmt::Error> {
    let mut width = 0;
    for c in s.chars() {
        let escape = match c {
            '"' if in_quotes => Some('"'),
            '\\' if in_quotes => Some('\\'),
            '\n' => Some('n'),
            '\r' => Some('r'),
            '\t' => Some('t'),
            _ => None,
        };
        let hex_digits = (32 - (c as u32 | 1).leading_zeros()).div_ceil(4) as usize;
        let unicode = escape.is_none() && needs_escape(c);
        width += match (escape, unicode) {
            (Some(_), _) => 2,
            (None, true) => hex_digits + 4,
            (None, false) => 1,
        };
        if width > QUOTE_MAX {
            return Ok(true);
        }
        match escape {
            Some(e) => {
                f.write_char('\\')?;
                f.write_char(e)?;
            }
            None if unicode => write!(f, "\\u{{{:x}}}", c as u32)?,
            None => f.write_char(c)?,
        }
    }
    Ok(false)
}

/// Whether a message shows `c` as an escape (module doc): a control or format character, or a
/// space other than U+0020.
pub(crate) fn needs_escape(c: char) -> bool {
    c.is_control() || is_format(c) || (c.is_whitespace() && c != ' ')
}

/// Unicode general category `Cf` (format characters), Unicode 16, and the line and paragraph
/// separators.
pub(crate) fn is_format(c: char) -> bool {
    matches!(
        c as u32,
        0x00AD
            | 0x0600..=0x0605
            | 0x061C
            | 0x06DD
            | 0x070F
            | 0x0890..=0x0891
            | 0x08E2
            | 0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
    ) || matches!(c, '\u{2028}' | '\u{2029}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_short_value_is_shown_whole_and_escaped() {
        assert_eq!(quoted("ab\"c\\").to_string(), r#""ab\"c\\""#);
        assert_eq!(
            quoted("a\nb\u{1}\u{202e}").to_string(),
            r#""a\nb\u{1}\u{202e}""#
        );
        assert_eq!(
            quoted("a\u{ad}b\u{a0}c\u{3000}d\u{61c}é任").to_string(),
            r#""a\u{ad}b\u{a0}c\u{3000}d\u{61c}é任""#
        );
        assert_eq!(quoted_json(&json!(["x", 1])), r#"["x",1]"#);
        assert_eq!(quoted_json(&json!("x")), r#""x""#);
        assert_eq!(quoted_json(&json!(["\u{202e}"])), r#"["\u{202e}"]"#);
    }

    #[test]
    fn clipped_text_shows_as_it_is_when_short_and_clean() {
        assert_eq!(clipped("Runtime.evaluate").to_string(), "Runtime.evaluate");
        assert_eq!(clipped(r#""id-7""#).to_string(), r#""id-7""#);
        assert_eq!(clipped("a\u{1b}[31m").to_string(), r"a\u{1b}[31m");
        let long = "7".repeat(1000);
        assert_eq!(
            clipped(&long).to_string(),
            format!("{}… (1000 bytes)", &long[..QUOTE_MAX])
        );
    }

    #[test]
    fn escapes_count_in_what_is_shown() {
        let q = quoted(&"\u{202e}x".repeat(1000)).to_string();
        assert_eq!(q, format!("\"{}\"… (4000 bytes)", "\\u{202e}x".repeat(7)));
        let q = quoted(&"\u{e0041}".repeat(100)).to_string();
        assert!(q.starts_with("\"\\u{e0041}\\u{e0041}"), "{q}");
        assert!(q.chars().count() <= QUOTE_MAX + 20, "{q}");
        assert_eq!(quoted(&"\n".repeat(32)).to_string().len(), QUOTE_MAX + 2);
        assert!(
            quoted(&"\n".repeat(33))
                .to_string()
                .ends_with("… (33 bytes)")
        );
    }

    #[test]
    fn a_long_value_is_clipped_with_its_length() {
        let long = "é".repeat(1_000_000);
        let q = quoted(&long).to_string();
        assert!(q.len() < 200, "{}", q.len());
        assert!(q.ends_with("\"… (2000000 bytes)"), "{q}");
        assert_eq!(q.chars().filter(|c| *c == 'é').count(), QUOTE_MAX);
        assert_eq!(
            quoted(&"x".repeat(QUOTE_MAX)).to_string().len(),
            QUOTE_MAX + 2
        );
    }

    /// The crate's errors show what a caller chose (ids, methods, config values) through this
    /// module: a message stays short whatever it was given.
    #[test]
    fn errors_show_caller_values_clipped() {
        use crate::error::Error;
        use std::time::Duration;
        let huge = "\u{202e}x".repeat(500_000);
        let s = || huge.clone();
        for e in [
            Error::UnknownFrame(s()),
            Error::UnknownTarget(s()),
            Error::NotActive(s()),
            Error::UnknownDialog {
                id: s(),
                known: "d-1".into(),
            },
            Error::Timeout {
                method: s(),
                after: Duration::from_secs(1),
            },
            Error::Cdp {
                method: s(),
                code: -32601,
                message: "not found".into(),
            },
            Error::Refused {
                method: s(),
                option: "security.cdp_deny".into(),
                detail: "no".into(),
            },
            Error::TargetCrashed {
                what: "the page".into(),
                method: s(),
            },
            Error::UndecodableReply {
                method: s(),
                reason: "deep".into(),
            },
            Error::Cancelled(s()),
            Error::StartCancelled {
                task_id: s(),
                during: "connecting".into(),
            },
            crate::config::seconds_setting("k", f64::MAX, Duration::from_secs(1)).unwrap_err(),
        ] {
            let text = e.to_string();
            assert!(text.len() < 600 && !text.contains('\u{202e}'), "{text}");
            assert!(
                text.contains("(1500000 bytes)") || text.contains('…'),
                "{text}"
            );
        }
    }

    #[test]
    fn a_deeply_nested_json_value_costs_what_it_shows() {
        let mut v = json!("x");
        for _ in 0..100 {
            v = json!([v]);
        }
        let q = quoted_json(&v);
        assert!(q.chars().count() < QUOTE_MAX + 32, "{q}");
        assert!(
            q.starts_with("[[[[") && q.ends_with("… (a longer list)"),
            "{q}"
        );
        let big = Value::String("y".repeat(10_000_000));
        assert!(quoted_json(&json!({ "k": big })).len() < 200);
    }
}

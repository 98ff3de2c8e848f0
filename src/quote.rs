//! The one way an error or log line quotes a value it got from a caller, the page or the wire:
//! small, printable, and built in time linear in what it shows, never in what it was given.
//!
//! [`quoted`] shows a string in double quotes with control and invisible characters escaped
//! (`\n`, `\u{202e}`), at most [`QUOTE_MAX`] characters of it; when it had more, `…` and its
//! full length follow the closing quote: `"xxxx"… (1000000 bytes)`. [`quoted_json`] does the
//! same for a JSON value's text without ever serialising more of it than it shows (a value
//! nested 100,000 deep or 1 GiB long costs what 64 characters cost), so a message never grows
//! faster than its input, and never with the nesting of its input.

use std::fmt;

use serde_json::Value;

/// The most characters of a value a message shows.
pub const QUOTE_MAX: usize = 64;

/// `s` as a message shows it: see the module doc.
pub fn quoted(s: &str) -> Quoted<'_> {
    Quoted(s)
}

/// A string quoted for a message ([`quoted`]); formats without allocating.
#[derive(Clone, Copy, Debug)]
pub struct Quoted<'a>(&'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_quoted(f, self.0.chars(), self.0.len())
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
    for c in head.text.chars() {
        push_escaped(&mut out, c);
    }
    if !complete || head.text.chars().count() > QUOTE_MAX {
        let shown: String = out.chars().take(QUOTE_MAX).collect();
        return format!("{shown}… (a longer {})", kind(v));
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

fn write_quoted(
    f: &mut impl fmt::Write,
    chars: impl Iterator<Item = char>,
    len: usize,
) -> fmt::Result {
    f.write_char('"')?;
    let mut clipped = false;
    for (i, c) in chars.enumerate() {
        if i == QUOTE_MAX {
            clipped = true;
            break;
        }
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            c => write_escaped(f, c)?,
        }
    }
    f.write_char('"')?;
    if clipped {
        write!(f, "… ({len} bytes)")?;
    }
    Ok(())
}

fn push_escaped(out: &mut String, c: char) {
    let _ = write_escaped(out, c);
}

/// Control characters and the invisible ones that reorder or hide text (bidi overrides and
/// isolates, zero-width characters, line separators, BOM) are written as escapes.
fn write_escaped(f: &mut impl fmt::Write, c: char) -> fmt::Result {
    match c {
        '\n' => f.write_str("\\n"),
        '\r' => f.write_str("\\r"),
        '\t' => f.write_str("\\t"),
        c if c.is_control() || invisible(c) => write!(f, "\\u{{{:x}}}", c as u32),
        c => f.write_char(c),
    }
}

fn invisible(c: char) -> bool {
    matches!(c,
        '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{206f}'
        | '\u{feff}' | '\u{e0000}'..='\u{e007f}')
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
        assert_eq!(quoted_json(&json!(["x", 1])), r#"["x",1]"#);
        assert_eq!(quoted_json(&json!("x")), r#""x""#);
    }

    #[test]
    fn a_long_value_is_clipped_with_its_length() {
        let long = "é".repeat(1_000_000);
        let q = quoted(&long).to_string();
        assert!(q.len() < 200, "{}", q.len());
        assert!(q.ends_with("\"… (2000000 bytes)"), "{q}");
        assert_eq!(q.chars().filter(|c| *c == 'é').count(), QUOTE_MAX);
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

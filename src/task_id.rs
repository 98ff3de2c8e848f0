//! What a task id may be (SPEC §14), checked wherever one enters: the registry's starts, the
//! [`crate::tools`] handlers and the MCP tools. Also the one way a task id reaches a thread name.
//!
//! A task id is 1 to [`TASK_ID_MAX_BYTES`] bytes of printable text: it ends up in log lines,
//! errors, notifications and (sanitised) thread names, so nothing in it may rewrite what a
//! reader of those sees. Refused:
//!
//! * control characters (`Cc`: C0, DEL, C1): a NUL, a newline or an escape sequence in a log line;
//! * format characters (`Cf`): bidi embeddings, overrides and isolates (U+202A–U+202E,
//!   U+2066–U+2069) and marks (U+200E, U+200F, U+061C) reorder the text around them; zero-width
//!   characters (U+200B–U+200D, U+2060–U+2064, U+FEFF) and tag characters (U+E0000–U+E007F)
//!   make two ids that look alike differ, or hide text;
//! * line and paragraph separators (U+2028, U+2029) and every space other than U+0020
//!   (no-break, em, ideographic, ...): invisible differences;
//! * leading or trailing spaces, and an id that is empty.
//!
//! Letters of every script, digits, punctuation, symbols, emoji (with their variation
//! selectors), private-use characters and inner ASCII spaces are fine.
//!
//! Lookups (`get`, `snapshot`, `stop`, ...) do not check: an id that fails the check is never
//! registered, so they find nothing for it.

use ring::rand::{SecureRandom, SystemRandom};

use crate::error::Error;
use crate::quote::{needs_escape, quoted};

/// Longest task id accepted, in bytes of UTF-8.
pub const TASK_ID_MAX_BYTES: usize = 128;

/// Characters of a task id kept in a thread name (Linux keeps 15 bytes of a name in all).
const THREAD_LABEL_CHARS: usize = 12;

/// `Ok` when `task_id` is a valid task id (module doc), else [`Error::InvalidArgument`] naming
/// `task_id`, what is wrong and where, with the id shown escaped (and cut) so that the message
/// is safe to log.
pub fn check(task_id: &str) -> Result<(), Error> {
    why_invalid(task_id).map_or(Ok(()), |why| {
        Err(Error::InvalidArgument(format!(
            "invalid task_id {}: {why}; a task_id is 1 to {TASK_ID_MAX_BYTES} bytes of printable \
             text (no control, formatting or invisible characters, no leading or trailing space)",
            quoted(task_id)
        )))
    })
}

/// Why `task_id` is not a valid task id, `None` when it is.
fn why_invalid(task_id: &str) -> Option<String> {
    if task_id.is_empty() {
        return Some("it is empty".into());
    }
    if task_id.len() > TASK_ID_MAX_BYTES {
        return Some(format!("it is {} bytes long", task_id.len()));
    }
    if let Some((at, c)) = task_id.char_indices().find(|(_, c)| !allowed(*c)) {
        let what = if c.is_control() {
            "a control character"
        } else if c == ' ' || c.is_whitespace() {
            "a space character"
        } else {
            "an invisible formatting character"
        };
        return Some(format!(
            "it contains {what} (U+{:04X}) at byte {at}",
            c as u32
        ));
    }
    if task_id.starts_with(' ') || task_id.ends_with(' ') {
        return Some("it starts or ends with a space".into());
    }
    None
}

/// Whether `c` may appear in a task id (module doc).
fn allowed(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_graphic() || c == ' ';
    }
    !needs_escape(c)
}

/// The part of a task id that goes into a thread name: ASCII letters, digits, `-`, `_` and
/// `.`, at most 12 of them (`task` when none is left). Never anything else from input: a
/// thread name with a NUL makes `std::thread::Builder::spawn` panic.
pub(crate) fn thread_label(task_id: &str) -> String {
    let label: String = task_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(THREAD_LABEL_CHARS)
        .collect();
    if label.is_empty() {
        "task".into()
    } else {
        label
    }
}

/// `bytes` random bytes from the operating system, as lowercase hex.
pub(crate) fn random_hex(bytes: usize) -> Result<String, String> {
    let mut buf = vec![0u8; bytes];
    SystemRandom::new()
        .fill(&mut buf)
        .map_err(|_| "the operating system's random source failed".to_string())?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// A fresh task id (`browser_connect` without `task_id` over HTTP): 128 random bits.
pub(crate) fn fresh() -> Result<String, String> {
    random_hex(16).map(|h| format!("task-{h}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_ids_of_every_script_are_valid() {
        for id in [
            "default",
            "t",
            "task-1",
            "user 42 / run 7",
            "Zoë's task",
            "任务一",
            "задача",
            "🙂 run",
            "❤\u{FE0F}",
            "\u{E000}private",
            &"x".repeat(TASK_ID_MAX_BYTES),
        ] {
            assert!(check(id).is_ok(), "{id:?}: {:?}", check(id));
        }
    }

    #[test]
    fn controls_formatting_invisible_spaces_and_bad_lengths_are_refused() {
        let too_long = "x".repeat(TASK_ID_MAX_BYTES + 1);
        let cases = [
            ("", "empty"),
            (too_long.as_str(), "129 bytes"),
            ("t\u{0}", "U+0000"),
            ("a\nb", "U+000A"),
            ("a\rb", "U+000D"),
            ("\u{1b}[31mred", "U+001B"),
            ("a\u{7f}", "U+007F"),
            ("a\u{85}", "U+0085"),
            ("a\u{9b}", "U+009B"),
            ("a\u{202E}b", "U+202E"),
            ("a\u{2066}b", "U+2066"),
            ("a\u{200F}b", "U+200F"),
            ("a\u{061C}b", "U+061C"),
            ("a\u{200B}b", "U+200B"),
            ("\u{FEFF}a", "U+FEFF"),
            ("a\u{E0041}", "U+E0041"),
            ("a\u{2028}b", "U+2028"),
            ("a\u{A0}b", "U+00A0"),
            ("a\u{3000}b", "U+3000"),
            ("a\u{AD}b", "U+00AD"),
            (" a", "starts or ends"),
            ("a ", "starts or ends"),
            ("   ", "starts or ends"),
        ];
        for (id, why) in cases {
            let e = check(id).expect_err(id).to_string();
            assert!(e.contains("task_id"), "{id:?}: {e}");
            assert!(e.contains(why), "{id:?}: {e}");
            assert!(
                !e.chars().any(needs_escape) && e.len() < 400,
                "the message shows every character that could rewrite a log line as an escape: \
                 {e:?}"
            );
        }
    }

    #[test]
    fn thread_labels_keep_only_safe_ascii() {
        assert_eq!(thread_label("idle"), "idle");
        assert_eq!(thread_label("t\u{0}"), "t");
        assert_eq!(thread_label("a b/c\u{202E}d"), "abcd");
        assert_eq!(thread_label("任务"), "task");
        assert_eq!(thread_label("registry-race-17"), "registry-rac");
        assert_eq!(thread_label(&"\u{0}".repeat(1000)), "task");
    }
}

//! The CDP messages the endpoint reads (leniently: the envelope and the few fields it routes
//! by) and the error replies it writes.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

#[derive(Deserialize)]
pub(super) struct Envelope<'a> {
    pub(super) id: Option<u64>,
    #[serde(borrow)]
    pub(super) method: Option<Cow<'a, str>>,
    #[serde(rename = "sessionId", borrow)]
    pub(super) session_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) params: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) result: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
pub(super) struct ClientCommand<'a> {
    #[serde(borrow)]
    pub(super) id: Option<&'a RawValue>,
    pub(super) method: Option<String>,
    #[serde(rename = "sessionId")]
    pub(super) session_id: Option<String>,
    #[serde(borrow)]
    pub(super) params: Option<&'a RawValue>,
}

#[derive(Deserialize)]
pub(super) struct SessionParams {
    #[serde(rename = "sessionId")]
    pub(super) session_id: Option<String>,
    #[serde(rename = "targetInfo")]
    pub(super) target_info: Option<TargetInfo>,
    #[serde(rename = "targetId")]
    pub(super) target_id: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct TargetInfo {
    #[serde(rename = "targetId")]
    pub(super) target_id: String,
    #[serde(rename = "type", default)]
    pub(super) kind: String,
}

/// A reply laid out as Chromium writes every reply: `{"id":N,"result":...}` or
/// `{"id":N,"error":...}`, then `,"sessionId":"S"` last when it came on a session. Found by its
/// bytes, without parsing: the endpoint hands most replies on unchanged but for their id (and
/// their session, for a command sent at browser level), and a parse of each one was most of the
/// reader's time for it. Anything laid out otherwise is `None` and goes the parsed way.
#[derive(Debug)]
pub(super) struct Reply<'a> {
    pub(super) id: u64,
    /// `"result":...` or `"error":...`, as sent.
    pub(super) body: &'a str,
    /// Letters, digits, `-` and `_` only (Chromium's session ids are hex), so that the
    /// `,"sessionId":"` found last is the top level's own member.
    pub(super) session: Option<&'a str>,
}

impl<'a> Reply<'a> {
    pub(super) fn split(text: &'a str) -> Option<Reply<'a>> {
        let rest = text.strip_prefix(r#"{"id":"#)?;
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let id = rest[..digits].parse().ok()?;
        let inner = rest[digits..].strip_prefix(',')?.strip_suffix('}')?;
        if !(inner.starts_with(r#""result":"#) || inner.starts_with(r#""error":"#)) {
            return None;
        }
        let Some(quoted) = inner.strip_suffix('"') else {
            return inner.ends_with('}').then_some(Reply {
                id,
                body: inner,
                session: None,
            });
        };
        // The session is the run of plain bytes at the end, right after the key (which holds
        // none of them but its letters, so that key is the last one in the text).
        const KEY: &str = r#","sessionId":""#;
        let plain = |b: &u8| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_';
        let len = quoted.bytes().rev().take_while(plain).count();
        let (before, session) = quoted.split_at(quoted.len() - len);
        let at = before.strip_suffix(KEY)?.len();
        if session.is_empty() || !quoted[..at].ends_with('}') {
            return None;
        }
        Some(Reply {
            id,
            body: &quoted[..at],
            session: Some(session),
        })
    }
}

/// Appends `s` as a JSON string, as `serde_json` writes it, without an allocation when nothing
/// in it needs escaping (a method name, a session id).
pub(super) fn push_json_str(out: &mut String, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        out.push_str(&serde_json::Value::from(s).to_string());
    }
}

pub(super) fn decode<'a, T: Deserialize<'a>>(raw: Option<&'a RawValue>) -> Option<T> {
    raw.and_then(|r| serde_json::from_str(r.get()).ok())
}

/// A CDP error reply to `id` (raw JSON, `null` when the client sent none).
pub(super) fn error_reply(id: Option<&RawValue>, code: i64, message: &str) -> String {
    let id = id.map_or("null", RawValue::get);
    let message = serde_json::Value::from(message);
    format!(r#"{{"id":{id},"error":{{"code":{code},"message":{message}}}}}"#)
}

/// [`error_reply`] on the client's `session` when the command named one (not at browser level):
/// as Chromium's replies, since Playwright finds a reply's caller by its `sessionId` (without it, a
/// dialog refusal failed Playwright's `assert(!object.id)` in `CRSession._onMessage`).
pub(super) fn error_reply_on(
    id: Option<&RawValue>,
    session: Option<&str>,
    code: i64,
    message: &str,
) -> String {
    let reply = error_reply(id, code, message);
    match session {
        Some(s) => format!(
            r#"{},"sessionId":{}}}"#,
            &reply[..reply.len() - 1],
            serde_json::Value::from(s)
        ),
        None => reply,
    }
}

/// What a client is told of a refusal: the supervisor's error, and how a CDP client answers.
pub(super) fn client_wording(e: &crate::error::Error) -> String {
    match e {
        crate::error::Error::BlockedByDialog { .. } => format!(
            "{e} (through the supervisor), or with Page.handleJavaScriptDialog on this page"
        ),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::{Reply, push_json_str};

    #[test]
    fn json_strings_are_written_as_serde_json_writes_them() {
        for s in [
            "",
            "Runtime.callFunctionOn",
            "6227C4359F49D9833AAB08F2D61E8748",
            "a\"quote",
            "back\\slash",
            "tab\there",
            "nul\u{0}",
            "\u{1f}",
            "del\u{7f}",
            "é ✓ \u{2028}",
            "/slash/",
        ] {
            let mut out = String::from("x");
            push_json_str(&mut out, s);
            assert_eq!(
                out,
                format!("x{}", serde_json::to_string(s).unwrap()),
                "{s:?}"
            );
        }
    }

    fn split(text: &str) -> Option<(u64, &str, Option<&str>)> {
        Reply::split(text).map(|r| (r.id, r.body, r.session))
    }

    #[test]
    fn replies_laid_out_as_chromium_writes_them_are_split_without_parsing() {
        let on_session =
            r#"{"id":42,"result":{"result":{"type":"number","value":1}},"sessionId":"8F3A-b_c9"}"#;
        assert_eq!(
            split(on_session),
            Some((
                42,
                r#""result":{"result":{"type":"number","value":1}}"#,
                Some("8F3A-b_c9")
            ))
        );
        assert_eq!(
            split(r#"{"id":7,"result":{}}"#),
            Some((7, r#""result":{}"#, None))
        );
        let error =
            r#"{"id":9,"error":{"code":-32000,"message":"No \"dialog\"}"},"sessionId":"S1"}"#;
        assert_eq!(
            split(error),
            Some((
                9,
                r#""error":{"code":-32000,"message":"No \"dialog\"}"}"#,
                Some("S1")
            ))
        );
    }

    #[test]
    fn anything_laid_out_otherwise_goes_the_parsed_way() {
        for text in [
            // Not a reply, or not in Chromium's order.
            r#"{"method":"Page.loadEventFired","params":{},"sessionId":"S"}"#,
            r#"{"sessionId":"S","id":1,"result":{}}"#,
            r#"{"id":1,"sessionId":"S","result":{}}"#,
            r#"{ "id":1,"result":{}}"#,
            // Ids that are not a plain u64.
            r#"{"id":-1,"result":{}}"#,
            r#"{"id":1.5,"result":{}}"#,
            r#"{"id":,"result":{}}"#,
            r#"{"id":99999999999999999999999,"result":{}}"#,
            // A last member that is not the session, or a session that is not plain.
            r#"{"id":1,"result":{"a":1,"sessionId":"X"},"note":"y"}"#,
            r#"{"id":1,"result":{},"sessionId":"a\"b"}"#,
            r#"{"id":1,"result":{},"sessionId":""}"#,
            r#"{"id":1,"result":"x","sessionId":"S"}"#,
            // Cut short.
            r#"{"id":1,"result":{}"#,
            r#"{"id":1}"#,
            "",
        ] {
            assert_eq!(split(text), None, "{text}");
        }
    }
}

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

//! CDP wire format: the envelope every message shares, and the few events we decode.
//!
//! Parsing is lenient by design: only the envelope (`id`, `method`, `sessionId`, raw `params`,
//! raw `result`, `error`) is decoded eagerly, and `params` stays a borrowed [`RawValue`] until a
//! handler that cares about that event decodes it. Unknown methods, unknown fields and extra
//! data are passed over; a message that is not a JSON object is reported as [`Incoming::Malformed`].

use serde::Deserialize;
use serde_json::value::RawValue;

/// A CDP error object, as carried in a reply.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct CdpError {
    /// CDP/JSON-RPC error code (e.g. -32602, -32601, -32000).
    #[serde(default)]
    pub code: i64,
    /// Human-readable message from the browser.
    #[serde(default)]
    pub message: String,
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default)]
    id: Option<serde_json::Value>,
    #[serde(default, borrow)]
    method: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, rename = "sessionId", borrow)]
    session_id: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
    #[serde(default, borrow)]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

/// One decoded incoming message.
#[derive(Debug)]
pub enum Incoming<'a> {
    /// A reply to one of our commands.
    Reply {
        id: u64,
        /// `Ok(result)` or `Err(error)`.
        outcome: Result<&'a RawValue, CdpError>,
    },
    /// An event.
    Event {
        /// The event name, e.g. `Page.javascriptDialogOpening`.
        method: std::borrow::Cow<'a, str>,
        /// The session it arrived on (`None`: browser-level).
        session_id: Option<std::borrow::Cow<'a, str>>,
        /// Raw params (`None` when absent).
        params: Option<&'a RawValue>,
    },
    /// Not a CDP message we can use; the reason is for logs.
    Malformed(String),
}

const EMPTY_RESULT: &str = "{}";

fn empty_raw() -> &'static RawValue {
    // A constant literal: `from_string` cannot fail on it, and the leak happens once.
    static EMPTY: std::sync::OnceLock<Box<RawValue>> = std::sync::OnceLock::new();
    EMPTY.get_or_init(|| {
        RawValue::from_string(EMPTY_RESULT.to_string()).unwrap_or_else(|_| unreachable!())
    })
}

/// Decodes the envelope of one text message.
pub fn parse(text: &str) -> Incoming<'_> {
    let env: Envelope<'_> = match serde_json::from_str(text) {
        Ok(e) => e,
        Err(e) => return Incoming::Malformed(format!("not a CDP JSON object: {e}")),
    };
    if let Some(id) = env.id {
        let Some(id) = id.as_u64() else {
            return Incoming::Malformed("reply id is not an unsigned integer".into());
        };
        let outcome = match env.error {
            Some(err) => Err(serde_json::from_value::<CdpError>(err).unwrap_or(CdpError {
                code: 0,
                message: "malformed CDP error object".into(),
            })),
            None => Ok(env.result.unwrap_or_else(|| empty_raw())),
        };
        return Incoming::Reply { id, outcome };
    }
    match env.method {
        Some(method) => Incoming::Event {
            method,
            session_id: env.session_id,
            params: env.params,
        },
        None => Incoming::Malformed("neither a reply (id) nor an event (method)".into()),
    }
}

/// Decodes `params` into `T`, treating absence as `{}`. `None` on a type mismatch.
pub fn decode<'a, T: Deserialize<'a>>(params: Option<&'a RawValue>) -> Option<T> {
    serde_json::from_str(params.map(RawValue::get).unwrap_or(EMPTY_RESULT)).ok()
}

/// Serialises one command. `session_id` routes it to a flattened target session.
pub fn encode_command(
    id: u64,
    method: &str,
    params: &serde_json::Value,
    session_id: Option<&str>,
) -> String {
    #[derive(serde::Serialize)]
    struct Cmd<'a> {
        id: u64,
        method: &'a str,
        params: &'a serde_json::Value,
        #[serde(rename = "sessionId", skip_serializing_if = "Option::is_none")]
        session_id: Option<&'a str>,
    }
    let empty = serde_json::Value::Object(Default::default());
    let params = if params.is_null() { &empty } else { params };
    serde_json::to_string(&Cmd {
        id,
        method,
        params,
        session_id,
    })
    .unwrap_or_else(|_| format!(r#"{{"id":{id},"method":"{method}","params":{{}}}}"#))
}

// ---- The events we decode. Every field defaults, so a missing or extra field is never fatal.

/// `Page.javascriptDialogOpening`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct DialogOpening {
    /// URL of the frame that opened it.
    pub url: String,
    /// Frame that opened it (absent on very old browsers).
    pub frame_id: Option<String>,
    pub message: String,
    /// `alert`, `confirm`, `prompt` or `beforeunload`.
    #[serde(rename = "type")]
    pub kind: String,
    pub default_prompt: Option<String>,
}

/// `Page.javascriptDialogClosed`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct DialogClosed {
    /// Whether it was accepted.
    pub result: bool,
    /// Text the prompt returned.
    pub user_input: String,
    /// Frame of the dialog (newer Chromium).
    pub frame_id: Option<String>,
}

/// A `Page.Frame` object (subset).
#[derive(Debug, Default, Deserialize, Clone)]
#[serde(default, rename_all = "camelCase")]
pub struct Frame {
    pub id: String,
    pub parent_id: Option<String>,
    pub name: Option<String>,
    /// Without the fragment.
    pub url: String,
    pub url_fragment: Option<String>,
    pub security_origin: Option<String>,
    /// The navigation that brought the frame's document (`Page.frameNavigated`).
    pub loader_id: Option<String>,
}

/// A `Page.FrameTree` node.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct FrameTreeNode {
    pub frame: Frame,
    pub child_frames: Vec<FrameTreeNode>,
}

/// Result of `Page.getFrameTree`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct GetFrameTree {
    pub frame_tree: FrameTreeNode,
}

/// `Page.frameAttached`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct FrameAttached {
    pub frame_id: String,
    pub parent_frame_id: String,
}

/// `Page.frameNavigated`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct FrameNavigated {
    /// The frame after navigation.
    pub frame: Frame,
}

/// `Page.frameDetached`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct FrameDetached {
    pub frame_id: String,
    /// `remove` or `swap`.
    pub reason: Option<String>,
}

/// `Page.navigatedWithinDocument`: `location.hash`, `history.pushState`, ... (same document).
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NavigatedWithinDocument {
    pub frame_id: String,
    /// Its new URL (fragment included).
    pub url: String,
}

/// `Target.targetCrashed` (browser level, with target discovery on).
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TargetCrashed {
    /// The target whose renderer crashed.
    pub target_id: String,
}

/// `Target.TargetInfo` (subset).
#[derive(Debug, Default, Deserialize, Clone)]
#[serde(default, rename_all = "camelCase")]
pub struct TargetInfo {
    pub target_id: String,
    /// `page`, `iframe`, `worker`, `browser`, ...
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub url: String,
    /// Whether some client is attached.
    pub attached: bool,
    /// Parent frame of an iframe target (newer Chromium).
    pub parent_frame_id: Option<String>,
    /// The target that opened this page (`window.open`, `target=_blank`), when Chromium says.
    pub opener_id: Option<String>,
    /// The frame that opened this page, when Chromium says.
    pub opener_frame_id: Option<String>,
    /// Whether this page can script its opener: false for a `noopener` popup, which Chromium
    /// puts in a browsing-context group (and so a renderer) of its own although `openerId`
    /// still names its opener (measured: `tests/it/measure_renderers.rs`).
    pub can_access_opener: bool,
}

/// Result of `Target.getTargets`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct GetTargets {
    pub target_infos: Vec<TargetInfo>,
}

/// `Target.attachedToTarget`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AttachedToTarget {
    pub session_id: String,
    /// What it is attached to.
    pub target_info: TargetInfo,
    /// Paused until `Runtime.runIfWaitingForDebugger`.
    pub waiting_for_debugger: bool,
}

/// `Target.detachedFromTarget`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct DetachedFromTarget {
    /// The session that went away.
    pub session_id: String,
    pub target_id: Option<String>,
}

/// `Runtime.executionContextCreated` (only what routing needs).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ExecutionContextCreated {
    pub context: ExecutionContext,
}

/// `Runtime.ExecutionContextDescription` (subset).
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ExecutionContext {
    /// Context id, unique per session.
    pub id: i64,
    /// `auxData` (`frameId`, `isDefault`).
    pub aux_data: Option<ContextAux>,
}

/// `auxData` of an execution context.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ContextAux {
    /// The frame it belongs to.
    pub frame_id: Option<String>,
    /// True for the frame's main world.
    pub is_default: bool,
}

/// `Runtime.executionContextDestroyed`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ExecutionContextDestroyed {
    pub execution_context_id: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_and_event_are_told_apart() {
        match parse(r#"{"id":7,"result":{"a":1}}"#) {
            Incoming::Reply {
                id: 7,
                outcome: Ok(r),
            } => assert_eq!(r.get(), r#"{"a":1}"#),
            other => panic!("{other:?}"),
        }
        match parse(r#"{"id":8,"error":{"code":-32602,"message":"No dialog is showing"}}"#) {
            Incoming::Reply {
                id: 8,
                outcome: Err(e),
            } => assert_eq!(e.code, -32602),
            other => panic!("{other:?}"),
        }
        match parse(r#"{"method":"Page.x","sessionId":"S","params":{},"extra":1}"#) {
            Incoming::Event {
                method, session_id, ..
            } => {
                assert_eq!(method, "Page.x");
                assert_eq!(session_id.as_deref(), Some("S"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn garbage_is_malformed_not_a_panic() {
        for t in [
            "",
            "[]",
            "null",
            "{\"id\":-1}",
            "{\"id\":\"x\"}",
            "{}",
            "{\"method\":1}",
        ] {
            assert!(matches!(parse(t), Incoming::Malformed(_)), "{t}");
        }
    }

    #[test]
    fn events_decode_leniently() {
        let p =
            RawValue::from_string(r#"{"message":"hi","type":"alert","bogus":[1]}"#.into()).unwrap();
        let d: DialogOpening = decode(Some(&p)).unwrap();
        assert_eq!(d.kind, "alert");
        assert!(d.frame_id.is_none());
        let wrong = RawValue::from_string(r#"{"message":5}"#.into()).unwrap();
        assert!(decode::<DialogOpening>(Some(&wrong)).is_none());
    }

    #[test]
    fn command_encoding_carries_session() {
        let s = encode_command(3, "Page.enable", &serde_json::Value::Null, Some("S1"));
        assert_eq!(
            s,
            r#"{"id":3,"method":"Page.enable","params":{},"sessionId":"S1"}"#
        );
    }
}

//! The two protocol generations one server speaks (SPEC §15), and what a request's `_meta`
//! envelope says about the one it is in.
//!
//! * **Modern** (2026-07-28, stateless): every request carries
//!   `_meta["io.modelcontextprotocol/protocolVersion"]` and
//!   `_meta["io.modelcontextprotocol/clientCapabilities"]`; nothing is remembered between
//!   requests; every result carries `resultType` and names the server in
//!   `_meta["io.modelcontextprotocol/serverInfo"]`.
//! * **Legacy** (2025-11-25, 2025-06-18, 2024-11-05): `initialize` negotiates a version for the
//!   session (the stdio process, or an HTTP `Mcp-Session-Id`); requests carry no envelope.
//!
//! One process serves both, request by request (the spec lets a dual-era server serve both
//! eras concurrently): a request is modern when its `_meta` names a protocol version. The
//! handshake does not exist in 2026-07-28: an `initialize` with a valid 2026-07-28 envelope is
//! a removed method (`-32601`, as the official conformance suite checks); without one (or with
//! a broken one) it is the legacy handshake. A request without an envelope is served the
//! legacy way, `initialize` or not, as before.
//!
//! **Why 2024-11-05 is still offered.** The 2026-07-28 versioning page lets a dual-era server
//! keep any handshake revision, and nothing we send breaks a 2024-11-05 client (the fields
//! added since, `title`, `annotations`, `outputSchema`, `structuredContent`, are extra members
//! it passes over; every tool result also has its text content). Dropping it would cut off the
//! clients still on it, and the 2025-03-26 clients we serve through it (2025-03-26 alone has
//! JSON-RPC batches, which we do not take, so they are offered 2024-11-05).
//!
//! The checks of an envelope, in order (the first that fails answers the request):
//! 1. `_meta` without `io.modelcontextprotocol/protocolVersion`: legacy, no checks.
//! 2. the version is not a string, or `clientCapabilities` is missing or not an object:
//!    `-32602` (a malformed modern request, spec basic/index "Per-request protocol fields");
//! 3. the version is not 2026-07-28: `-32022` UnsupportedProtocolVersion with
//!    `data: {supported, requested}` naming every version we serve, both eras;
//! 4. `io.modelcontextprotocol/logLevel` present but not a level: `-32602` (logging page).
//!
//! Results: every modern one carries `resultType` and our server info ([`finish`]); a tool's
//! JSON becomes an MCP tool result by [`tool_result`].

use serde_json::{Value, json};

use super::Answer;
use super::events::{LEVELS, Level};
use crate::mcp::rpc::{self, Id, code};
use crate::quote::quoted;

/// The stateless protocol revisions, newest first.
pub const MODERN_VERSIONS: &[&str] = &["2026-07-28"];

/// The handshake revisions `initialize` negotiates, newest first (module doc: why 2024-11-05).
/// None of them has JSON-RPC batches.
pub const LEGACY_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2024-11-05"];

/// Every protocol version this server speaks, newest first: what `server/discover` and the
/// `-32022` error list.
pub const SUPPORTED_VERSIONS: &[&str] = &["2026-07-28", "2025-11-25", "2025-06-18", "2024-11-05"];

/// The reserved `_meta` keys we read or write.
pub(crate) mod meta {
    /// A request's protocol version (modern).
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    /// A request's client capabilities (modern, required).
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    /// The least severe log level the client wants for this request (modern, optional).
    pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
    /// Who answered: on every modern result.
    pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
    /// The `subscriptions/listen` request a notification belongs to.
    pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
    /// What happened to a task, on our `notifications/resources/updated` (our own prefix: the
    /// namespace of our registry name, `io.github.cdp-supervisor/cdp-supervisor`).
    pub const EVENT: &str = "io.github.cdp-supervisor/event";
}

/// JSON-RPC error code of UnsupportedProtocolVersion (2026-07-28).
pub(crate) const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// How one request is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Era {
    /// No envelope: the handshake protocol (what `initialize` negotiated, or nothing yet).
    Legacy,
    /// A 2026-07-28 request.
    Modern(Modern),
}

/// What a modern request's envelope asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Modern {
    /// The version it speaks (one of [`MODERN_VERSIONS`]).
    pub(crate) version: &'static str,
    /// Its `io.modelcontextprotocol/logLevel`: log messages about this request at or above it
    /// may precede its response; `None`: none may (logging page).
    pub(crate) log_level: Option<Level>,
}

/// Why a request's envelope is refused: the JSON-RPC error it is answered with.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    code: i64,
    message: String,
    data: Option<Value>,
}

impl Refusal {
    fn invalid(message: String) -> Refusal {
        Refusal {
            code: code::INVALID_PARAMS,
            message,
            data: None,
        }
    }

    /// The error response to request `id`.
    pub(crate) fn answer(&self, id: &Id) -> Answer {
        let line = match &self.data {
            Some(data) => rpc::error_with_data(Some(id), self.code, &self.message, data),
            None => rpc::error(Some(id), self.code, self.message.clone()),
        };
        Answer {
            line: Some(line),
            error: Some(self.code),
            ..Answer::default()
        }
    }

    /// Its JSON-RPC error code.
    #[cfg(test)]
    pub(crate) fn code(&self) -> i64 {
        self.code
    }
}

/// The era a request is served in, from its params (module doc: the checks, in order).
pub(crate) fn era(params: &Value) -> Result<Era, Refusal> {
    let Some(meta) = params.get("_meta").and_then(Value::as_object) else {
        return Ok(Era::Legacy);
    };
    let Some(version) = meta.get(meta::PROTOCOL_VERSION) else {
        return Ok(Era::Legacy);
    };
    let Some(version) = version.as_str() else {
        return Err(Refusal::invalid(format!(
            "invalid params: _meta[\"{}\"] must be a string",
            meta::PROTOCOL_VERSION
        )));
    };
    if !meta
        .get(meta::CLIENT_CAPABILITIES)
        .is_some_and(Value::is_object)
    {
        return Err(Refusal::invalid(format!(
            "invalid params: a {} request needs _meta[\"{}\"] (an object, {{}} when the \
             client has none)",
            quoted(version),
            meta::CLIENT_CAPABILITIES
        )));
    }
    let Some(version) = MODERN_VERSIONS.iter().copied().find(|v| *v == version) else {
        return Err(unsupported(version));
    };
    let log_level = match meta.get(meta::LOG_LEVEL) {
        None | Some(Value::Null) => None,
        Some(l) => match l.as_str().and_then(Level::parse) {
            Some(level) => Some(level),
            None => {
                return Err(Refusal::invalid(format!(
                    "invalid params: _meta[\"{}\"] must be one of {}",
                    meta::LOG_LEVEL,
                    LEVELS.join(", ")
                )));
            }
        },
    };
    Ok(Era::Modern(Modern { version, log_level }))
}

/// UnsupportedProtocolVersion for `requested`, naming every version we serve.
pub(crate) fn unsupported(requested: &str) -> Refusal {
    Refusal {
        code: UNSUPPORTED_PROTOCOL_VERSION,
        message: format!(
            "Unsupported protocol version {}: this server speaks {} (2026-07-28 with the \
             per-request _meta envelope, the others through initialize)",
            quoted(requested),
            SUPPORTED_VERSIONS.join(", ")
        ),
        data: Some(json!({"supported": SUPPORTED_VERSIONS, "requested": requested})),
    }
}

/// The server's name, title and version (`serverInfo` of `initialize`, and of every modern
/// result's `_meta`).
pub(crate) fn server_info() -> Value {
    json!({
        "name": "cdp-supervisor",
        "title": "CDP supervisor: JS dialogs, frames and raw CDP",
        "version": env!("CARGO_PKG_VERSION")
    })
}

/// What every modern result carries besides its own members: `resultType` and our
/// `serverInfo`. Legacy results are left as they are.
pub(crate) fn finish(era: Era, mut result: Value) -> Value {
    if let (Era::Modern(_), Value::Object(map)) = (era, &mut result) {
        map.insert("resultType".into(), Value::from("complete"));
        let meta = map
            .entry("_meta")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Value::Object(meta) = meta {
            meta.insert(meta::SERVER_INFO.into(), server_info());
        }
    }
    result
}

/// The `result` members a modern answer built as text ends with (after its own members):
/// `"resultType":"complete","_meta":{serverInfo}`; empty for legacy.
pub(crate) fn finish_text(era: Era) -> &'static str {
    use std::sync::OnceLock;
    static MODERN: OnceLock<String> = OnceLock::new();
    match era {
        Era::Legacy => "",
        Era::Modern(_) => MODERN.get_or_init(|| {
            format!(
                r#","resultType":"complete","_meta":{{"{}":{}}}"#,
                meta::SERVER_INFO,
                server_info()
            )
        }),
    }
}

/// The tool result of a call that failed inside the server (a handler that panicked, no worker
/// to run it): a tool error, since the request itself was fine.
pub(super) fn internal_error(why: &str) -> Value {
    json!({
        "success": false,
        "error": format!("internal error in the MCP server ({why}); the call did not complete, the server carries on"),
        "internal_error": true,
    })
}

/// A tool's JSON as an MCP tool result (text content, `structuredContent`, `isError`, and for
/// 2026-07-28 `resultType` and server info), as one line of JSON text.
pub(super) fn tool_result(id: &Id, out: Value, era: Era) -> String {
    let is_error = out.get("success") == Some(&Value::Bool(false));
    rpc::result(
        id,
        &finish(
            era,
            json!({
                "content": [{"type": "text", "text": out.to_string()}],
                "structuredContent": out,
                "isError": is_error,
            }),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(meta: Value) -> Value {
        json!({"_meta": meta})
    }

    #[test]
    fn requests_without_a_version_in_meta_are_legacy() {
        assert_eq!(era(&Value::Null), Ok(Era::Legacy));
        assert_eq!(era(&json!({})), Ok(Era::Legacy));
        assert_eq!(era(&envelope(json!({"progressToken": 1}))), Ok(Era::Legacy));
        assert_eq!(era(&json!({"_meta": 7})), Ok(Era::Legacy));
    }

    #[test]
    fn a_2026_envelope_is_modern_with_its_log_level() {
        let ok =
            envelope(json!({meta::PROTOCOL_VERSION: "2026-07-28", meta::CLIENT_CAPABILITIES: {}}));
        assert_eq!(
            era(&ok),
            Ok(Era::Modern(Modern {
                version: "2026-07-28",
                log_level: None
            }))
        );
        let logged = envelope(json!({
            meta::PROTOCOL_VERSION: "2026-07-28", meta::CLIENT_CAPABILITIES: {}, meta::LOG_LEVEL: "warning"
        }));
        assert_eq!(
            era(&logged),
            Ok(Era::Modern(Modern {
                version: "2026-07-28",
                log_level: Some(Level::WARNING)
            }))
        );
    }

    #[test]
    fn malformed_envelopes_are_invalid_params_and_other_versions_name_the_supported_ones() {
        let no_caps = envelope(json!({meta::PROTOCOL_VERSION: "2026-07-28"}));
        let e = era(&no_caps).unwrap_err();
        assert_eq!(e.code(), code::INVALID_PARAMS);
        assert!(e.message.contains(meta::CLIENT_CAPABILITIES), "{e:?}");
        let caps_not_object =
            envelope(json!({meta::PROTOCOL_VERSION: "2026-07-28", meta::CLIENT_CAPABILITIES: []}));
        assert_eq!(
            era(&caps_not_object).unwrap_err().code(),
            code::INVALID_PARAMS
        );
        let not_string =
            envelope(json!({meta::PROTOCOL_VERSION: 2026, meta::CLIENT_CAPABILITIES: {}}));
        assert_eq!(era(&not_string).unwrap_err().code(), code::INVALID_PARAMS);
        let bad_level = envelope(json!({
            meta::PROTOCOL_VERSION: "2026-07-28", meta::CLIENT_CAPABILITIES: {}, meta::LOG_LEVEL: "loud"
        }));
        assert_eq!(era(&bad_level).unwrap_err().code(), code::INVALID_PARAMS);
        for requested in ["1900-01-01", "2025-11-25", ""] {
            let e = era(&envelope(
                json!({meta::PROTOCOL_VERSION: requested, meta::CLIENT_CAPABILITIES: {}}),
            ))
            .unwrap_err();
            assert_eq!(e.code(), UNSUPPORTED_PROTOCOL_VERSION);
            let answer = e.answer(&Id::parse("3"));
            assert_eq!(answer.error, Some(-32022));
            let line: Value = serde_json::from_str(&answer.line.unwrap()).unwrap();
            assert_eq!(line["id"], 3);
            assert_eq!(line["error"]["code"], -32022);
            assert_eq!(
                line["error"]["data"],
                json!({"supported": SUPPORTED_VERSIONS, "requested": requested})
            );
        }
    }

    #[test]
    fn modern_results_carry_result_type_and_server_info_and_legacy_ones_do_not() {
        let modern = Era::Modern(Modern {
            version: "2026-07-28",
            log_level: None,
        });
        let r = finish(modern, json!({"tools": []}));
        assert_eq!(r["resultType"], "complete");
        assert_eq!(r["_meta"][meta::SERVER_INFO]["name"], "cdp-supervisor");
        assert_eq!(finish(Era::Legacy, json!({"a": 1})), json!({"a": 1}));
        // The text form says the same.
        let text: Value =
            serde_json::from_str(&format!(r#"{{"tools":[]{}}}"#, finish_text(modern))).unwrap();
        assert_eq!(text, r);
        assert_eq!(finish_text(Era::Legacy), "");
    }
}

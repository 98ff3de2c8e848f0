//! What each request means, in each protocol generation (`protocol`); `tools/call` is the
//! engine's own (`Engine::tool_call`, in `engine.rs`: the one method that may run on a worker).
//!
//! | method | legacy (no envelope) | 2026-07-28 |
//! |---|---|---|
//! | `initialize` | the handshake | `-32601`: removed in 2026-07-28 (legacy if its envelope is broken) |
//! | `ping`, `logging/setLevel` | answered | `-32601`: removed in 2026-07-28 |
//! | `server/discover` | `-32602`: needs the envelope | versions, capabilities, server info, instructions |
//! | `tools/list` | the tools | the tools, in the table's fixed order, with cache hints |
//! | `tools/call` | the tool's result | the same, plus `resultType`; request-scoped logs on opt-in |
//! | `resources/list`, `resources/templates/list`, `resources/read` | `-32601` | the task resources (`resources`) |
//! | `subscriptions/listen` | `-32601` | a stream of task events (`listen`) |

use std::sync::Arc;

use serde_json::{Value, json};

use super::events::{self, Level};
use super::protocol::{self, Era, Modern};
use super::{Answer, Client, Engine, Request, listen, resources};
use crate::cancel::CancelToken;
use crate::mcp::rpc::{self, Id, code};
use crate::quote::quoted;
use crate::tools::Context;
use crate::tools::table::{self, Tool};

/// How long a client may keep `server/discover`, `tools/list` and the resource lists: they
/// only change with the binary (1 hour).
const STATIC_TTL_MS: u64 = 3_600_000;

/// What `initialize` and `server/discover` tell the model about using this server.
const INSTRUCTIONS: &str = "Call browser_connect first (without cdp_url it launches a local headless Chromium; each task gets a tab of its own). Every tool result lists pending_dialogs: a JS dialog blocks the page until browser_dialog answers it, and browser_cdp calls it blocks fail at once with blocked_by_dialog. State across calls is the task_id argument (on stdio a call without one is the task \"default\").";

impl Engine {
    /// `initialize`: the legacy handshake. The session remembers the version, and from now on
    /// receives `notifications/message` on the client's stream.
    pub(super) fn initialize(&self, request: &Request, client: &Client) -> Answer {
        let result = initialize_result(&request.params);
        if let Some(session) = &client.session {
            if let Some(v) = result["protocolVersion"].as_str() {
                session.set_version(v);
            }
            if let Some(out) = &client.stream {
                self.notifier.add_legacy_output(session, Arc::clone(out));
            }
        }
        Answer::result(rpc::result(&request.id, &result))
    }

    /// A request without the 2026-07-28 envelope.
    pub(super) fn legacy(&self, request: &Request, client: &Client) -> Answer {
        let id = &request.id;
        match request.method.as_str() {
            "ping" => Answer::result(rpc::result(id, &json!({}))),
            "tools/list" => Answer::result(rpc::result(id, &json!({"tools": Tool::list()}))),
            "logging/setLevel" => match request.params.get("level").and_then(Value::as_str) {
                Some(l) => match Level::parse(l) {
                    Some(level) => {
                        if let Some(session) = &client.session {
                            session.set_min_level(level);
                        }
                        Answer::result(rpc::result(id, &json!({})))
                    }
                    None => Answer::error(
                        Some(id),
                        code::INVALID_PARAMS,
                        format!(
                            "invalid params: unknown level {}; use one of {}",
                            quoted(l),
                            events::LEVELS.join(", ")
                        ),
                    ),
                },
                None => Answer::error(
                    Some(id),
                    code::INVALID_PARAMS,
                    "invalid params: logging/setLevel needs a string \"level\"",
                ),
            },
            "tools/call" => self.tool_call(request, Era::Legacy, client, &CancelToken::new()),
            "server/discover" => Answer::error(
                Some(id),
                code::INVALID_PARAMS,
                format!(
                    "invalid params: server/discover is a {} request: it needs \
                     _meta[\"{}\"] and _meta[\"{}\"]",
                    protocol::MODERN_VERSIONS[0],
                    protocol::meta::PROTOCOL_VERSION,
                    protocol::meta::CLIENT_CAPABILITIES
                ),
            ),
            other => not_found(id, other),
        }
    }

    /// A 2026-07-28 request.
    pub(super) fn modern(&self, request: &Request, m: Modern, client: &Client) -> Answer {
        let (id, method, params) = (&request.id, request.method.as_str(), &request.params);
        let era = Era::Modern(m);
        let result = |r: Value| Answer::result(rpc::result(id, &protocol::finish(era, r)));
        // What changes only with the binary: any client may keep it for STATIC_TTL_MS.
        let static_result = |mut r: Value| {
            r["ttlMs"] = json!(STATIC_TTL_MS);
            r["cacheScope"] = json!("public");
            result(r)
        };
        match method {
            "server/discover" => static_result(json!({
                "supportedVersions": protocol::SUPPORTED_VERSIONS,
                "capabilities": {
                    "tools": {"listChanged": false},
                    "resources": {"subscribe": true, "listChanged": false},
                    "logging": {},
                },
                "instructions": INSTRUCTIONS,
            })),
            "tools/list" | "resources/list" | "resources/templates/list"
                if !matches!(params.get("cursor"), None | Some(Value::Null)) =>
            {
                Answer::error(
                    Some(id),
                    code::INVALID_PARAMS,
                    "invalid params: unknown cursor: this list has one page; list again without a cursor",
                )
            }
            "tools/list" => static_result(json!({"tools": Tool::list()})),
            "tools/call" => self.tool_call(request, era, client, &CancelToken::new()),
            "resources/list" => static_result(json!({"resources": []})),
            "resources/templates/list" => {
                static_result(json!({"resourceTemplates": resources::templates()}))
            }
            "resources/read" => {
                let uri = params.get("uri").and_then(Value::as_str);
                let Some((uri, task)) = uri.and_then(|u| Some((u, resources::task_of(u)?))) else {
                    return Answer::error(
                        Some(id),
                        code::INVALID_PARAMS,
                        format!(
                            "invalid params: no such resource {}; the resources are {} \
                             (resources/templates/list)",
                            uri.map_or_else(
                                || "(uri must be a string)".into(),
                                |u| quoted(u).to_string()
                            ),
                            resources::TEMPLATE
                        ),
                    );
                };
                let ctx = Context {
                    tasks: client.tasks(),
                    ..Context::of(&self.registry)
                };
                let view = table::dispatch(&ctx, Tool::Snapshot, &json!({"task_id": task}));
                result(json!({
                    "contents": [{"uri": uri, "mimeType": "application/json", "text": view.to_string()}],
                    "ttlMs": 0,
                    "cacheScope": "private",
                }))
            }
            "subscriptions/listen" => {
                let Some(out) = &client.stream else {
                    return listen::no_stream(id);
                };
                let pool = &self.pool;
                let channel = client.channel;
                match self
                    .notifier
                    .listens()
                    .open(channel, id, params, Arc::clone(out), |key| {
                        pool.contains(&(channel, key.clone()))
                    }) {
                    Ok(()) => Answer::default(),
                    Err(refused) => refused,
                }
            }
            "ping"
            | "logging/setLevel"
            | "initialize"
            | "resources/subscribe"
            | "resources/unsubscribe" => Answer::error(
                Some(id),
                code::METHOD_NOT_FOUND,
                format!(
                    "method not found: {method} is not part of protocol {}{}",
                    m.version,
                    match method {
                        "logging/setLevel" => format!(
                            "; ask for log messages per request with _meta[\"{}\"]",
                            protocol::meta::LOG_LEVEL
                        ),
                        "resources/subscribe" | "resources/unsubscribe" =>
                            "; use subscriptions/listen".into(),
                        _ => String::new(),
                    }
                ),
            ),
            other => not_found(id, other),
        }
    }
}

fn not_found(id: &Id, method: &str) -> Answer {
    Answer::error(
        Some(id),
        code::METHOD_NOT_FOUND,
        format!("method not found: {}", quoted(method)),
    )
}

fn initialize_result(params: &Value) -> Value {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = match asked {
        Some(v) if protocol::LEGACY_VERSIONS.contains(&v) => v,
        // 2025-03-26 clients also speak 2024-11-05, and that version has no batches either.
        Some("2025-03-26") => "2024-11-05",
        _ => protocol::LEGACY_VERSIONS[0],
    };
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}, "logging": {}},
        "serverInfo": protocol::server_info(),
        "instructions": INSTRUCTIONS,
    })
}

//! What each request means, in each protocol generation (`protocol`), and which requests stdio
//! answers on its reading thread and which go to the worker pool (`pool`). `tools/call` runs
//! through the tool table (`tools::table::dispatch`), with this server as its host
//! (`exchange::Served`). [`Inner::answer`] is the transport-independent entry (`exchange`).
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
use super::exchange::{Answer, Exchange, Served, Transport};
use super::notify;
use super::pool::Refused;
use super::protocol::{self, Era, Modern};
use super::resources;
use super::rpc::{self, Id, IdKey, code};
use super::{Inner, MAX_IN_FLIGHT, listen};
use crate::cancel::CancelToken;
use crate::quote::quoted;
use crate::tools::table::{self, Host, Tool};

/// How long a client may keep `server/discover`, `tools/list` and the resource lists: they
/// only change with the binary (1 hour).
const STATIC_TTL_MS: u64 = 3_600_000;

/// What `initialize` and `server/discover` tell the model about using this server.
const INSTRUCTIONS: &str = "Call browser_connect first (without cdp_url it launches a local headless Chromium; each task gets a tab of its own). Every tool result lists pending_dialogs: a JS dialog blocks the page until browser_dialog answers it, and browser_cdp calls it blocks fail at once with blocked_by_dialog. State across calls is the task_id argument (on stdio a call without one is the task \"default\").";

impl Inner {
    /// Handles a notification from the client on `channel`: `notifications/cancelled` cancels
    /// the request it names, a call in flight or a `subscriptions/listen` stream (compared as
    /// JSON-RPC compares ids: see `rpc`); an unknown or finished id is ignored.
    pub(crate) fn notification(&self, channel: u64, method: &str, request_id: Option<&IdKey>) {
        if method == "notifications/cancelled"
            && let Some(key) = request_id
            && (self.pool.cancel(&(channel, key.clone()))
                || self.notifier.listens().cancel(channel, key))
        {
            log::debug!("request {key} cancelled by the client");
        }
    }

    /// The answer to one request, in the era its envelope names (module doc), for any
    /// transport (`exchange`).
    pub(crate) fn answer(
        &self,
        id: &Id,
        method: &str,
        params: &Value,
        x: &Exchange,
        cancel: &CancelToken,
    ) -> Answer {
        let era = protocol::era(params);
        // The handshake is legacy; a 2026-07-28 request for it names a removed method.
        if method == "initialize" && !matches!(era, Ok(Era::Modern(_))) {
            return Answer::line(self.initialize(id, params, x));
        }
        match era {
            Err(refused) => Answer::line(refused.line(id)),
            Ok(Era::Legacy) => self.legacy(id, method, params, x, cancel),
            Ok(Era::Modern(m)) => self.modern(id, method, params, m, x, cancel),
        }
    }

    /// `initialize`: the legacy handshake. The session remembers the version, and from now on
    /// receives `notifications/message` on the exchange's stream.
    fn initialize(&self, id: &Id, params: &Value, x: &Exchange) -> String {
        let result = initialize_result(params);
        if let Some(session) = &x.legacy {
            if let Some(v) = result["protocolVersion"].as_str() {
                session.set_version(v);
            }
            if let Some(out) = &x.stream {
                self.notifier.add_legacy_output(session, Arc::clone(out));
            }
        }
        rpc::result(id, &result)
    }

    fn legacy(
        &self,
        id: &Id,
        method: &str,
        params: &Value,
        x: &Exchange,
        cancel: &CancelToken,
    ) -> Answer {
        Answer::line(match method {
            "ping" => rpc::result(id, &json!({})),
            "tools/list" => rpc::result(id, &json!({"tools": super::tool_list()})),
            "logging/setLevel" => match params.get("level").and_then(Value::as_str) {
                Some(l) => match Level::parse(l) {
                    Some(level) => {
                        if let Some(session) = &x.legacy {
                            session.set_min_level(level);
                        }
                        rpc::result(id, &json!({}))
                    }
                    None => rpc::error(
                        Some(id),
                        code::INVALID_PARAMS,
                        format!(
                            "invalid params: unknown level {}; use one of {}",
                            quoted(l),
                            events::LEVELS.join(", ")
                        ),
                    ),
                },
                None => rpc::error(
                    Some(id),
                    code::INVALID_PARAMS,
                    "invalid params: logging/setLevel needs a string \"level\"",
                ),
            },
            "tools/call" => return self.tool_call(id, params, Era::Legacy, x, cancel),
            "server/discover" => rpc::error(
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
        })
    }

    fn modern(
        &self,
        id: &Id,
        method: &str,
        params: &Value,
        m: Modern,
        x: &Exchange,
        cancel: &CancelToken,
    ) -> Answer {
        let era = Era::Modern(m);
        let result = |r: Value| Answer::line(rpc::result(id, &protocol::finish(era, r)));
        match method {
            "server/discover" => result(json!({
                "supportedVersions": protocol::SUPPORTED_VERSIONS,
                "capabilities": {
                    "tools": {"listChanged": false},
                    "resources": {"subscribe": true, "listChanged": false},
                    "logging": {},
                },
                "instructions": INSTRUCTIONS,
                "ttlMs": STATIC_TTL_MS,
                "cacheScope": "public",
            })),
            "tools/list" | "resources/list" | "resources/templates/list"
                if !matches!(params.get("cursor"), None | Some(Value::Null)) =>
            {
                Answer::line(rpc::error(
                    Some(id),
                    code::INVALID_PARAMS,
                    "invalid params: unknown cursor: this list has one page; list again without a cursor",
                ))
            }
            "tools/list" => result(json!({
                "tools": super::tool_list(),
                "ttlMs": STATIC_TTL_MS,
                "cacheScope": "public",
            })),
            "tools/call" => self.tool_call(id, params, era, x, cancel),
            "resources/list" => result(json!({
                "resources": [],
                "ttlMs": STATIC_TTL_MS,
                "cacheScope": "public",
            })),
            "resources/templates/list" => result(json!({
                "resourceTemplates": resources::templates(),
                "ttlMs": STATIC_TTL_MS,
                "cacheScope": "public",
            })),
            "resources/read" => {
                let uri = params.get("uri").and_then(Value::as_str);
                let Some((uri, task)) = uri.and_then(|u| Some((u, resources::task_of(u)?))) else {
                    return Answer::line(rpc::error(
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
                    ));
                };
                let host = Served {
                    inner: self,
                    transport: x.transport,
                };
                let view = table::dispatch(&host, Tool::Snapshot, &json!({"task_id": task}), None);
                result(json!({
                    "contents": [{"uri": uri, "mimeType": "application/json", "text": view.to_string()}],
                    "ttlMs": 0,
                    "cacheScope": "private",
                }))
            }
            "subscriptions/listen" => {
                let Some(out) = &x.stream else {
                    return Answer::line(listen::no_stream(id));
                };
                let stdio = x.transport == Transport::Stdio;
                match self
                    .notifier
                    .listens()
                    .open(x.channel, id, params, Arc::clone(out), |key| {
                        stdio && self.pool.contains(&(x.channel, key.clone()))
                    }) {
                    Ok(()) => Answer::default(),
                    Err(line) => Answer::line(line),
                }
            }
            "ping"
            | "logging/setLevel"
            | "initialize"
            | "resources/subscribe"
            | "resources/unsubscribe" => Answer::line(rpc::error(
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
            )),
            other => Answer::line(not_found(id, other)),
        }
    }

    /// `tools/call`: the snapshot fast path (`fast_path`) or the tool table. A 2026-07-28
    /// request that asked for logs gets what happened to its task during the call, before the
    /// result.
    fn tool_call(
        &self,
        id: &Id,
        params: &Value,
        era: Era,
        x: &Exchange,
        cancel: &CancelToken,
    ) -> Answer {
        if let Some(line) = self.snapshot_line(id, params, era, x.transport) {
            return Answer::line(line);
        }
        let (tool, args) = match tool_call_params(params) {
            Ok(t) => t,
            Err(e) => return Answer::line(rpc::error(Some(id), code::INVALID_PARAMS, e)),
        };
        let host = Served {
            inner: self,
            transport: x.transport,
        };
        let log_level = match era {
            Era::Modern(m) => m.log_level,
            Era::Legacy => None,
        };
        let task = log_level
            .filter(|_| args.is_object())
            .and_then(|_| host.task_id(tool, &args).ok())
            .map(|t| t.into_owned());
        let before = task
            .as_deref()
            .and_then(|t| self.registry.get(t))
            .map(|s| s.snapshot());
        let out = table::dispatch(&host, tool, &args, Some(cancel));
        // Over HTTP a browser_connect without task_id names its new task in the result.
        let task = log_level.and(
            out.get("task_id")
                .and_then(Value::as_str)
                .map(str::to_string)
                .or(task),
        );
        let mut answer = Answer::line(tool_result(id, out, era));
        if let Some(level) = log_level
            && let Some(task) = task.as_deref()
        {
            let after = self.registry.get(task).map(|s| s.snapshot());
            answer.before = notify::changes_during(task, before.as_ref(), after.as_ref())
                .iter()
                .filter(|e| e.level >= level)
                .map(events::Event::log_line)
                .collect();
        }
        answer
    }

    /// Answers a request on stdio: at once (returned), or later from a worker, which writes
    /// its answer to the exchange's stream (`None`). See [`Inner::serve_with`].
    pub(super) fn serve(
        me: &Arc<Self>,
        id: Id,
        method: &str,
        params: &Value,
        x: &Exchange,
    ) -> Option<Answer> {
        let out = x.stream.clone();
        Inner::serve_with(
            me,
            id,
            method,
            params,
            x,
            Box::new(move |answer: Answer| {
                if let Some(out) = out {
                    // Closed at shutdown: nothing is written after it.
                    answer.write_to(&*out);
                }
            }),
        )
    }

    /// Answers a request on any transport: at once (returned), or later from a worker, which
    /// hands the answer to `reply` (`None`). Every method but `tools/call` is answered at once,
    /// and so are `browser_snapshot` (a wait-free read) and a call the server refuses. A
    /// worker's handler that panics is answered with an internal tool error, and its place in
    /// the pool (keyed by the exchange's channel and the id: `pool::Key`) is freed either way
    /// (see `pool`). A call cancelled before its answer is ready gets none: `reply` is dropped
    /// uncalled.
    pub(crate) fn serve_with(
        me: &Arc<Self>,
        id: Id,
        method: &str,
        params: &Value,
        x: &Exchange,
        reply: Box<dyn FnOnce(Answer) + Send>,
    ) -> Option<Answer> {
        let inline =
            method != "tools/call" || called_tool(params).is_none_or(|tool| tool == Tool::Snapshot);
        if inline {
            return Some(me.answer(&id, method, params, x, &CancelToken::new()));
        }
        let key = id.key();
        let duplicate = || {
            Some(Answer::line(rpc::error(
                Some(&id),
                code::INVALID_REQUEST,
                "invalid request: a request with this id is still in flight",
            )))
        };
        if me.notifier.listens().is_open(x.channel, &key) {
            return duplicate();
        }
        let slot = match me.pool.admit((x.channel, key)) {
            Ok(slot) => slot,
            Err(Refused::Duplicate) => return duplicate(),
            Err(Refused::Full) => {
                return Some(Answer::line(tool_result(
                    &id,
                    json!({"success": false, "error": format!(
                        "too many tool calls in flight ({MAX_IN_FLIGHT}): wait for one to finish or cancel one, then retry"
                    )}),
                    protocol::era(params).unwrap_or(Era::Legacy),
                )));
            }
        };
        let worker = Arc::clone(me);
        let (method, params) = (method.to_string(), params.clone());
        let (job_id, reply_id) = (id.clone(), id.clone());
        let era = protocol::era(&params).unwrap_or(Era::Legacy);
        let job_x = x.clone();
        let ran = me.pool.run(
            slot,
            move |cancel| worker.answer(&job_id, &method, &params, &job_x, cancel),
            move |outcome, slot| {
                let answer = outcome.unwrap_or_else(|panic| {
                    log::error!(
                        "the handler of request {reply_id} panicked: {panic:?}; it is answered \
                         with an internal error and the server carries on"
                    );
                    Answer::line(tool_result(&reply_id, internal_error(&panic), era))
                });
                if slot.release() {
                    log::debug!("request {reply_id} was cancelled: no response");
                } else {
                    reply(answer);
                }
            },
        );
        match ran {
            Ok(()) => None,
            Err(why) => {
                log::error!("{why}");
                Some(Answer::line(tool_result(&id, internal_error(&why), era)))
            }
        }
    }
}

fn not_found(id: &Id, method: &str) -> String {
    rpc::error(
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

/// The answer to a request whose params the JSON decoder cannot read: for `tools/call` a tool
/// error (SPEC §10: argument errors are tool errors), for anything else `-32602`. (Its
/// envelope cannot be read either: it is answered the legacy way.)
pub(super) fn unreadable(id: &Id, method: &str, why: &str) -> String {
    if method == "tools/call" {
        tool_result(
            id,
            json!({"success": false, "error": format!(
                "the arguments cannot be read ({why}): values nested deeper than 128 levels and \
                 numbers beyond the range of a 64-bit float are not accepted"
            )}),
            Era::Legacy,
        )
    } else {
        rpc::error(
            Some(id),
            code::INVALID_PARAMS,
            format!("invalid params: params cannot be read: {why}"),
        )
    }
}

/// The tool result of a call that failed inside the server (a handler that panicked, no worker
/// to run it): a tool error, since the request itself was fine.
fn internal_error(why: &str) -> Value {
    json!({
        "success": false,
        "error": format!("internal error in the MCP server ({why}); the call did not complete, the server carries on"),
        "internal_error": true,
    })
}

/// The tool a `tools/call` names, if it names one.
fn called_tool(params: &Value) -> Option<Tool> {
    Tool::from_name(params.get("name")?.as_str()?)
}

/// `tools/call` params: the tool and its arguments (`{}` when absent). A missing name or an
/// unknown tool is a protocol error; bad arguments are the tool's to report.
fn tool_call_params(params: &Value) -> Result<(Tool, Value), String> {
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return Err("invalid params: tools/call needs a string \"name\"".into());
    };
    let Some(tool) = Tool::from_name(name) else {
        return Err(format!(
            "invalid params: unknown tool {}; the tools are {}",
            quoted(name),
            Tool::names()
        ));
    };
    let args = match params.get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(a) => a.clone(),
    };
    Ok((tool, args))
}

/// A tool's JSON as an MCP tool result (text content, `structuredContent`, `isError`, and for
/// 2026-07-28 `resultType` and server info), as one line of JSON text.
pub(super) fn tool_result(id: &Id, out: Value, era: Era) -> String {
    let is_error = out.get("success") == Some(&Value::Bool(false));
    rpc::result(
        id,
        &protocol::finish(
            era,
            json!({
                "content": [{"type": "text", "text": out.to_string()}],
                "structuredContent": out,
                "isError": is_error,
            }),
        ),
    )
}

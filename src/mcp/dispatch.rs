//! What each request means: the answer to every MCP method, and which requests are answered on
//! the reading thread and which go to the worker pool (`pool`). `tools/call` runs through the
//! tool table (`tools::table::dispatch`), with this server as its host (`handlers`).

use std::sync::Arc;

use serde_json::{Value, json};

use super::notify::{self, Level};
use super::pool::{Refused, STDIO};
use super::rpc::{self, Id, IdKey, code};
use super::{Inner, MAX_IN_FLIGHT, PROTOCOL_VERSIONS};
use crate::cancel::CancelToken;
use crate::tools::table::{self, Tool};

impl Inner {
    /// Handles a notification from the client of `scope` (see `pool::Key`):
    /// `notifications/cancelled` cancels the request it names (compared as JSON-RPC compares
    /// ids: see `rpc`); an unknown or finished id is ignored.
    pub(super) fn notification(&self, scope: u64, method: &str, request_id: Option<&IdKey>) {
        if method == "notifications/cancelled"
            && let Some(key) = request_id
            && self.pool.cancel(&(scope, key.clone()))
        {
            log::debug!("request {key:?} cancelled by the client");
        }
    }

    /// The synchronous answer to a request, as one line of JSON text.
    pub(super) fn answer(
        &self,
        id: &Id,
        method: &str,
        params: &Value,
        cancel: &CancelToken,
    ) -> String {
        match method {
            "initialize" => rpc::result(id, &initialize_result(params)),
            "ping" => rpc::result(id, &json!({})),
            "tools/list" => rpc::result(id, &json!({"tools": super::tool_list()})),
            "logging/setLevel" => match params.get("level").and_then(Value::as_str) {
                Some(l) => match Level::parse(l) {
                    Some(level) => {
                        self.notifier.set_level(level);
                        rpc::result(id, &json!({}))
                    }
                    None => rpc::error(
                        Some(id),
                        code::INVALID_PARAMS,
                        format!(
                            "invalid params: unknown level {l:?}; use one of {}",
                            notify::LEVELS.join(", ")
                        ),
                    ),
                },
                None => rpc::error(
                    Some(id),
                    code::INVALID_PARAMS,
                    "invalid params: logging/setLevel needs a string \"level\"",
                ),
            },
            "tools/call" => match tool_call_params(params) {
                Ok((tool, args)) => {
                    tool_result(id, table::dispatch(self, tool, &args, Some(cancel)))
                }
                Err(e) => rpc::error(Some(id), code::INVALID_PARAMS, e),
            },
            other => rpc::error(
                Some(id),
                code::METHOD_NOT_FOUND,
                format!("method not found: {other}"),
            ),
        }
    }

    /// Answers a request from the stdio reading thread: at once (returned), or later from a
    /// worker, which writes it to the output (`None`). See [`Inner::serve_with`].
    pub(super) fn serve(me: &Arc<Self>, id: Id, method: &str, params: &Value) -> Option<String> {
        let writer = Arc::clone(me);
        Inner::serve_with(
            me,
            STDIO,
            id,
            method,
            params,
            Box::new(move |line| {
                if let Some(w) = writer.writer.load_full() {
                    w.send_line(line);
                }
            }),
        )
    }

    /// Answers a request of the client of `scope` (`pool::Key`), on any transport: at once
    /// (returned), or later from a worker, which hands the answer to `reply` (`None`). Every
    /// method but `tools/call`, `browser_snapshot` (the snapshot fast path, or a wait-free read)
    /// and a call the server refuses are answered at once.
    /// A worker's handler that panics is answered with an internal tool error, and its place in
    /// the pool is freed either way (see `pool`). A request cancelled before its answer is ready
    /// gets none: `reply` is dropped uncalled.
    pub(crate) fn serve_with(
        me: &Arc<Self>,
        scope: u64,
        id: Id,
        method: &str,
        params: &Value,
        reply: Box<dyn FnOnce(String) + Send>,
    ) -> Option<String> {
        if let Some(line) = me.snapshot_line(&id, method, params) {
            return Some(line);
        }
        let inline =
            method != "tools/call" || called_tool(params).is_none_or(|tool| tool == Tool::Snapshot);
        if inline {
            return Some(me.answer(&id, method, params, &CancelToken::new()));
        }
        let slot = match me.pool.admit((scope, id.key())) {
            Ok(slot) => slot,
            Err(Refused::Duplicate) => {
                return Some(rpc::error(
                    Some(&id),
                    code::INVALID_REQUEST,
                    "invalid request: a request with this id is still in flight",
                ));
            }
            Err(Refused::Full) => {
                return Some(tool_result(
                    &id,
                    json!({"success": false, "error": format!(
                        "too many tool calls in flight ({MAX_IN_FLIGHT}): wait for one to finish or cancel one, then retry"
                    )}),
                ));
            }
        };
        let worker = Arc::clone(me);
        let (method, params) = (method.to_string(), params.clone());
        let (job_id, reply_id) = (id.clone(), id.clone());
        let ran = me.pool.run(
            slot,
            move |cancel| worker.answer(&job_id, &method, &params, cancel),
            move |outcome, slot| {
                let line = outcome.unwrap_or_else(|panic| {
                    log::error!(
                        "the handler of request {reply_id} panicked: {panic:?}; it is answered \
                         with an internal error and the server carries on"
                    );
                    tool_result(&reply_id, internal_error(&panic))
                });
                if slot.release() {
                    log::debug!("request {reply_id} was cancelled: no response");
                } else {
                    reply(line);
                }
            },
        );
        match ran {
            Ok(()) => None,
            Err(why) => {
                log::error!("{why}");
                Some(tool_result(&id, internal_error(&why)))
            }
        }
    }
}

fn initialize_result(params: &Value) -> Value {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = match asked {
        Some(v) if PROTOCOL_VERSIONS.contains(&v) => v,
        // 2025-03-26 clients also speak 2024-11-05, and that version has no batches either.
        Some("2025-03-26") => "2024-11-05",
        _ => PROTOCOL_VERSIONS[0],
    };
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}, "logging": {}},
        "serverInfo": {
            "name": "cdp-supervisor",
            "title": "CDP supervisor: JS dialogs, frames and raw CDP",
            "version": env!("CARGO_PKG_VERSION")
        },
        "instructions": "Call browser_connect first (without cdp_url it launches a local headless Chromium and opens a tab for the task). Every tool result lists pending_dialogs: a JS dialog blocks the page until browser_dialog answers it, and browser_cdp calls it blocks fail at once with blocked_by_dialog."
    })
}

/// The answer to a request whose params the JSON decoder cannot read: for `tools/call` a tool
/// error (SPEC §10: argument errors are tool errors), for anything else `-32602`.
pub(super) fn unreadable(id: &Id, method: &str, why: &str) -> String {
    if method == "tools/call" {
        tool_result(
            id,
            json!({"success": false, "error": format!(
                "the arguments cannot be read ({why}): values nested deeper than 128 levels and \
                 numbers beyond the range of a 64-bit float are not accepted"
            )}),
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
            "invalid params: unknown tool {name:?}; the tools are {}",
            Tool::names()
        ));
    };
    let args = match params.get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(a) => a.clone(),
    };
    Ok((tool, args))
}

/// A tool's JSON as an MCP tool result (text content, `structuredContent`, `isError`), as one
/// line of JSON text.
pub(super) fn tool_result(id: &Id, out: Value) -> String {
    let is_error = out.get("success") == Some(&Value::Bool(false));
    rpc::result(
        id,
        &json!({
            "content": [{"type": "text", "text": out.to_string()}],
            "structuredContent": out,
            "isError": is_error,
        }),
    )
}

//! The Model Context Protocol server (SPEC §15): JSON-RPC 2.0 over stdio, one message per line.
//! [`McpServer::run`] is the main loop: it reads lines, answers the quick methods itself and
//! hands every other `tools/call` to a bounded pool of workers.
//!
//! * **Concurrency.** `initialize`, `ping`, `tools/list`, `logging/setLevel` and
//!   `browser_snapshot` (a wait-free snapshot read) are answered on the reading thread; the other
//!   tools run on at most [`MAX_IN_FLIGHT`] worker threads, spawned as needed. A call beyond that
//!   is answered at once with a tool error, never queued. Every response and notification goes
//!   through one `rpc::Writer` as one whole line. So a `browser_cdp` blocked on the page never
//!   delays a `ping` or the `browser_dialog` that would unblock it.
//! * **Cancellation.** `notifications/cancelled {requestId}` cancels that call's
//!   [`CancelToken`]: a `browser_cdp` abandons its CDP call; a `browser_connect` stops its start
//!   at once wherever it is (launching the browser, connecting, attaching) and leaves nothing
//!   behind (no supervisor, no tab it created: see
//!   [`SupervisorRegistry::get_or_start_cancellable`]). The request gets no response at all. An
//!   unknown or finished id is ignored. `requestId` names a request the way JSON-RPC compares
//!   ids (`rpc`: `7`, `7.0` and `0.7e1` are one id, `"7"` is another).
//! * **Strict JSON-RPC 2.0** (see `rpc::classify`): `"jsonrpc": "2.0"` is required, responses
//!   from the client are not answered, a line longer than [`MAX_LINE`] is skipped in bounded
//!   memory, batches are refused: none of the [`PROTOCOL_VERSIONS`] has them (2025-03-26, the
//!   only MCP version with batches, is not offered; a client asking for it is offered 2024-11-05).
//!   Ids are echoed byte for byte as sent (`18446744073709551616`, `-0`, `"\ud800"`); an id that
//!   is not a string or a number gets `-32600` with id `null`. A second request with the id of
//!   one still running on a worker gets `-32600` (with its id).
//! * **Hostile arguments** cannot disable the server (SPEC §14): every argument error is a tool
//!   error, a `task_id` is checked before anything uses it
//!   ([`SupervisorRegistry::check_task_id`]), and each worker call holds its place in the pool
//!   through a guard (`pool`): a handler that panics is caught, logged and answered with an
//!   internal tool error (`isError: true`, `"internal_error": true`), and its place and its
//!   worker thread are kept usable.
//! * **Logging.** `logging` is declared; `notifications/message` reports dialogs opening and
//!   closing without the agent, lost and regained connections, ended supervisors (`notify`).
//! * **Shutdown** ([`McpServer::shutdown`]: end of input, or the binary's signal handler):
//!   in-flight calls are cancelled and get no response, every supervisor is stopped (pending
//!   dialogs dismissed, tabs the server opened closed), the launched browser is closed
//!   gracefully and its profile removed.

mod browser;
mod handlers;
mod notify;
mod pool;
mod rpc;
mod schema;

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

pub use schema::tool_list;

use crate::cancel::CancelToken;
use crate::config::Config;
use crate::registry::SupervisorRegistry;
use browser::BrowserSlot;
use notify::{Level, Notifier};
use pool::{Pool, Refused};
use rpc::{Id, IdKey, Incoming, Line, LineReader, Writer, code};

/// MCP protocol versions we speak, newest first. None of them has JSON-RPC batches.
pub const PROTOCOL_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2024-11-05"];

/// Longest line accepted from the client; a longer one is skipped and answered with an error.
pub const MAX_LINE: usize = 16 << 20;

/// Most tool calls running on workers at once.
pub const MAX_IN_FLIGHT: usize = 16;

/// Stack size of worker threads (tool handlers parse and build JSON, nothing deep).
const WORKER_STACK: usize = 512 * 1024;

/// One MCP server: a registry, the browser it launched, its workers and its client's output.
#[derive(Debug)]
pub struct McpServer {
    inner: Arc<Inner>,
}

/// What the reading thread, the workers and the watchers share.
pub(crate) struct Inner {
    registry: Arc<SupervisorRegistry>,
    browser: BrowserSlot,
    notifier: Arc<Notifier>,
    /// The output while `run` serves; `None` in the line-by-line API. Set by `run`.
    writer: arc_swap::ArcSwapOption<Writer>,
    /// The tool calls running on workers, by the key of their request id, with their cancel
    /// tokens (see `pool`): admitted by the reading thread, freed by the worker that answers
    /// (or, whatever happens, by the request's slot guard).
    pool: Pool,
    /// Set when shutdown starts: nothing new is started.
    closing: AtomicBool,
    /// Held for the whole shutdown; true once it is done (a second caller waits, then returns).
    shut_down: Mutex<bool>,
    /// The last `browser_snapshot` answer, kept with the snapshot it shows (used only by the
    /// reading thread, so never contended).
    snapshot_cache: Mutex<Option<SnapshotText>>,
}

/// A snapshot's `browser_snapshot` result, serialised once: the JSON text of
/// `structuredContent` and the same text escaped as the `text` content's string.
struct SnapshotText {
    /// Held so the pointer comparison can never match a freed and reused allocation.
    snapshot: Arc<crate::snapshot::Snapshot>,
    body: String,
    escaped: String,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("registry", &self.registry)
            .field("browser", &self.browser)
            .field("pool", &self.pool)
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// A server with its own registry.
    pub fn new(config: Config) -> McpServer {
        McpServer {
            inner: Arc::new(Inner {
                registry: Arc::new(SupervisorRegistry::new(config)),
                browser: BrowserSlot::default(),
                notifier: Arc::new(Notifier::new()),
                writer: arc_swap::ArcSwapOption::empty(),
                pool: Pool::new(MAX_IN_FLIGHT, WORKER_STACK),
                closing: AtomicBool::new(false),
                shut_down: Mutex::new(false),
                snapshot_cache: Mutex::new(None),
            }),
        }
    }

    /// The registry (for embedding and tests).
    pub fn registry(&self) -> &Arc<SupervisorRegistry> {
        &self.inner.registry
    }

    /// Serves `input` line by line until it ends (or [`McpServer::shutdown`] is called and the
    /// next line arrives), writing answers and notifications to `output`, then shuts down.
    pub fn run(
        &self,
        input: impl BufRead,
        output: impl Write + Send + 'static,
    ) -> std::io::Result<()> {
        let writer = Arc::new(Writer::new(Box::new(output)));
        self.inner.writer.store(Some(Arc::clone(&writer)));
        self.inner.notifier.set_writer(Some(Arc::clone(&writer)));
        let mut lines = LineReader::new(input, MAX_LINE);
        let result = loop {
            if self.inner.closing.load(Ordering::Acquire) {
                break Ok(());
            }
            match lines.next_line() {
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
                Ok(Some(Line::TooLong)) => {
                    writer.send_line(rpc::error(
                        None,
                        code::PARSE_ERROR,
                        format!("message too large: lines are limited to {MAX_LINE} bytes"),
                    ));
                }
                Ok(Some(Line::Text(line))) => match rpc::classify(&line) {
                    None | Some(Incoming::Response) => {}
                    Some(Incoming::Invalid(answer)) => {
                        writer.send_line(answer);
                    }
                    Some(Incoming::Unreadable { id, method, why }) => {
                        writer.send_line(unreadable(&id, &method, &why));
                    }
                    Some(Incoming::Notification {
                        method, request_id, ..
                    }) => self.inner.notification(&method, request_id.as_ref()),
                    Some(Incoming::Request { id, method, params }) => {
                        if let Some(line) = self.inner.snapshot_line(&id, &method, &params) {
                            writer.send_line(line);
                        } else if let Some(answer) = Inner::serve(&self.inner, id, &method, &params)
                        {
                            writer.send_line(answer);
                        }
                    }
                },
            }
        };
        self.shutdown();
        result
    }

    /// Answers one line synchronously (`None` for notifications, client responses and blank
    /// lines); tool calls run on the calling thread. For embedding and in-process tests. The
    /// answer is parsed into a [`Value`], so a numeric id beyond `f64` precision is rounded
    /// there: [`McpServer::handle_line_text`] gives the exact text.
    pub fn handle_line(&self, line: &str) -> Option<Value> {
        serde_json::from_str(&self.handle_line_text(line)?).ok()
    }

    /// [`McpServer::handle_line`], answering with the exact JSON text the server would write
    /// (one line, without its newline): the request's id byte for byte as sent.
    pub fn handle_line_text(&self, line: &str) -> Option<String> {
        match rpc::classify(line.as_bytes())? {
            Incoming::Response => None,
            Incoming::Invalid(answer) => Some(answer),
            Incoming::Unreadable { id, method, why } => Some(unreadable(&id, &method, &why)),
            Incoming::Notification {
                method, request_id, ..
            } => {
                self.inner.notification(&method, request_id.as_ref());
                None
            }
            Incoming::Request { id, method, params } => {
                Some(
                    self.inner
                        .answer(&id, &method, &params, &CancelToken::new()),
                )
            }
        }
    }

    /// Ends the server (idempotent; a concurrent caller waits until it is done): calls in flight
    /// are cancelled and get no response, nothing more is written, every supervisor is stopped
    /// (in parallel, each within about 1 s) and the launched browser is closed (SIGTERM, SIGKILL
    /// after 1 s) with its profile removed.
    pub fn shutdown(&self) {
        let inner = &self.inner;
        let mut done = inner.shut_down.lock().unwrap_or_else(|e| e.into_inner());
        if *done {
            return;
        }
        inner.closing.store(true, Ordering::Release);
        inner.notifier.close();
        inner.pool.cancel_all();
        if let Some(w) = inner.writer.swap(None) {
            w.close();
        }
        inner.notifier.set_writer(None);
        let stops: Vec<_> = inner
            .registry
            .tasks()
            .into_iter()
            .filter_map(|task| {
                let registry = Arc::clone(&inner.registry);
                std::thread::Builder::new()
                    .name("mcp-stop".into())
                    .stack_size(256 * 1024)
                    .spawn(move || registry.stop(&task))
                    .ok()
            })
            .collect();
        for s in stops {
            let _ = s.join();
        }
        inner.registry.stop_all();
        inner.browser.close(Duration::from_secs(1));
        *done = true;
    }
}

impl Drop for McpServer {
    fn drop(&mut self) {
        self.shutdown();
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

impl Inner {
    /// The whole answer line of a plain `tools/call browser_snapshot` of a live task, built from
    /// the snapshot's JSON text, which is serialised once per published snapshot. `None`
    /// for anything else (other requests, unusual arguments, no live supervisor): the general
    /// path answers those, with the same result.
    fn snapshot_line(&self, id: &Id, method: &str, params: &Value) -> Option<String> {
        if method != "tools/call" || params.get("name")?.as_str()? != "browser_snapshot" {
            return None;
        }
        let task = match params.get("arguments") {
            None | Some(Value::Null) => "default",
            Some(Value::Object(a)) => match (a.len(), a.get("task_id")) {
                (0, _) => "default",
                (1, Some(Value::String(t))) if SupervisorRegistry::check_task_id(t).is_ok() => {
                    t.as_str()
                }
                _ => return None,
            },
            Some(_) => return None,
        };
        let sup = self.registry.get(task)?;
        if !sup.is_alive() {
            return None;
        }
        let snap = sup.snapshot();
        let mut cache = self
            .snapshot_cache
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let fresh = cache
            .as_ref()
            .is_some_and(|c| Arc::ptr_eq(&c.snapshot, &snap));
        if !fresh {
            let mut v = snap.to_json();
            v["success"] = json!(true);
            let body = v.to_string();
            let escaped = Value::String(body.clone()).to_string();
            *cache = Some(SnapshotText {
                snapshot: snap,
                body,
                escaped,
            });
        }
        let c = cache.as_ref()?;
        Some(format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{"content":[{{"type":"text","text":{}}}],"structuredContent":{},"isError":false}}}}"#,
            id.raw(),
            c.escaped,
            c.body
        ))
    }

    /// Handles a notification from the client: `notifications/cancelled` cancels the request
    /// it names (compared as JSON-RPC compares ids: see `rpc`); an unknown or finished id is
    /// ignored.
    fn notification(&self, method: &str, request_id: Option<&IdKey>) {
        if method == "notifications/cancelled"
            && let Some(key) = request_id
            && self.pool.cancel(key)
        {
            log::debug!("request {key:?} cancelled by the client");
        }
    }

    /// The synchronous answer to a request, as one line of JSON text.
    fn answer(
        self: &Arc<Self>,
        id: &Id,
        method: &str,
        params: &Value,
        cancel: &CancelToken,
    ) -> String {
        match method {
            "initialize" => rpc::result(id, &initialize_result(params)),
            "ping" => rpc::result(id, &json!({})),
            "tools/list" => rpc::result(id, &json!({"tools": tool_list()})),
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
                Ok((name, args)) => tool_result(id, handlers::call(self, name, &args, cancel)),
                Err(e) => rpc::error(Some(id), code::INVALID_PARAMS, e),
            },
            other => rpc::error(
                Some(id),
                code::METHOD_NOT_FOUND,
                format!("method not found: {other}"),
            ),
        }
    }

    /// Answers a request from the reading thread: at once (returned), or later from a worker
    /// (`None`). A worker's handler that panics is answered with an internal tool error, and
    /// its place in the pool is freed either way (see `pool`).
    fn serve(me: &Arc<Self>, id: Id, method: &str, params: &Value) -> Option<String> {
        let inline = method != "tools/call"
            || match tool_call_params(params) {
                Ok((name, _)) => name == "browser_snapshot" || !handlers::is_tool(name),
                Err(_) => true,
            };
        if inline {
            return Some(me.answer(&id, method, params, &CancelToken::new()));
        }
        let slot = match me.pool.admit(id.key()) {
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
        let (worker, done) = (Arc::clone(me), Arc::clone(me));
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
                } else if let Some(w) = done.writer.load_full() {
                    w.send_line(line);
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

/// The answer to a request whose params the JSON decoder cannot read: for `tools/call` a tool
/// error (SPEC §10: argument errors are tool errors), for anything else `-32602`.
fn unreadable(id: &Id, method: &str, why: &str) -> String {
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

/// `tools/call` params: the tool name and its arguments (`{}` when absent). A missing name or an
/// unknown tool is a protocol error; bad arguments are the tool's to report.
fn tool_call_params(params: &Value) -> Result<(&str, Value), String> {
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return Err("invalid params: tools/call needs a string \"name\"".into());
    };
    if !handlers::is_tool(name) {
        return Err(format!(
            "invalid params: unknown tool {name:?}; the tools are browser_connect, browser_snapshot, browser_dialog, browser_cdp, browser_disconnect"
        ));
    }
    let args = match params.get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(a) => a.clone(),
    };
    Ok((name, args))
}

/// A tool's JSON as an MCP tool result (text content, `structuredContent`, `isError`), as one
/// line of JSON text.
fn tool_result(id: &Id, out: Value) -> String {
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

#[cfg(all(test, feature = "fake-browser"))]
mod tests {
    use super::*;

    #[test]
    fn the_snapshot_fast_path_answers_exactly_what_the_general_path_does() {
        let fake = crate::fake::FakeBrowser::start().expect("fake browser");
        let server = McpServer::new(Config::default());
        let inner = &server.inner;
        inner
            .registry
            .get_or_start("t", &fake.ws_url())
            .expect("attach");
        let id = Id::parse("7");
        let params = json!({"name": "browser_snapshot", "arguments": {"task_id": "t"}});
        let check = || {
            let fast = inner
                .snapshot_line(&id, "tools/call", &params)
                .expect("the fast path serves a live task");
            let fast: Value = serde_json::from_str(&fast).expect("one JSON message");
            let general = inner.answer(&id, "tools/call", &params, &CancelToken::new());
            // Both as the client reads them: from their JSON text.
            let general: Value = serde_json::from_str(&general).expect("one JSON message");
            assert_eq!(fast, general);
        };
        check();
        check(); // from the cache
        fake.open_dialog("alert", "new state", "");
        let sup = inner.registry.get("t").expect("live");
        sup.wait_for(Duration::from_secs(5), |s| !s.pending_dialogs.is_empty())
            .expect("the dialog is published");
        check(); // a new snapshot is serialised again
        // Arguments it does not handle go to the general path.
        let odd = json!({"name": "browser_snapshot", "arguments": {"task_id": "t", "x": 1}});
        assert!(inner.snapshot_line(&id, "tools/call", &odd).is_none());
        assert!(inner.snapshot_line(&id, "ping", &json!({})).is_none());
        let unknown = json!({"name": "browser_snapshot", "arguments": {"task_id": "nobody"}});
        assert!(inner.snapshot_line(&id, "tools/call", &unknown).is_none());
    }
}

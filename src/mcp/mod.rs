//! The Model Context Protocol server (SPEC §15): JSON-RPC 2.0 over stdio, one message per line,
//! in both protocol generations on one process: 2026-07-28 (stateless, every request carries
//! its version in `_meta`) and the handshake revisions 2025-11-25, 2025-06-18, 2024-11-05
//! (`protocol`). [`McpServer::run`] is the main loop: it reads lines, answers the quick
//! methods itself and hands every other `tools/call` to a bounded pool of workers.
//!
//! * **Concurrency.** `initialize`, `server/discover`, `ping`, the lists, `resources/read`,
//!   `subscriptions/listen`, `logging/setLevel` and `browser_snapshot` (a wait-free snapshot
//!   read) are answered on the reading thread; the other tools run on at most
//!   [`MAX_IN_FLIGHT`] worker threads, spawned as needed. A call beyond that is answered at
//!   once with a tool error, never queued. Every response and notification goes through one
//!   `rpc::Writer` as one whole line. So a `browser_cdp` blocked on the page never delays a
//!   `ping` or the `browser_dialog` that would unblock it.
//! * **Cancellation.** `notifications/cancelled {requestId}` cancels that call's
//!   [`CancelToken`]: a `browser_cdp` abandons its CDP call; a `browser_connect` stops its start
//!   at once wherever it is (launching the browser, connecting, attaching) and leaves nothing
//!   behind (no supervisor, no tab it created: see
//!   [`SupervisorRegistry::get_or_start_cancellable`]). The request gets no response at all. It
//!   also ends a `subscriptions/listen` stream (no response either). An unknown or finished id
//!   is ignored. `requestId` names a request the way JSON-RPC compares ids (`rpc`: `7`, `7.0`
//!   and `0.7e1` are one id, `"7"` is another).
//! * **Strict JSON-RPC 2.0** (see `rpc::classify`): `"jsonrpc": "2.0"` is required, responses
//!   from the client are not answered, a line longer than [`MAX_LINE`] is skipped in bounded
//!   memory, batches are refused: none of the versions we speak has them (2025-03-26, the only
//!   MCP version with batches, is not offered; a client asking for it is offered 2024-11-05).
//!   Ids are echoed byte for byte as sent (`18446744073709551616`, `-0`, `"\ud800"`); an id that
//!   is not a string or a number gets `-32600` with id `null`. A second request with the id of
//!   one still running on a worker (or of an open listen stream) gets `-32600` (with its id).
//! * **Hostile arguments** cannot disable the server (SPEC §14): every argument error is a tool
//!   error, a `task_id` is checked before anything uses it
//!   ([`SupervisorRegistry::check_task_id`]), and each worker call holds its place in the pool
//!   through a guard (`pool`): a handler that panics is caught, logged and answered with an
//!   internal tool error (`isError: true`, `"internal_error": true`), and its place and its
//!   worker thread are kept usable.
//! * **Events** (`notify`): a legacy session (after `initialize`) gets `notifications/message`
//!   when a dialog opens or closes without the agent, a connection is lost or regained, a
//!   supervisor ends; a 2026-07-28 client gets them as `notifications/resources/updated` of the
//!   task's resource on a `subscriptions/listen` stream (`listen`, `resources`), and as
//!   request-scoped `notifications/message` when a request asks with
//!   `_meta["io.modelcontextprotocol/logLevel"]`. Every tool result also lists the pending
//!   dialogs.
//! * **Shutdown** ([`McpServer::shutdown`]: end of input, or the binary's signal handler):
//!   open listen streams get their response, in-flight calls are cancelled and get no
//!   response, every supervisor is stopped (pending dialogs dismissed, tabs the server opened
//!   closed), the launched browser is closed gracefully and its profile removed.
//!
//! Layout: this file is the server and its reading loop; `exchange` is the seam every
//! transport uses (what it hands over with a request, what it gets back); `protocol` the two
//! generations and the `_meta` envelope; `dispatch` says what each request means and which
//! ones go to the workers of `pool`; `fast_path` answers `browser_snapshot` from a cached
//! serialisation; the tools themselves are the crate's one tool table (`tools::table`), and
//! `handlers` is this server's part of them (`browser_connect`, `browser_disconnect`);
//! `resources` the tasks as resources, `listen` the `subscriptions/listen` streams; `rpc` is
//! the JSON-RPC framing, `notify` the events and the watchers, `browser` the browser the
//! server launches; [`http`] serves the same server over Streamable HTTP
//! (`cdp-supervisor mcp --http`), through `exchange` like stdio.

#[path = "../tools/browser.rs"]
mod browser;
#[path = "engine/methods.rs"]
mod dispatch;
#[path = "engine/events.rs"]
mod events;
#[path = "engine.rs"]
mod exchange;
#[path = "engine/fast_path.rs"]
mod fast_path;
#[path = "../tools/connect.rs"]
mod handlers;
pub mod http;
#[path = "engine/listen.rs"]
mod listen;
#[path = "engine/notify.rs"]
mod notify;
#[path = "engine/pool.rs"]
mod pool;
#[path = "engine/protocol.rs"]
mod protocol;
#[path = "engine/resources.rs"]
mod resources;
mod rpc;

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::cancel::CancelToken;
use crate::config::Config;
use crate::registry::SupervisorRegistry;
use crate::tools::table::Tool;
use browser::BrowserSlot;
use dispatch::unreadable;
use exchange::{Exchange, LegacySession, Sink, Transport};
use fast_path::SnapshotCache;
use notify::Notifier;
use pool::Pool;
use rpc::{Incoming, Line, LineReader, Writer, code};

pub use protocol::{LEGACY_VERSIONS, MODERN_VERSIONS, SUPPORTED_VERSIONS};

/// MCP protocol versions we speak, newest first: 2026-07-28 (stateless, per-request `_meta`)
/// and the handshake revisions. None of them has JSON-RPC batches.
pub const PROTOCOL_VERSIONS: &[&str] = SUPPORTED_VERSIONS;

/// Longest line accepted from the client; a longer one is skipped and answered with an error.
pub const MAX_LINE: usize = 16 << 20;

/// Most tool calls running on workers at once.
pub const MAX_IN_FLIGHT: usize = 16;

/// The channel number of stdio (its one client) in [`exchange::Exchange`].
const STDIO_CHANNEL: u64 = pool::STDIO;

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
    /// The legacy session of stdio: the process (what `initialize` negotiated, the log level).
    stdio_session: Arc<LegacySession>,
    /// The tool calls running on workers, by the key of their request id, with their cancel
    /// tokens (see `pool`): admitted by the reading thread, freed by the worker that answers
    /// (or, whatever happens, by the request's slot guard).
    pool: Pool,
    /// Set when shutdown starts: nothing new is started.
    closing: AtomicBool,
    /// Held for the whole shutdown; true once it is done (a second caller waits, then returns).
    shut_down: Mutex<bool>,
    /// The snapshot fast path's last answer (`fast_path`).
    snapshot_cache: SnapshotCache,
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

/// The `tools/list` entries: one per tool of the table, with its title, annotations, input
/// schema (a description on every property) and output schema.
pub fn tool_list() -> Value {
    Value::Array(Tool::ALL.map(Tool::list_entry).to_vec())
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
                stdio_session: Arc::new(LegacySession::default()),
                pool: Pool::new(MAX_IN_FLIGHT, WORKER_STACK),
                closing: AtomicBool::new(false),
                shut_down: Mutex::new(false),
                snapshot_cache: SnapshotCache::default(),
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
        let stdio = Exchange {
            transport: Transport::Stdio,
            channel: STDIO_CHANNEL,
            legacy: Some(Arc::clone(&self.inner.stdio_session)),
            stream: Some(Arc::clone(&writer) as Arc<dyn Sink>),
        };
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
                    }) => self
                        .inner
                        .notification(STDIO_CHANNEL, &method, request_id.as_ref()),
                    Some(Incoming::Request { id, method, params }) => {
                        if let Some(answer) =
                            Inner::serve(&self.inner, id, &method, &params, &stdio)
                        {
                            answer.write_to(&*writer);
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
                self.inner
                    .notification(STDIO_CHANNEL, &method, request_id.as_ref());
                None
            }
            Incoming::Request { id, method, params } => {
                // No output to stream to: no listen streams, no notifications.
                let x = Exchange {
                    transport: Transport::Stdio,
                    channel: STDIO_CHANNEL,
                    legacy: Some(Arc::clone(&self.inner.stdio_session)),
                    stream: None,
                };
                self.inner
                    .answer(&id, &method, &params, &x, &CancelToken::new())
                    .line
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
        // Listen streams get their response while the output still takes it.
        inner.notifier.close();
        inner.pool.cancel_all();
        if let Some(w) = inner.writer.swap(None) {
            w.close();
        }
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

//! The Model Context Protocol server (SPEC §15): JSON-RPC 2.0 over stdio, one message per line,
//! in both protocol generations on one process: 2026-07-28 (stateless, every request carries
//! its version in `_meta`) and the handshake revisions 2025-11-25, 2025-06-18, 2024-11-05
//! (`engine/protocol.rs`). [`McpServer::run`] is the stdio transport's loop: it reads lines, answers the
//! quick methods itself and hands every other `tools/call` to a bounded pool of workers.
//!
//! * **Concurrency.** `initialize`, `server/discover`, `ping`, the lists, `resources/read`,
//!   `subscriptions/listen`, `logging/setLevel` and `browser_snapshot` (a wait-free snapshot
//!   read) are answered on the reading thread; the other tools run on at most
//!   [`MAX_IN_FLIGHT`] worker threads, spawned as needed. A call beyond that is answered at
//!   once with a tool error, never queued. Every response and notification goes through one
//!   `stdio::Writer` as one whole line. So a `browser_cdp` blocked on the page never delays a
//!   `ping` or the `browser_dialog` that would unblock it.
//! * **Cancellation.** `notifications/cancelled {requestId}` cancels that call's
//!   [`CancelToken`](crate::CancelToken): a `browser_cdp` abandons its CDP call; a
//!   `browser_connect` stops its start at once wherever it is (launching the browser,
//!   connecting, attaching) and leaves nothing behind (no supervisor, no tab it created: see
//!   [`StartRequest::with_cancel`](crate::StartRequest::with_cancel)). The request gets no response at all. It
//!   also ends a `subscriptions/listen` stream (no response either). An unknown or finished id
//!   is ignored. `requestId` names a request the way JSON-RPC compares ids (`rpc`: `7`, `7.0`
//!   and `0.7e1` are one id, `"7"` is another).
//! * **Strict JSON-RPC 2.0** (see `rpc::classify`): `"jsonrpc": "2.0"` is required, responses
//!   from the client are not answered, a line longer than [`MAX_LINE`] is skipped in bounded
//!   memory (`stdio`), batches are refused: none of the versions we speak has them
//!   (2025-03-26, the only MCP version with batches, is not offered; a client asking for it is
//!   offered 2024-11-05).
//!   Ids are echoed byte for byte as sent (`18446744073709551616`, `-0`, `"\ud800"`); an id that
//!   is not a string or a number gets `-32600` with id `null`. A second request with the id of
//!   one still running on a worker (or of an open listen stream) gets `-32600` (with its id).
//! * **Hostile arguments** cannot disable the server (SPEC §14): every argument error is a tool
//!   error, a `task_id` is checked before anything uses it
//!   ([`SupervisorRegistry::check_task_id`]), and each worker call holds its place in the pool
//!   through a guard (`engine/pool.rs`): a handler that panics is caught, logged and answered
//!   with an internal tool error (`isError: true`, `"internal_error": true`), and its place and
//!   its worker thread are kept usable.
//! * **Events** (`engine/notify.rs`): a legacy session (after `initialize`) gets
//!   `notifications/message` when a dialog opens or closes without the agent, a connection is
//!   lost or regained, a supervisor ends; a 2026-07-28 client gets them as
//!   `notifications/resources/updated` of the task's resource on a `subscriptions/listen`
//!   stream (`engine/listen.rs`, `engine/resources.rs`), and as request-scoped
//!   `notifications/message` when a request asks with
//!   `_meta["io.modelcontextprotocol/logLevel"]`. Every tool result also lists the pending
//!   dialogs.
//! * **Shutdown** ([`McpServer::shutdown`]: end of input, or the binary's signal handler):
//!   open listen streams get their response, in-flight calls are cancelled and get no
//!   response, every supervisor is stopped (pending dialogs dismissed, tabs the server opened
//!   closed), the launched browser is closed gracefully and its profile removed.
//!
//! Layout: this file is the server's public face; `engine` is the one seam between a transport
//! and the protocol (`engine::Engine`: the only methods a transport calls), with
//! everything behind it in `engine/` (what each method means, the protocol generations, the
//! worker pool, the snapshot fast path, the events, the listen streams, the tasks as
//! resources); `rpc` is the JSON-RPC message format every transport frames with; the two
//! transports are `stdio` ([`McpServer::run`]) and [`http`] (`cdp-supervisor mcp --http`). The
//! tools themselves are the crate's one tool table (`tools::table`), which the engine runs
//! every `tools/call` through.

mod engine;
pub mod http;
mod rpc;
mod stdio;

use std::sync::Arc;

use serde_json::Value;

use crate::config::Config;
use crate::registry::SupervisorRegistry;
use crate::tools::table::Tool;
use engine::{Engine, LegacySession};
use stdio::Writer;

pub use engine::{LEGACY_VERSIONS, MAX_IN_FLIGHT, MAX_LINE, MODERN_VERSIONS, SUPPORTED_VERSIONS};

/// MCP protocol versions we speak, newest first: 2026-07-28 (stateless, per-request `_meta`)
/// and the handshake revisions. None of them has JSON-RPC batches.
pub const PROTOCOL_VERSIONS: &[&str] = SUPPORTED_VERSIONS;

/// One MCP server: its engine (a registry, the browser it launched, its workers) and what its
/// stdio transport keeps.
#[derive(Debug)]
pub struct McpServer {
    engine: Arc<Engine>,
    /// stdio's output while [`McpServer::run`] serves; `None` in the line-by-line API.
    writer: arc_swap::ArcSwapOption<Writer>,
    /// stdio's legacy session: the process (what `initialize` negotiated, the log level).
    session: Arc<LegacySession>,
    /// stdio's channel (`Engine::channel`).
    channel: u64,
}

/// The `tools/list` entries: one per tool of the table, with its title, annotations, input
/// schema (a description on every property) and output schema.
pub fn tool_list() -> Value {
    Tool::list()
}

impl McpServer {
    /// A server with its own registry.
    pub fn new(config: Config) -> McpServer {
        let engine = Arc::new(Engine::new(config));
        let channel = engine.channel();
        McpServer {
            engine,
            writer: arc_swap::ArcSwapOption::empty(),
            session: Arc::new(LegacySession::default()),
            channel,
        }
    }

    /// The registry (for embedding and tests).
    pub fn registry(&self) -> &Arc<SupervisorRegistry> {
        self.engine.registry()
    }

    /// Tool calls in flight and `subscriptions/listen` streams open (for tests, through
    /// `unversioned::mcp`).
    pub(crate) fn in_flight(&self) -> (usize, usize) {
        (self.engine.calls_in_flight(), self.engine.streams_open())
    }

    /// Ends the server (idempotent; a concurrent caller waits until it is done): calls in flight
    /// are cancelled and get no response, nothing more is written, every supervisor is stopped
    /// (in parallel, each within about 1 s) and the launched browser is closed (SIGTERM, SIGKILL
    /// after 1 s) with its profile removed.
    pub fn shutdown(&self) {
        self.engine.shutdown(|| {
            if let Some(w) = self.writer.swap(None) {
                w.close();
            }
        });
    }
}

impl Drop for McpServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

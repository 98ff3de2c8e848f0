//! The seam between a transport and the protocol: what a transport hands over with each request
//! ([`Exchange`]), and what it gets back ([`Answer`]). The protocol (`dispatch`, `protocol`)
//! never touches a socket or a pipe; stdio (`mod.rs`) and Streamable HTTP both drive it through
//! this file.
//!
//! # How a transport serves a request
//!
//! 1. Frame and classify the message (`rpc::classify`, which keeps the id's raw text).
//! 2. Notifications: `Inner::notification(channel, method, request_id)` (cancellation of a call
//!    or of a `subscriptions/listen` stream).
//! 3. Requests: `Inner::answer(&id, method, &params, &exchange, &cancel)`, on any thread. It
//!    returns an [`Answer`]: the notifications that belong on this request's stream before its
//!    response (request-scoped `notifications/message`, only when a 2026-07-28 request opted in
//!    with `_meta["io.modelcontextprotocol/logLevel"]`), then the response line, or no line when
//!    the request opened a `subscriptions/listen` stream (its frames and, at the end, its
//!    response go to [`Exchange::stream`]). Write `before` in order, then `line`.
//!    * stdio writes all of it to the one output; it answers most methods on its reading thread
//!      and runs `tools/call` on the worker pool (`dispatch::serve`).
//!    * HTTP (2026-07-28): one POST, one `answer`; an empty `before` and a line is a JSON body,
//!      a non-empty `before` an SSE stream of `before` then the line. `subscriptions/listen`
//!      needs a stream: pass the POST's SSE writer as [`Exchange::stream`] and keep it open
//!      until a response line arrives on it (graceful end) or the client goes away (call
//!      `Inner::end_listen` then).
//!    * HTTP (legacy): the session's [`LegacySession`] in [`Exchange::legacy`]; `initialize`
//!      answered without one creates nothing, so create the session first.
//! 4. [`Exchange::transport`] names the task rule of the tool table (`Served`, below): on stdio
//!    a call without `task_id` is the task `default`.
//!
//! Every era's rules are the protocol's: a request with the 2026-07-28 `_meta` envelope is
//! served statelessly, `initialize` and requests without an envelope the legacy way (see
//! `protocol`).

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use serde_json::Value;

use super::Inner;
use super::events::Level;
use super::protocol::LEGACY_VERSIONS;
use super::rpc::Writer;
use crate::cancel::CancelToken;
use crate::deadline::Deadline;
use crate::registry::SupervisorRegistry;
use crate::tools::table::{Host, Tool};

/// Which transport a request came by: it decides the task rule (SPEC §15).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transport {
    /// stdio: one client; a call without `task_id` is the task `default`.
    Stdio,
    /// Streamable HTTP: several clients share the server (their task rule is the HTTP
    /// transport's, in `Served::task_id`).
    Http,
}

/// Where a transport writes lines for one client: whole JSON-RPC messages, each written at
/// once (a stdio line, an SSE event). `false` when it can write no more (the client is gone):
/// whoever sent it stops using it.
pub(crate) trait Sink: Send + Sync {
    /// Writes one message (JSON text, no newline).
    fn send_line(&self, line: String) -> bool;

    /// Like [`Sink::send_line`], but gives up at `by` (the shutdown's one budget for every
    /// stream); a sink whose writes cannot block writes as usual.
    fn send_line_by(&self, line: String, by: Deadline) -> bool {
        let _ = by;
        self.send_line(line)
    }
}

impl Sink for Writer {
    fn send_line(&self, line: String) -> bool {
        Writer::send_line(self, line)
    }
}

/// What a legacy session remembers (the stdio process, or one HTTP `Mcp-Session-Id`):
/// the negotiated version and the log level `logging/setLevel` set. Written by the requests of
/// its session, read by the notifier.
#[derive(Debug)]
pub(crate) struct LegacySession {
    /// Index + 1 into [`LEGACY_VERSIONS`] of the version `initialize` negotiated; 0 before.
    version: AtomicUsize,
    /// The least severe `notifications/message` level sent (default `info`).
    min_level: AtomicU8,
}

impl Default for LegacySession {
    fn default() -> LegacySession {
        LegacySession {
            version: AtomicUsize::new(0),
            min_level: AtomicU8::new(Level::INFO.index()),
        }
    }
}

impl LegacySession {
    /// The version `initialize` negotiated, if it ran.
    #[allow(dead_code)] // Read by the HTTP transport (`MCP-Protocol-Version` of a session).
    pub(crate) fn version(&self) -> Option<&'static str> {
        let i = self.version.load(Ordering::Acquire);
        i.checked_sub(1)
            .and_then(|i| LEGACY_VERSIONS.get(i).copied())
    }

    pub(crate) fn set_version(&self, version: &str) {
        if let Some(i) = LEGACY_VERSIONS.iter().position(|v| *v == version) {
            self.version.store(i + 1, Ordering::Release);
        }
    }

    /// The least severe level this session receives.
    pub(crate) fn min_level(&self) -> Level {
        Level::from_index(self.min_level.load(Ordering::Acquire))
    }

    pub(crate) fn set_min_level(&self, level: Level) {
        self.min_level.store(level.index(), Ordering::Release);
    }
}

/// What a transport knows about one request besides its JSON (module doc).
#[derive(Clone)]
pub(crate) struct Exchange {
    /// The transport, for the task rule.
    pub(crate) transport: Transport,
    /// Which client connection of the transport it came on (stdio: 0): a
    /// `notifications/cancelled` cancels a `subscriptions/listen` stream of its own channel only.
    pub(crate) channel: u64,
    /// The legacy session it belongs to, if any (stdio: the process's).
    pub(crate) legacy: Option<Arc<LegacySession>>,
    /// Where this request's notifications can go while it runs, and a `subscriptions/listen`
    /// stream's frames: stdio's output, an HTTP response's SSE stream; `None` when the client
    /// cannot take a stream here (then `subscriptions/listen` is refused).
    pub(crate) stream: Option<Arc<dyn Sink>>,
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchange")
            .field("transport", &self.transport)
            .field("channel", &self.channel)
            .field("legacy", &self.legacy)
            .field("stream", &self.stream.is_some())
            .finish()
    }
}

/// What one request is answered with (module doc).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Answer {
    /// Notifications that belong on the request's stream before its response, in order.
    pub(crate) before: Vec<String>,
    /// The response line; `None` when there is none now (a `subscriptions/listen` stream is
    /// open: its response comes on the stream when it ends).
    pub(crate) line: Option<String>,
}

impl Answer {
    /// Just a response line.
    pub(crate) fn line(line: String) -> Answer {
        Answer {
            before: Vec::new(),
            line: Some(line),
        }
    }

    /// Writes it to `out` (stdio): `before`, then the line.
    pub(crate) fn write_to(self, out: &dyn Sink) {
        for n in self.before {
            out.send_line(n);
        }
        if let Some(l) = self.line {
            out.send_line(l);
        }
    }
}

/// The server as the tool table's host for one transport: its registry and server tools, with
/// the transport's task rule.
pub(crate) struct Served<'a> {
    pub(crate) inner: &'a Inner,
    pub(crate) transport: Transport,
}

impl Host for Served<'_> {
    fn registry(&self) -> &SupervisorRegistry {
        &self.inner.registry
    }

    fn task_id<'a>(&self, tool: Tool, args: &'a Value) -> Result<Cow<'a, str>, Value> {
        match self.transport {
            // SPEC §15: over HTTP the task rule is per client (the HTTP transport's: a
            // `browser_connect` without task_id gets a fresh task, every other tool needs one).
            Transport::Stdio => crate::tools::table::default_task_id(tool, args),
            Transport::Http => super::handlers::task_per_client(tool, args),
        }
    }

    fn run(
        &self,
        tool: Tool,
        task: &str,
        args: &Value,
        cancel: Option<&CancelToken>,
    ) -> Option<Value> {
        self.inner.run_tool(tool, task, args, cancel)
    }
}

//! The MCP engine: the one seam between a transport and the protocol. A transport (stdio:
//! `stdio.rs`; Streamable HTTP: `http/`) frames messages with `rpc` and calls the methods of
//! [`Engine`] below, and nothing else: what each method means (`engine/methods.rs`), the
//! protocol generations (`protocol`), the worker pool (`pool`), the snapshot fast path, the
//! events and the `subscriptions/listen` streams are private to `engine/`.
//!
//! # How a transport serves a message
//!
//! 1. Frame and classify it: `rpc::classify` parses the JSON once and keeps the id as sent.
//! 2. A notification goes to [`Engine::notification`] (`notifications/cancelled` ends a call in
//!    flight or a `subscriptions/listen` stream of the same channel).
//! 3. A request becomes a [`Request`], which decides its era once: 2026-07-28 when its `_meta`
//!    names a protocol version (a broken envelope is refused as the protocol says), legacy
//!    otherwise. [`Engine::serve`] answers it for the [`Client`] it came from: now
//!    ([`Served::Now`]), or from a worker of the pool, which hands its [`Answer`] to the
//!    transport's `reply` ([`Served::Later`]: only a `tools/call` that may wait on the browser).
//!    [`Engine::answer`] answers any request on the calling thread (stdio's line-by-line API;
//!    HTTP's `initialize` and `subscriptions/listen`). A request whose params the JSON decoder
//!    cannot read is answered by [`Engine::unreadable`].
//! 4. An [`Answer`] is what goes on the request's stream before its response (request-scoped
//!    logs a 2026-07-28 request asked for), then the response line: write them in order. It has
//!    no line while a `subscriptions/listen` stream is open: the stream's frames go to
//!    [`Client::stream`], and so does its response, through [`Sink::end`], the one call that
//!    ends a stream. [`Answer::error`] is the line's JSON-RPC error code, when it is an error
//!    (HTTP picks a 2026-07-28 answer's status by it).
//! 5. A client that goes away: [`Engine::cancel`] its call (the key [`Served::Later`] gave),
//!    or [`Engine::forget`] its channel (its calls cancelled, its streams dropped). The end:
//!    [`Engine::shutdown`].
//!
//! [`Client::transport`] decides how a call names its task (`tools::table::Tasks`): on stdio a
//! call without `task_id` is the task `default`; over HTTP, where clients share the server, each
//! names its own (SPEC §15).

mod changes;
mod events;
mod fast_path;
mod listen;
mod methods;
mod notify;
mod pool;
mod protocol;
mod resources;

use crate::sync;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::rpc::{self, Id, IdKey, code};
use crate::cancel::CancelToken;
use crate::config::Config;
use crate::deadline::Deadline;
use crate::launch_slot::BrowserSlot;
use crate::quote::quoted;
use crate::registry::SupervisorRegistry;
use crate::tools::Context;
use crate::tools::table::{self, Tasks, Tool};
use events::Level;
use fast_path::SnapshotCache;
use notify::Notifier;
use pool::{Pool, Refused};
use protocol::{Era, Refusal, internal_error, tool_result};

pub(crate) use pool::Key;
pub(crate) use protocol::meta::PROTOCOL_VERSION as META_VERSION;
pub use protocol::{LEGACY_VERSIONS, MODERN_VERSIONS, SUPPORTED_VERSIONS};

/// Longest message accepted from a client (a stdio line, an HTTP body); a longer one is refused.
pub const MAX_LINE: usize = 16 << 20;

/// Most tool calls running on workers at once, over every client together.
pub const MAX_IN_FLIGHT: usize = 16;

/// Stack size of worker threads (tool handlers parse and build JSON, nothing deep).
const WORKER_STACK: usize = 512 * 1024;

/// Which transport a request came by: it decides the task rule (SPEC §15).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transport {
    /// stdio: one client; a call without `task_id` is the task `default`.
    Stdio,
    /// Streamable HTTP: clients share the server; each names its own tasks.
    Http,
}

/// Where a transport writes whole JSON-RPC messages for one client (a stdio line, an SSE
/// event). `false` when it can write no more (the client is gone): whoever sent it stops using
/// it.
pub(crate) trait Sink: Send + Sync {
    /// Writes one message (JSON text, no newline).
    fn send_line(&self, line: String) -> bool;

    /// Writes the response that ends a `subscriptions/listen` stream, giving up at `by` (the
    /// shutdown's one budget for every stream). A sink that carries nothing but that stream
    /// ends with it (an HTTP response); stdio's output goes on.
    fn end(&self, line: String, by: Deadline) -> bool;
}

/// What a legacy session remembers (the stdio process, or one HTTP `Mcp-Session-Id`): the
/// version `initialize` negotiated and the level `logging/setLevel` set. Written by the
/// requests of its session, read by the notifier and the HTTP transport.
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
    pub(crate) fn version(&self) -> Option<&'static str> {
        let i = self.version.load(Ordering::Acquire);
        i.checked_sub(1)
            .and_then(|i| LEGACY_VERSIONS.get(i).copied())
    }

    fn set_version(&self, version: &str) {
        if let Some(i) = LEGACY_VERSIONS.iter().position(|v| *v == version) {
            self.version.store(i + 1, Ordering::Release);
        }
    }

    /// The least severe level this session receives.
    fn min_level(&self) -> Level {
        Level::from_index(self.min_level.load(Ordering::Acquire))
    }

    fn set_min_level(&self, level: Level) {
        self.min_level.store(level.index(), Ordering::Release);
    }
}

/// What the engine knows of the client a request came from besides the request itself.
#[derive(Clone)]
pub(crate) struct Client {
    /// The transport, for the task rule.
    pub(crate) transport: Transport,
    /// The client's scope of request ids ([`Engine::channel`]): a `notifications/cancelled`
    /// names a request of its own channel, and equal ids of two channels are two requests.
    pub(crate) channel: u64,
    /// The legacy session it belongs to, if any (stdio: the process's).
    pub(crate) session: Option<Arc<LegacySession>>,
    /// Where this request's notifications can go while it runs, and a `subscriptions/listen`
    /// stream's frames: stdio's output, an HTTP response's SSE stream; `None` when the client
    /// cannot take a stream here (then `subscriptions/listen` is refused).
    pub(crate) stream: Option<Arc<dyn Sink>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("transport", &self.transport)
            .field("channel", &self.channel)
            .field("session", &self.session)
            .field("stream", &self.stream.is_some())
            .finish()
    }
}

impl Client {
    /// How its calls name their task.
    fn tasks(&self) -> Tasks {
        match self.transport {
            Transport::Stdio => Tasks::Default,
            Transport::Http => Tasks::PerClient,
        }
    }
}

/// One request, read once: its id, method and params, its era, and the tool a `tools/call`
/// names.
#[derive(Debug)]
pub(crate) struct Request {
    /// As sent (`rpc`).
    pub(crate) id: Id,
    pub(crate) method: String,
    /// An object, or `Null` when absent.
    pub(crate) params: Value,
    /// How it is served (`protocol::era`), or the refusal of its broken envelope.
    era: Result<Era, Refusal>,
    /// The table's tool a `tools/call` names (`None`: another method, or no such tool).
    tool: Option<Tool>,
}

impl Request {
    /// The request, its era decided (module doc).
    pub(crate) fn new(id: Id, method: String, params: Value) -> Request {
        let era = protocol::era(&params);
        let tool = (method == "tools/call")
            .then(|| Tool::from_name(params.get("name")?.as_str()?))
            .flatten();
        Request {
            id,
            method,
            params,
            era,
            tool,
        }
    }

    /// Whether it carries the 2026-07-28 envelope, well formed or not: a stateless request.
    /// Otherwise it is legacy (the handshake's generation).
    pub(crate) fn stateless(&self) -> bool {
        !matches!(self.era, Ok(Era::Legacy))
    }

    /// The protocol version its envelope names, when it names one as a string.
    pub(crate) fn claimed_version(&self) -> Option<&str> {
        self.params.get("_meta")?.get(META_VERSION)?.as_str()
    }
}

/// What one request is answered with (module doc).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Answer {
    /// Notifications that belong on the request's stream before its response, in order.
    pub(crate) before: Vec<String>,
    /// The response line; `None` while a `subscriptions/listen` stream is open (its response
    /// ends the stream).
    pub(crate) line: Option<String>,
    /// The JSON-RPC error code of `line`, when it is an error response.
    pub(crate) error: Option<i64>,
}

impl Answer {
    /// A result line.
    pub(crate) fn result(line: String) -> Answer {
        Answer {
            line: Some(line),
            ..Answer::default()
        }
    }

    /// An error response to `id` (`None`: `null`).
    pub(crate) fn error(id: Option<&Id>, code: i64, message: impl Into<String>) -> Answer {
        Answer {
            line: Some(rpc::error(id, code, message)),
            error: Some(code),
            ..Answer::default()
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

/// How [`Engine::serve`] answers.
#[derive(Debug)]
pub(crate) enum Served {
    /// This answer, now.
    Now(Answer),
    /// A worker runs the call and hands its answer to `reply`; a call cancelled first gets none.
    /// The key is what [`Engine::cancel`] takes.
    Later(Key),
}

/// The engine: one per server, shared by its transports (module doc).
#[derive(Debug)]
pub(crate) struct Engine {
    registry: Arc<SupervisorRegistry>,
    /// The browser `browser_connect` launches without a `cdp_url` (`tools::browser`).
    browser: BrowserSlot,
    notifier: Arc<Notifier>,
    /// The tool calls running on workers, by channel and request id, with their cancel tokens:
    /// admitted by `serve`, freed by the worker that answers (or, whatever happens, by the
    /// request's slot guard).
    pool: Pool,
    /// Set when shutdown starts: nothing new is started.
    closing: AtomicBool,
    /// Held for the whole shutdown; true once it is done (a second caller waits, then returns).
    shut_down: Mutex<bool>,
    /// The snapshot fast path's last answer (`fast_path`).
    snapshot_cache: SnapshotCache,
    /// The next channel ([`Engine::channel`]).
    next_channel: AtomicU64,
}

impl Engine {
    /// An engine with its own registry.
    pub(crate) fn new(config: Config) -> Engine {
        Engine {
            registry: Arc::new(SupervisorRegistry::new(config)),
            browser: BrowserSlot::default(),
            notifier: Arc::default(),
            pool: Pool::new(MAX_IN_FLIGHT, WORKER_STACK),
            closing: AtomicBool::new(false),
            shut_down: Mutex::new(false),
            snapshot_cache: SnapshotCache::default(),
            next_channel: AtomicU64::new(0),
        }
    }

    /// The registry.
    pub(crate) fn registry(&self) -> &Arc<SupervisorRegistry> {
        &self.registry
    }

    /// A fresh channel: a scope of request ids of its own (stdio's one client, an HTTP legacy
    /// session, a stateless HTTP request).
    pub(crate) fn channel(&self) -> u64 {
        self.next_channel.fetch_add(1, Ordering::Relaxed)
    }

    /// Answers `request` from `client`: now, or from a worker that hands the answer to `reply`
    /// (module doc). Every method but `tools/call` is answered now, and so are
    /// `browser_snapshot` (a wait-free read), a call of a tool the table does not have, and a
    /// call the engine refuses (a duplicate id, no free place). A worker's handler that panics
    /// is answered with an internal tool error, and its place in the pool is freed either way
    /// (`pool`). A call cancelled before its answer is ready gets none: `reply` is dropped.
    pub(crate) fn serve(
        self: &Arc<Self>,
        request: Request,
        client: &Client,
        reply: impl FnOnce(Answer) + Send + 'static,
    ) -> Served {
        let (Ok(era), Some(tool)) = (&request.era, request.tool) else {
            return Served::Now(self.answer(&request, client));
        };
        let era = *era;
        if tool == Tool::Snapshot {
            return Served::Now(self.answer(&request, client));
        }
        let key = (client.channel, request.id.key());
        let duplicate = || {
            Served::Now(Answer::error(
                Some(&request.id),
                code::INVALID_REQUEST,
                "invalid request: a request with this id is still in flight",
            ))
        };
        // A stream is open only on a channel whose requests can stream (stdio's).
        if client.stream.is_some() && self.notifier.listens().is_open(key.0, &key.1) {
            return duplicate();
        }
        let slot = match self.pool.admit(key.clone()) {
            Ok(slot) => slot,
            Err(Refused::Duplicate) => return duplicate(),
            Err(Refused::Full) => {
                let full = json!({"success": false, "error": format!(
                    "too many tool calls in flight ({MAX_IN_FLIGHT}): wait for one to finish or cancel one, then retry"
                )});
                return Served::Now(Answer::result(tool_result(&request.id, full, era)));
            }
        };
        let id = request.id.clone();
        let reply_id = id.clone();
        let engine = Arc::clone(self);
        let client = client.clone();
        let ran = self.pool.run(
            slot,
            move |cancel| engine.tool_call(&request, era, &client, cancel),
            move |outcome, slot| {
                let answer = outcome.unwrap_or_else(|panic| {
                    log::error!(
                        "the handler of request {reply_id} panicked: {panic:?}; it is answered \
                         with an internal error and the server carries on"
                    );
                    Answer::result(tool_result(&reply_id, internal_error(&panic), era))
                });
                if slot.release() {
                    log::debug!("request {reply_id} was cancelled: no response");
                } else {
                    reply(answer);
                }
            },
        );
        match ran {
            Ok(()) => Served::Later(key),
            Err(why) => {
                log::error!("{why}");
                Served::Now(Answer::result(tool_result(&id, internal_error(&why), era)))
            }
        }
    }

    /// Answers `request` from `client` on the calling thread, whatever its method: a tool call
    /// too (it cannot be cancelled).
    pub(crate) fn answer(&self, request: &Request, client: &Client) -> Answer {
        // The handshake is legacy; a 2026-07-28 request for it names a removed method, and one
        // with a broken envelope is still the handshake (`protocol`).
        let era = match &request.era {
            Err(_) if request.method == "initialize" => return self.initialize(request, client),
            Err(refusal) => return refusal.answer(&request.id),
            Ok(era) => *era,
        };
        match era {
            Era::Legacy if request.method == "initialize" => self.initialize(request, client),
            Era::Legacy => self.legacy(request, client),
            Era::Modern(m) => self.modern(request, m, client),
        }
    }

    /// The answer to a request whose params the JSON decoder cannot read: for `tools/call` a
    /// tool error (SPEC §10: argument errors are tool errors), for anything else `-32602`. (Its
    /// envelope cannot be read either: it is answered the legacy way.)
    pub(crate) fn unreadable(id: &Id, method: &str, why: &str) -> Answer {
        if method == "tools/call" {
            let out = json!({"success": false, "error": format!(
                "the arguments cannot be read ({why}): values nested deeper than 128 levels and \
                 numbers beyond the range of a 64-bit float are not accepted"
            )});
            Answer::result(tool_result(id, out, Era::Legacy))
        } else {
            Answer::error(
                Some(id),
                code::INVALID_PARAMS,
                format!("invalid params: params cannot be read: {why}"),
            )
        }
    }

    /// A notification from the client on `channel`: `notifications/cancelled` cancels the
    /// request it names, a call in flight or a `subscriptions/listen` stream (ids compared as
    /// JSON-RPC compares them: `rpc`); an unknown or finished id is ignored.
    pub(crate) fn notification(&self, channel: u64, method: &str, request_id: Option<&IdKey>) {
        if method == "notifications/cancelled"
            && let Some(key) = request_id
            && (self.pool.cancel(&(channel, key.clone()))
                || self.notifier.listens().cancel(channel, key))
        {
            log::debug!("request {key} cancelled by the client");
        }
    }

    /// Cancels the call `key` ([`Served::Later`]) if it is still in flight (its client went
    /// away); true when it was.
    pub(crate) fn cancel(&self, key: &Key) -> bool {
        self.pool.cancel(key)
    }

    /// `channel`'s client is gone: its calls in flight are cancelled and its streams end
    /// without a response.
    pub(crate) fn forget(&self, channel: u64) {
        self.pool.cancel_channel(channel);
        self.notifier.listens().drop_channel(channel);
    }

    /// Whether shutdown has started.
    pub(crate) fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// Ends the engine (idempotent; a concurrent caller waits until it is done): nothing new
    /// starts, open streams get their response, then `close_transport` closes what the
    /// transport writes to (nothing is written after it), calls in flight are cancelled and get
    /// no response, every supervisor is stopped (in parallel, each within about 1 s) and the
    /// launched browser is closed (SIGTERM, SIGKILL after 1 s) with its profile removed.
    pub(crate) fn shutdown(&self, close_transport: impl FnOnce()) {
        let mut done = sync::lock(&self.shut_down);
        if *done {
            return;
        }
        self.closing.store(true, Ordering::Release);
        self.notifier.close();
        close_transport();
        self.pool.cancel_all();
        let stops: Vec<_> = self
            .registry
            .tasks()
            .into_iter()
            .filter_map(|task| {
                let registry = Arc::clone(&self.registry);
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
        self.registry.stop_all();
        self.browser.close(Duration::from_secs(1));
        *done = true;
    }

    /// Tool calls in flight (for tests).
    pub(crate) fn calls_in_flight(&self) -> usize {
        self.pool.in_flight()
    }

    /// `subscriptions/listen` streams open (for tests).
    pub(crate) fn streams_open(&self) -> usize {
        self.notifier.listens().len()
    }

    /// `tools/call`: the snapshot fast path (`fast_path`) or the tool table. A started
    /// supervisor is followed for its events (`notify`). A 2026-07-28 request that asked for
    /// logs gets what happened to its task during the call, before the result.
    fn tool_call(
        &self,
        request: &Request,
        era: Era,
        client: &Client,
        cancel: &CancelToken,
    ) -> Answer {
        let id = &request.id;
        let tasks = client.tasks();
        if request.tool == Some(Tool::Snapshot)
            && let Some(line) = self.snapshot_line(request, era, tasks)
        {
            return Answer::result(line);
        }
        let Some(tool) = request.tool else {
            let message = match request.params.get("name").and_then(Value::as_str) {
                None => "invalid params: tools/call needs a string \"name\"".to_string(),
                Some(name) => format!(
                    "invalid params: unknown tool {}; the tools are {}",
                    quoted(name),
                    Tool::names()
                ),
            };
            return Answer::error(Some(id), code::INVALID_PARAMS, message);
        };
        let no_arguments = json!({});
        let args = match request.params.get("arguments") {
            None | Some(Value::Null) => &no_arguments,
            Some(a) => a,
        };
        let log_level = match era {
            Era::Modern(m) => m.log_level,
            Era::Legacy => None,
        };
        let task = log_level
            .filter(|_| args.is_object())
            .and_then(|_| tasks.task_of(tool, args).ok())
            .map(|t| t.into_owned());
        let before = task
            .as_deref()
            .and_then(|t| self.registry.get(t))
            .map(|s| s.snapshot());
        let ctx = Context {
            registry: &self.registry,
            browser: Some(&self.browser),
            tasks,
            cancel: Some(cancel),
        };
        let out = table::dispatch(&ctx, tool, args);
        // Over HTTP a browser_connect without task_id names its new task in the result.
        let named = out.get("task_id").and_then(Value::as_str);
        if tool == Tool::Connect
            && out.get("success") == Some(&Value::Bool(true))
            && let Some(task) = named
            && let Some(sup) = self.registry.get(task)
        {
            self.notifier.watch(&self.registry, task, &sup);
        }
        let task = log_level.and(named.map(str::to_string).or(task));
        let mut answer = Answer::result(tool_result(id, out, era));
        if let (Some(level), Some(task)) = (log_level, task) {
            answer.before = changes::request_log(&self.registry, &task, before.as_ref(), level);
        }
        answer
    }
}

//! cdp-supervisor: one persistent Chrome DevTools Protocol connection per browser task that
//! catches native JS dialogs the moment they block a page, tracks the frame tree (including
//! out-of-process iframes), routes CDP calls into any frame, and publishes it all through a
//! lock-free [`Snapshot`] that synchronous tool handlers read in nanoseconds.
//!
//! No async runtime: blocking sockets, threads, crossbeam channels and arc-swap.
//!
//! # Public API
//!
//! Everything a user needs is re-exported here: [`SupervisorRegistry`] (one [`Supervisor`] per
//! task), [`Config`], the snapshot types ([`Snapshot`], [`PendingDialog`], [`ClosedDialog`],
//! [`FrameTree`], …), [`Error`], [`Route`] and [`StartOptions`]; the JSON tool handlers in
//! [`tools`]; the MCP server [`mcp::McpServer`]; [`redact_url`] and [`cdp_available`]; and, with
//! the `fake-browser` feature, the scripted fake browser in [`fake`]. Nothing else is part of the
//! semver contract (`unversioned` is for this crate's own binary, tests and benches).
//!
//! # Example
//!
//! A task's supervisor catches a `confirm()` the page raises, the caller answers it, and the
//! snapshot records who closed it. Here the browser is the crate's scripted fake; give
//! `get_or_start` a real browser's `ws://`, `wss://` or `http://` debugging URL instead.
//!
//! ```
//! # #[cfg(feature = "fake-browser")] {
//! use std::time::Duration;
//! use cdp_supervisor::fake::FakeBrowser;
//! use cdp_supervisor::{ClosedBy, Config, DialogAction, DialogKind, SupervisorRegistry};
//!
//! let browser = FakeBrowser::start()?;
//! let registry = SupervisorRegistry::new(Config::default());
//! let sup = registry.get_or_start("task-1", &browser.ws_url())?;
//!
//! browser.open_dialog("confirm", "Leave this page?", ""); // the page calls confirm()
//! let dialog = sup.wait_for_dialog(Duration::from_secs(5)).expect("the dialog is caught");
//! assert_eq!(dialog.kind, DialogKind::Confirm);
//! sup.respond_to_dialog(DialogAction::Accept, None, Some(&dialog.id))?;
//!
//! // A wait-free read, as a tool handler does before every step.
//! let closed = registry
//!     .with_snapshot("task-1", |s| s.recent_dialogs.last().map(|d| d.closed_by))
//!     .flatten();
//! assert_eq!(closed, Some(ClosedBy::Agent));
//! registry.stop("task-1");
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Layout
//!
//! * `transport`: the CDP WebSocket the reader and the writers share (`transport/mod.rs`, the
//!   lock-and-peek design), connecting (`handshake.rs`: TLS, the upgrade), plain or TLS
//!   (`stream.rs`), and the socket whose every read and write has a deadline (`socket.rs`, over
//!   `sys_unix.rs`, or `sys_portable.rs` elsewhere).
//! * `endpoint`: `http://` discovery and connecting (one deadline for all of it); `http_get`: the
//!   discovery's `GET` and its redirect policy.
//! * `net`: what both share before HTTP: TCP connect to every address within a deadline, and
//!   `Authorization: Basic` from a URL's userinfo.
//! * `http1`: HTTP/1.1, once for the crate (the upgrade, discovery and the MCP server): heads
//!   (`http1/head.rs`, the only file that names `httparse`), body framing and the chunk-size
//!   parser (`http1/framing.rs`), a connection's reading side with deadlines and caps
//!   (`http1/conn.rs`: the one chunked decoder), and what we send (`http1/write.rs`).
//! * `protocol`: CDP envelopes and the events we decode, leniently.
//! * `core`: the I/O-free, clock-free state machine the reader feeds. `core.rs` dispatches each
//!   message; the state lives in parts that own it and publish it (`take_published`): dialogs
//!   (`core/dialogs/state.rs`; the dialog events and who closed what: `core/dialogs.rs`),
//!   frames (`core/frames.rs`; their execution contexts: `core/frames/contexts.rs`), console
//!   (`core/console.rs`), followed and watched popups (`core/pages.rs`), what the task created
//!   through raw calls (`core/created.rs`), downloads (`core/downloads.rs`), file choosers
//!   (`core/choosers.rs`), the page's current document (`core/document.rs`), the tracked
//!   sessions, their crashes and renderers
//!   (`core/sessions.rs`; what each kind of session is sent: `core/session.rs`). Also child
//!   targets and frame events (`core/targets.rs`), the call table (`core/calls.rs`),
//!   reconnect bookkeeping (`core/reconnect.rs`), and `core/policy.rs`, the call rules in one
//!   place: which dialog blocks which call (every session of the dialog's renderer), which
//!   methods a dialog or a crash holds up (measured), and what the caller is told. Its
//!   scenario tests are in `core/tests/` (the `Sim` harness in `mod.rs`, one file per part).
//! * `snapshot`: the published [`Snapshot`]; its JSON in `snapshot/json.rs`.
//! * `shared`: what one supervisor's threads share (the live connection, call registration, the
//!   snapshot cell and its change notification).
//! * `outbound`: the one outbound path (a command registered with the reader, then written with
//!   a deadline) and the `Reply` a caller waits on; the `Outbound` trait, over a supervisor's
//!   connection and the popup watcher's; `Reply::reply_by` is the one wait for a reply (a
//!   deadline and an optional cancel token, over `cancel::recv`).
//! * `reader`: the reader loop, the only writer of state, and the reconnect policy.
//! * `attach`: attaching to the task's page (start and after a reconnect; the task's own page
//!   is re-attached, or replaced only when it is gone).
//! * `local_files`: the local file system for what crosses between page and machine: each
//!   task's download directory, moving a completed download into it, which files may answer a
//!   file chooser (`security.upload_dirs`).
//! * `watchdog`: dismisses `must_respond` dialogs nobody answered.
//! * `bridge`: the `Fetch`-based dialog bridge.
//! * `supervisor`: [`Supervisor`] (snapshot, dialogs, [`DialogAnswer`]), `supervisor/start.rs`
//!   ([`StartRequest`] and the one start path), `supervisor/calls.rs` ([`CallRequest`] and the
//!   one call path: routing, the dialog-aware rules, the security policy), `supervisor/main_world.rs` (a
//!   same-process frame's main world, found through the DOM: no `Runtime.enable`, SPEC §19),
//!   `supervisor/stall.rs` (a call into a renderer frozen by a dialog in a popup nobody
//!   watches), `supervisor/navigate.rs` (a navigation that never waits on a dialog),
//!   `supervisor/files.rs` (waiting for downloads, answering file choosers),
//!   `supervisor/handover.rs` (a person holds the task: `hand_over`, `take_back`, answers
//!   recorded as `human`; what the reader does while held is `core/handover.rs`),
//!   `supervisor/thumbnail.rs` (a small JPEG of the task's page, off the reader thread, refused
//!   at once while a dialog is open, as measured) and `supervisor/stop.rs` (the stop: pending
//!   dialogs dismissed, the task's own page closed for good, threads joined, its downloads
//!   removed).
//! * `cdp_endpoint`: the task's CDP endpoint ([`CdpEndpoint`]): one listener per registry,
//!   discovery and the upgrade (`cdp_endpoint/http.rs`, on `http1`), the standalone proxy
//!   ([`CdpProxy`]: a task per client, `proxy.rs`), each client's threads
//!   (`client.rs`), the task's clients multiplexed on its one upstream connection (`mux.rs`:
//!   ids and sessions; `mux/scope.rs`: which targets are the task's, and the security policy
//!   for each command; `mux/tap.rs`: what the reader hands it; `mux/wait.rs`: how long a call
//!   waits for a dialog its client was shown; `mux/life.rs`: a dropped connection, a reconnect
//!   and the task's end for its clients), WebSocket frames (`frame.rs`,
//!   `wire.rs`); `tap`: the reader's one hook for it (each message, before the core).
//! * `registry`: [`SupervisorRegistry`], `task_id -> Supervisor`: plain start/stop bookkeeping
//!   under one lock, a lock-free read path with a per-thread cache (`registry/read_cache.rs`),
//!   and one popup watcher per browser that hands each task its popups while the browser has
//!   tasks (`registry/popups.rs`: which endpoints get one and for how long;
//!   `registry/popups/watcher.rs`: its connection, on the outbound path, and the hand-off).
//! * `config`: [`Config`], the per-task [`StartOptions`] and the bounds of their settings (the
//!   one rule of a setting in seconds, the 300 s call cap, the reconnect back-off);
//!   `config/settings.rs` is the one place a setting's value is checked (`Config::set`, behind
//!   `from_toml`, the layers, the `with_*` setters in `config/access.rs` and the binding's
//!   keywords), `config/load.rs` reads the layers (defaults, TOML file, environment),
//!   `config/security.rs` holds the `[security]` settings, `config/endpoint.rs` the `[endpoint]`
//!   ones. It depends only on `error` and
//!   `redact`.
//! * `security`: the `[security]` rules of raw CDP calls (which option refuses which method and
//!   parameter, nested `Target.sendMessageToTarget` commands included), and in
//!   `security/isolation.rs` the one rule that keeps tasks apart (`security.isolate_tasks`: what
//!   a task reaches, for calls, starts and the task endpoint); `url_policy`: how Chromium will
//!   read a URL (a local file? a privileged page?).
//! * `clock`: `Now`, the time the reader reads once per batch and passes into
//!   the core.
//! * `task_id`: what a task id may be (checked wherever one enters) and the part of it that
//!   reaches a thread name.
//! * `quote`: the one way an error or log line quotes a caller's value (bounded, escaped).
//! * `sync`: the one way a mutex is locked (poisoning ignored: a panic in one task never
//!   cascades into every later caller).
//! * `cancel`: [`CancelToken`] and `cancel::recv`, the one blocking wait for a reply (a
//!   deadline and, optionally, a token).
//! * `deadline`, `error`, `redact`, `measured` (the dialog/method table measured on
//!   Chromium), `launch` (starting a local Chromium, Unix only, its profile directories in
//!   `launch/profile.rs`; `launch_unsupported.rs` stands in elsewhere), `launch_slot` (the one
//!   slot for a browser a caller launches: the MCP server's and the binding's).
//! * [`tools`]: the JSON tool handlers, and the one tool table (`tools/table.rs`: each tool's
//!   name, title, annotations, arguments, schemas (`tools/schema.rs`) and handler) that the MCP
//!   engine, the Python binding and the library functions run every call through; a caller
//!   lends the handlers a context value (`tools::Context`: registry, launched browser, task
//!   rule, cancel token) and they call nothing back. `tools/args.rs` reads arguments (one
//!   wording for their errors, the two task rules); the handlers are `tools/snapshot.rs`,
//!   `tools/dialog.rs`, `tools/cdp.rs`, `tools/navigate.rs` and `tools/connect.rs`
//!   (`browser_connect`, `browser_disconnect`); `tools/browser.rs` is the local browser a caller
//!   launches.
//! * [`mcp`]: the server's public face (`mcp/mod.rs`); the engine (`mcp/engine.rs`), the one
//!   seam between a transport and the protocol: the only methods a transport calls, a request
//!   read once with its era decided once, an answer out; behind it, private to `mcp/engine/`:
//!   what each method means (`methods.rs`), the protocol generations and result shapes
//!   (`protocol.rs`: 2026-07-28's per-request `_meta` beside the legacy handshake), the worker
//!   pool (`pool.rs`), the snapshot fast path (`fast_path.rs`), events (`events.rs` their
//!   vocabulary; `changes.rs`, what is news between two snapshots; `notify.rs`, one thread
//!   for every task; `listen.rs`, the
//!   `subscriptions/listen` streams; `resources.rs`). JSON-RPC messages (`mcp/rpc.rs`) are
//!   what both transports frame: stdio (`mcp/stdio.rs`) and Streamable HTTP (`mcp/http/`:
//!   `accept.rs` new connections up to their first request head, `access.rs` the
//!   Host/Origin/token rules and the connection places, `route.rs` what a request means
//!   (decided without I/O), `conn.rs` one connection on `http1` and what it writes,
//!   `sessions.rs` the legacy sessions). That server also serves the supervisor page.
//! * `page`: the supervisor page at `/` (`mcp --http`, `watch --http`, `proxy --http`), its own
//!   product surface: `page.rs` what each request comes to (the server runs its access rules
//!   first and passes in the registry and the login's cookie; the page imports nothing of
//!   `mcp`), `page/view.rs` what it shows of a task, `page/hub.rs` its live event streams, and
//!   the page itself (`index.html`, `page.css`, `page.js`, served from the binary).
//! * [`fake`]: public, see above.
#![deny(missing_docs, missing_debug_implementations, unsafe_code)]

// The README's Rust examples are compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod attach;
mod bridge;
mod cancel;
mod cdp_endpoint;
mod clock;
mod config;
mod core;
mod deadline;
mod endpoint;
mod error;
#[cfg(feature = "fake-browser")]
pub mod fake;
mod http1;
mod http_get;
// Syscalls (process groups, signals, waitid): each `unsafe` block has a SAFETY comment and
// checks its return value. Unix only; elsewhere every launch fails with a clear error.
#[cfg(unix)]
#[allow(unsafe_code)]
mod launch;
#[cfg(not(unix))]
#[path = "launch_unsupported.rs"]
mod launch;
mod launch_slot;
mod local_files;
pub mod mcp;
mod measured;
mod net;
mod outbound;
mod page;
mod protocol;
mod quote;
mod reader;
mod redact;
mod registry;
mod security;
mod shared;
mod snapshot;
mod supervisor;
mod sync;
mod tap;
mod task_id;
pub mod tools;
// Its syscalls (recv/send without blocking, poll with the time left to a deadline) are in
// `transport/sys_unix.rs`, the one file of it that may use `unsafe`.
mod transport;
mod url_policy;
mod watchdog;

pub use cancel::CancelToken;
pub use cdp_endpoint::{CdpEndpoint, CdpProxy, ProxyEvent};
pub use config::{
    BridgeMode, Config, DialogAction, DialogPolicy, Downloads, EndpointSettings, Limits,
    PageChoice, SETTING_KEYS, Security, SettingValue, StartOptions,
};
pub use endpoint::{cdp_available, cdp_available_with};
pub use error::Error;
pub use redact::redact_url;
pub use registry::SupervisorRegistry;
pub use snapshot::{
    Blocked, BlockedReason, ChooserMode, ChooserRefused, ClosedBy, ClosedDialog, ConsoleEntry,
    DialogKind, Download, DownloadState, FileChooser, FrameEntry, FrameRecord, FrameTree, Handover,
    PageInfo, PendingDialog, Snapshot, SupervisorState,
};
pub use supervisor::{
    CallRequest, DOWNLOAD_BEGIN_GRACE, DialogAnswer, Navigation, Route, StartRequest, Supervisor,
    Thumbnail, WaitUntil,
};

/// Internals for this crate's own binary, tests and benches. **Not part of the public API**:
/// anything here may change or go away in any release, semver notwithstanding.
#[doc(hidden)]
pub mod unversioned {
    /// The dialog bridge's script and host.
    pub mod bridge {
        pub use crate::bridge::{BRIDGE_HOST, SCRIPT};
    }
    /// The tool table, as the Python binding dispatches through it.
    pub mod tools {
        pub use crate::tools::table::call;
    }
    /// What an MCP server holds now (the HTTP server's tests wait on it).
    pub mod mcp {
        use crate::mcp::{McpServer, http::HttpServer};
        /// Tool calls in flight.
        pub fn calls_in_flight(server: &McpServer) -> usize {
            server.in_flight().0
        }
        /// `subscriptions/listen` streams open.
        pub fn streams_open(server: &McpServer) -> usize {
            server.in_flight().1
        }
        /// The HTTP server's connections that hold a place (a thread, or a stream's place).
        pub fn open_places(server: &HttpServer) -> usize {
            server.open_places()
        }
    }
    pub use crate::clock::Now;
    /// Locking that ignores poisoning (one helper for the crate, the binary and the binding).
    pub mod sync {
        pub use crate::sync::{lock, read, wait, write};
    }
    /// The one way a message quotes a caller's value (the binding's errors use it too).
    pub mod quote {
        pub use crate::quote::{Clipped, QUOTE_MAX, Quoted, clipped, quoted, quoted_json};
    }
    pub use crate::config::{MAX_DIALOG_TIMEOUT, MAX_START_TIMEOUT, seconds_setting};
    pub use crate::core::{CallKind, Core, CoreSettings, FilesSettings, PendingCall};
    pub use crate::deadline::Deadline;
    pub use crate::endpoint::{AVAILABLE_TIMEOUT, probe, resolve};
    pub use crate::launch::{LaunchedBrowser, find_browser, remove_stale_profiles_once};
    pub use crate::launch_slot::{BrowserSlot, LaunchRefused, Launched};
    pub use crate::transport::{ConnectOptions, Transport};

    use crate::{Config, FrameRecord, PendingDialog, SupervisorRegistry};

    /// A registry whose tasks each follow their popups with browser-level auto-attach on their
    /// own connection, as before issue 24 (the default registry has one popup watcher per
    /// browser): what the fake's popup tests model, and the "before" of the fleet measurements.
    pub fn registry_without_popup_watcher(config: Config) -> SupervisorRegistry {
        SupervisorRegistry::with_popup_watcher(config, false)
    }

    /// Whether a task follows its popups itself after its registry's popup watcher has gone
    /// (or could not serve it): then each of its connections turns browser-level auto-attach on.
    pub fn follows_popups_itself(sup: &crate::Supervisor) -> bool {
        sup.follows_popups_itself()
    }

    /// The session that owns a frame's document (routing internals).
    pub fn owner_session(frame: &FrameRecord) -> &str {
        &frame.owner_session
    }

    /// A frame's default execution context on its owner session, when known.
    pub fn default_context(frame: &FrameRecord) -> Option<i64> {
        frame.default_context
    }

    /// The paused request a bridge dialog waits on (SPEC §6).
    pub fn bridge_request(dialog: &PendingDialog) -> Option<&str> {
        dialog.bridge_request_id.as_deref()
    }

    /// The CDP session a dialog arrived on.
    pub fn dialog_session(dialog: &PendingDialog) -> &str {
        &dialog.session_id
    }

    /// The CDP session a file chooser arrived on (where its answer goes).
    pub fn chooser_session(chooser: &crate::FileChooser) -> &str {
        &chooser.session_id
    }

    /// `registry.snapshot(task_id)` without the registry's per-thread read cache (the
    /// benchmark prints both).
    pub fn snapshot_uncached(
        registry: &crate::SupervisorRegistry,
        task_id: &str,
    ) -> Option<std::sync::Arc<crate::Snapshot>> {
        registry.snapshot_uncached(task_id)
    }
}

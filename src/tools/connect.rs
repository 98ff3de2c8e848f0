//! The server's part of the tools: as a tool-table `Host` (`exchange::Served`, `tools::table`)
//! the MCP server runs `browser_connect` and `browser_disconnect` itself (they launch the server's browser and
//! watch supervisors) and waits, after a `browser_cdp` `Browser.close` of its launched browser,
//! for that browser to be gone. Everything else, argument checks and the dialog status included,
//! is the table's.
//!
//! Over HTTP, where several clients share the server, calls name their task by the rule of
//! [`task_per_client`] (SPEC §15): `browser_connect` without `task_id` creates a task with a
//! fresh unguessable id (128 random bits), and every other tool needs a `task_id`. So two HTTP
//! clients that never name a task never share one. (On stdio, absent is `default`.)

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::Inner;
use super::browser::Launched;
use crate::cancel::CancelToken;
use crate::config::{BridgeMode, DialogPolicy, MAX_DIALOG_TIMEOUT, StartOptions};
use crate::error::Error;
use crate::quote::quoted_json;
use crate::redact::redact_url;
use crate::supervisor::Supervisor;
use crate::tools::table::Tool;
use crate::tools::{check_args, check_task, failure, kind_of, opt_str};

/// The task of a call over HTTP (module doc).
pub(super) fn task_per_client(tool: Tool, args: &Value) -> Result<Cow<'_, str>, Value> {
    match args.get("task_id") {
        Some(Value::String(s)) => check_task(s).map(|()| Cow::Borrowed(s.as_str())),
        None | Some(Value::Null) if tool == Tool::Connect => {
            crate::task_id::fresh().map(Cow::Owned).map_err(failure)
        }
        None | Some(Value::Null) => Err(failure(format!(
            "task_id is required over HTTP: {} needs the task_id that browser_connect returned \
             (browser_connect without task_id creates a new task)",
            tool.name()
        ))),
        Some(other) => Err(failure(format!(
            "task_id must be a string, got {}; over HTTP pass the task_id that browser_connect \
             returned",
            kind_of(other)
        ))),
    }
}

/// How long `Browser.close` on the launched browser waits for its exit.
const BROWSER_EXIT_WAIT: Duration = Duration::from_secs(3);

impl Inner {
    /// Runs `tool` for `task` when the server runs it itself
    /// ([`Host::run`](crate::tools::table::Host::run)): `None` for the tools the table's
    /// handler runs alone.
    pub(super) fn run_tool(
        &self,
        tool: Tool,
        task: &str,
        args: &Value,
        cancel: Option<&CancelToken>,
    ) -> Option<Value> {
        match tool {
            Tool::Connect => Some(match cancel {
                Some(c) => connect(self, task, args, c),
                None => connect(self, task, args, &CancelToken::new()),
            }),
            Tool::Disconnect => Some(disconnect(self, task, args)),
            Tool::Cdp => Some(cdp(self, task, args, cancel)),
            Tool::Snapshot | Tool::Dialog => None,
        }
    }
}

/// `browser_cdp`, and when it closes the launched browser, the answer once that browser is gone,
/// so that the next `browser_connect` relaunches it instead of finding it still shutting down.
fn cdp(inner: &Inner, task: &str, args: &Value, cancel: Option<&CancelToken>) -> Value {
    let reg = &inner.registry;
    let closing = (args.get("method").and_then(Value::as_str) == Some("Browser.close"))
        .then(|| inner.browser.current())
        .flatten()
        .filter(|l| reg.get(task).is_some_and(|s| s.cdp_url_raw() == l.ws_url));
    let out = Tool::Cdp.run_handler(reg, task, args, cancel);
    if let Some(l) = closing {
        let _ = l.exited.recv_timeout(BROWSER_EXIT_WAIT);
    }
    out
}

/// `browser_disconnect`: stops the task's supervisor. An unknown task is no error
/// (`stopped: false`), so disconnecting twice is harmless. The result names the dialogs that the
/// stop dismissed (`dismissed_dialogs`); it has no `pending_dialogs`, since nothing is left to
/// watch them.
fn disconnect(inner: &Inner, task: &str, args: &Value) -> Value {
    if let Err(e) = check_args(args, Tool::Disconnect.args()) {
        return e;
    }
    let pending = inner
        .registry
        .with_snapshot(task, |s| {
            s.pending_dialogs
                .iter()
                .map(|d| d.to_json())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let stopped = inner.registry.stop(task);
    let mut out = json!({"success": true, "task_id": task, "stopped": stopped});
    if stopped && !pending.is_empty() {
        out["dismissed_dialogs"] = Value::Array(pending);
    }
    out
}

/// `browser_connect`'s endpoint (`None`: the configured one, else the launched browser) and
/// start options.
fn start_options(args: &Value) -> Result<(Option<String>, StartOptions), Value> {
    let mut opts = StartOptions {
        target_id: opt_str(args, "target_id")?.map(str::to_string),
        ..Default::default()
    };
    if let Some(p) = opt_str(args, "dialog_policy")? {
        opts.dialog_policy = Some(DialogPolicy::parse(p).map_err(failure)?);
    }
    if let Some(b) = opt_str(args, "dialog_bridge")? {
        opts.dialog_bridge = Some(BridgeMode::parse(b).map_err(failure)?);
    }
    match args.get("dialog_timeout_s") {
        None | Some(Value::Null) => {}
        Some(v) => match v.as_f64() {
            Some(t) if t > 0.0 && t <= MAX_DIALOG_TIMEOUT.as_secs_f64() => {
                opts.dialog_timeout = Some(Duration::from_secs_f64(t))
            }
            _ => {
                return Err(failure(format!(
                    "dialog_timeout_s must be a number of seconds > 0 and <= {}, got {}",
                    MAX_DIALOG_TIMEOUT.as_secs(),
                    quoted_json(v)
                )));
            }
        },
    }
    let url = opt_str(args, "cdp_url")?
        .filter(|u| !u.trim().is_empty())
        .map(str::to_string);
    Ok((url, opts))
}

/// `browser_connect`. With a URL (argument or configuration): that endpoint. Without: the
/// server's launched browser. Either way a task gets a new page of its own (SPEC §4: in a
/// window of its own, closed when the task stops), never one the browser already held, unless
/// `target_id` names one. When the launched browser turns out to have died (the start fails,
/// or finds the old supervisor reconnecting), it is relaunched and the start retried once.
/// `cancel` calls the whole of it off at once (a launch, a start), leaving nothing behind: the
/// response is not sent then.
fn connect(inner: &Inner, task: &str, args: &Value, cancel: &CancelToken) -> Value {
    if let Err(e) = check_args(args, Tool::Connect.args()) {
        return e;
    }
    let (url, mut opts) = match start_options(args) {
        Ok(x) => x,
        Err(e) => return e,
    };
    opts.new_page = opts.target_id.is_none();
    let configured = inner
        .registry
        .config()
        .cdp_url
        .clone()
        .filter(|u| !u.trim().is_empty());
    if let Some(url) = url.or(configured) {
        let result = inner
            .registry
            .get_or_start_cancellable(task, &url, opts, cancel);
        return started(inner, task, &url, result, false);
    }
    let mut retried = false;
    loop {
        let launched = match inner.browser.get_or_launch(inner.registry.config(), cancel) {
            Ok(l) => l,
            Err(e) => return failure(e),
        };
        let result =
            inner
                .registry
                .get_or_start_cancellable(task, &launched.ws_url, opts.clone(), cancel);
        // A browser that is going away (e.g. right after Browser.close) refuses connections or
        // leaves the old supervisor reconnecting: wait for its exit, then relaunch once.
        let usable = matches!(&result, Ok(sup) if sup.is_active());
        let cancelled = matches!(&result, Err(Error::StartCancelled { .. }));
        if !usable
            && !cancelled
            && !retried
            && exits_within(&launched, Duration::from_secs(2), cancel)
        {
            retried = true;
            continue;
        }
        return started(inner, task, &launched.ws_url, result, true);
    }
}

/// True when the launched browser exits within `wait` (false at once when `cancel` fires).
fn exits_within(launched: &Launched, wait: Duration, cancel: &CancelToken) -> bool {
    crossbeam_channel::select! {
        recv(launched.exited) -> r => r.is_err(),
        recv(cancel.receiver()) -> _ => false,
        default(wait) => false,
    }
}

/// `browser_connect`'s result (the table adds the dialog status); a started supervisor gets a
/// watcher that pushes its events to the client.
fn started(
    inner: &Inner,
    task: &str,
    url: &str,
    result: Result<Arc<Supervisor>, Error>,
    launched: bool,
) -> Value {
    match result {
        Ok(sup) => {
            inner.notifier.watch(&inner.registry, task, &sup);
            let snap = sup.snapshot();
            let mut out = json!({
                "success": true,
                "task_id": task,
                "cdp_url": redact_url(url),
                "launched_browser": launched,
            });
            if let Some(p) = &snap.page_target_id {
                out["page_target_id"] = json!(p);
            }
            out
        }
        Err(e) => {
            let mut out = failure(&e);
            if let Error::Refused { option, .. } = &e {
                out["refused_by"] = json!(option);
            }
            out
        }
    }
}

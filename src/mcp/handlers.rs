//! `tools/call`: argument checks and the five tools, each returning the tool's JSON (SPEC §10,
//! §16) with the task's dialog status added. Argument errors, `task_id` included, are tool
//! errors (`success: false`, shown as `isError: true`), never JSON-RPC errors (SEP-1303).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::Inner;
use super::browser::Launched;
use crate::cancel::CancelToken;
use crate::config::{BridgeMode, DialogPolicy, StartOptions};
use crate::error::Error;
use crate::redact::redact_url;
use crate::registry::SupervisorRegistry;
use crate::supervisor::Supervisor;
use crate::tools;

/// Arguments of `browser_connect`.
pub(crate) const CONNECT_ARGS: &[&str] = &[
    "cdp_url",
    "task_id",
    "target_id",
    "dialog_policy",
    "dialog_timeout_s",
    "dialog_bridge",
];
/// Arguments of `browser_disconnect`.
pub(crate) const DISCONNECT_ARGS: &[&str] = &["task_id"];

/// How long `Browser.close` on the launched browser waits for its exit.
const BROWSER_EXIT_WAIT: Duration = Duration::from_secs(3);

fn failure(error: impl Into<String>) -> Value {
    json!({"success": false, "error": error.into()})
}

/// The task id of a call: `default` when absent or null; a tool error naming `task_id` when it
/// is no valid task id ([`SupervisorRegistry::check_task_id`]).
fn task_id(args: &Value) -> Result<String, Value> {
    match args.get("task_id") {
        None | Some(Value::Null) => Ok("default".into()),
        Some(Value::String(s)) => match SupervisorRegistry::check_task_id(s) {
            Ok(()) => Ok(s.clone()),
            Err(e) => Err(failure(e.to_string())),
        },
        Some(other) => Err(failure(format!(
            "task_id must be a string, got {}; omit it for the task \"default\"",
            kind_of(other)
        ))),
    }
}

/// What kind of JSON value `v` is, for messages (never the value: it may be huge).
fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Whether `name` is a tool this server has.
pub(crate) fn is_tool(name: &str) -> bool {
    matches!(
        name,
        "browser_connect"
            | "browser_snapshot"
            | "browser_dialog"
            | "browser_cdp"
            | "browser_disconnect"
    )
}

/// Runs tool `name` (one of [`is_tool`]) with `args`; `cancel` abandons a `browser_cdp` call
/// and calls off a `browser_connect`'s start (nothing of it is kept).
pub(crate) fn call(inner: &Arc<Inner>, name: &str, args: &Value, cancel: &CancelToken) -> Value {
    if !args.is_object() {
        return failure(format!(
            "arguments must be a JSON object, got {}; see the tool's inputSchema",
            kind_of(args)
        ));
    }
    let task = match task_id(args) {
        Ok(t) => t,
        Err(e) => return e,
    };
    let reg = &inner.registry;
    let mut out = match name {
        "browser_connect" => connect(inner, &task, args, cancel),
        "browser_snapshot" => {
            let mut s = tools::browser_snapshot(reg, &task, args);
            match s.as_object_mut() {
                Some(o) if o.is_empty() => tools::no_supervisor(&task),
                Some(o) => {
                    if !o.contains_key("success") {
                        o.insert("success".into(), json!(true));
                    }
                    s
                }
                None => s,
            }
        }
        "browser_dialog" => tools::browser_dialog(reg, &task, args),
        "browser_cdp" => {
            // Closing the launched browser: answer once it is gone, so that the next
            // browser_connect relaunches it instead of finding it still shutting down.
            let closing = (args.get("method").and_then(Value::as_str) == Some("Browser.close"))
                .then(|| inner.browser.current())
                .flatten()
                .filter(|l| reg.get(&task).is_some_and(|s| s.cdp_url_raw() == l.ws_url));
            let out = tools::browser_cdp_cancellable(reg, &task, args, cancel);
            if let Some(l) = closing {
                let _ = l.exited.recv_timeout(BROWSER_EXIT_WAIT);
            }
            out
        }
        "browser_disconnect" => return disconnect(inner, &task, args),
        other => failure(format!("unknown tool {other:?}")),
    };
    tools::add_dialog_status(reg, &task, &mut out);
    out
}

/// `browser_disconnect`: stops the task's supervisor. An unknown task is no error
/// (`stopped: false`), so disconnecting twice is harmless. The result names the dialogs that the
/// stop dismissed (`dismissed_dialogs`); it has no `pending_dialogs`, since nothing is left to
/// watch them.
fn disconnect(inner: &Inner, task: &str, args: &Value) -> Value {
    if let Err(e) = tools::check_args(args, DISCONNECT_ARGS) {
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

fn str_arg(args: &Value, key: &str) -> Result<Option<String>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!("{key} must be a string, got {}", kind_of(other))),
    }
}

fn start_options(args: &Value) -> Result<(Option<String>, StartOptions), String> {
    let mut opts = StartOptions {
        target_id: str_arg(args, "target_id")?,
        ..Default::default()
    };
    if let Some(p) = str_arg(args, "dialog_policy")? {
        opts.dialog_policy = Some(DialogPolicy::parse(&p).map_err(|e| e.to_string())?);
    }
    if let Some(b) = str_arg(args, "dialog_bridge")? {
        opts.dialog_bridge = Some(BridgeMode::parse(&b).map_err(|e| e.to_string())?);
    }
    match args.get("dialog_timeout_s") {
        None | Some(Value::Null) => {}
        Some(v) => match v.as_f64() {
            Some(t) if t > 0.0 && t <= 86_400.0 => {
                opts.dialog_timeout = Some(Duration::from_secs_f64(t))
            }
            _ => {
                let got: String = v.to_string().chars().take(40).collect();
                return Err(format!(
                    "dialog_timeout_s must be a number of seconds > 0 and <= 86400, got {got}"
                ));
            }
        },
    }
    let url = str_arg(args, "cdp_url")?.filter(|u| !u.trim().is_empty());
    Ok((url, opts))
}

/// `browser_connect`. With a URL (argument or configuration): that endpoint. Without: the
/// server's launched browser, a new tab per task (unless `target_id` names one). When the
/// launched browser turns out to have died (the start fails, or finds the old supervisor
/// reconnecting), it is relaunched and the start retried once. `cancel` calls the whole of it
/// off at once (a launch, a start), leaving nothing behind: the response is not sent then.
fn connect(inner: &Arc<Inner>, task: &str, args: &Value, cancel: &CancelToken) -> Value {
    if let Err(e) = tools::check_args(args, CONNECT_ARGS) {
        return e;
    }
    let (url, mut opts) = match start_options(args) {
        Ok(x) => x,
        Err(e) => return failure(e),
    };
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
    opts.new_page = opts.target_id.is_none();
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

fn started(
    inner: &Arc<Inner>,
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
            tools::add_dialog_status(&inner.registry, task, &mut out);
            out
        }
        Err(e) => failure(e.to_string()),
    }
}

//! `tools/call`: argument checks and the five tools, each returning the tool's JSON (SPEC §10,
//! §16) with the task's dialog status added. Argument errors, `task_id` included, are tool
//! errors (`success: false`, shown as `isError: true`), never JSON-RPC errors (SEP-1303).

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::RecvTimeoutError;
use serde_json::{Value, json};

use super::Inner;
use crate::cancel::CancelToken;
use crate::config::{BridgeMode, DialogPolicy};
use crate::error::Error;
use crate::redact::redact_url;
use crate::registry::StartOptions;
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

/// Longest task id accepted.
const TASK_ID_MAX: usize = 256;

fn failure(error: impl Into<String>) -> Value {
    json!({"success": false, "error": error.into()})
}

/// The task id of a call: `default` when absent or null.
fn task_id(args: &Value) -> Result<String, Value> {
    match args.get("task_id") {
        None | Some(Value::Null) => Ok("default".into()),
        Some(Value::String(s)) if !s.trim().is_empty() && s.len() <= TASK_ID_MAX => Ok(s.clone()),
        Some(Value::String(_)) => Err(failure(format!(
            "task_id must be a non-empty string of at most {TASK_ID_MAX} bytes"
        ))),
        Some(other) => Err(failure(format!(
            "task_id must be a string, got {other}; omit it for the task \"default\""
        ))),
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

/// Runs tool `name` (one of [`is_tool`]) with `args`; `cancel` abandons a `browser_cdp` call.
pub(crate) fn call(inner: &Arc<Inner>, name: &str, args: &Value, cancel: &CancelToken) -> Value {
    if !args.is_object() {
        return failure(format!(
            "arguments must be a JSON object, got {args}; see the tool's inputSchema"
        ));
    }
    let task = match task_id(args) {
        Ok(t) => t,
        Err(e) => return e,
    };
    let reg = &inner.registry;
    let mut out = match name {
        "browser_connect" => connect(inner, &task, args),
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
        Some(other) => Err(format!("{key} must be a string, got {other}")),
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
                return Err(format!(
                    "dialog_timeout_s must be a number of seconds > 0 and <= 86400, got {v}"
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
/// reconnecting), it is relaunched and the start retried once.
fn connect(inner: &Arc<Inner>, task: &str, args: &Value) -> Value {
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
        return start(inner, task, &url, opts, false);
    }
    opts.new_page = opts.target_id.is_none();
    let mut retried = false;
    loop {
        let launched = match inner.browser.get_or_launch(inner.registry.config()) {
            Ok(l) => l,
            Err(e) => return failure(e),
        };
        let result = inner
            .registry
            .get_or_start_with(task, &launched.ws_url, opts.clone());
        // A browser that is going away (e.g. right after Browser.close) refuses connections or
        // leaves the old supervisor reconnecting: wait for its exit, then relaunch once.
        let usable = matches!(&result, Ok(sup) if sup.is_active());
        if !usable
            && !retried
            && matches!(
                launched.exited.recv_timeout(Duration::from_secs(2)),
                Err(RecvTimeoutError::Disconnected)
            )
        {
            retried = true;
            continue;
        }
        return started(inner, task, &launched.ws_url, result, true);
    }
}

fn start(inner: &Arc<Inner>, task: &str, url: &str, opts: StartOptions, launched: bool) -> Value {
    let result = inner.registry.get_or_start_with(task, url, opts);
    started(inner, task, url, result, launched)
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

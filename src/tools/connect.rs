//! `browser_connect` and `browser_disconnect`: a task's supervisor started on the endpoint the
//! call or the configuration names, else on the browser its caller launches
//! (`Context::browser`: the MCP server's), and stopped.
//!
//! A started supervisor is the caller's to follow: the MCP engine reads the result and watches
//! the new supervisor's events; nothing here calls back into it.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::Context;
use super::args::{failure, opt_str};
use crate::cancel::CancelToken;
use crate::config::{BridgeMode, DialogPolicy, MAX_DIALOG_TIMEOUT, StartOptions};
use crate::error::Error;
use crate::launch_slot::Launched;
use crate::quote::quoted_json;
use crate::redact::redact_url;
use crate::registry::SupervisorRegistry;
use crate::supervisor::{StartRequest, Supervisor};

/// `browser_disconnect`: stops the task's supervisor. An unknown task is no error
/// (`stopped: false`), so disconnecting twice is harmless. The result names the dialogs that the
/// stop dismissed (`dismissed_dialogs`); it has no `pending_dialogs`, since nothing is left to
/// watch them. (It takes no argument but `task_id`, which the caller's rule read.)
pub(crate) fn disconnect(reg: &SupervisorRegistry, task: &str) -> Value {
    let pending = reg
        .with_snapshot(task, |s| {
            s.pending_dialogs
                .iter()
                .map(|d| d.to_json())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let stopped = reg.stop(task);
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
/// caller's launched browser (none: a failure saying to pass `cdp_url`). Either way a task gets
/// a new page of its own (SPEC §4: in a window of its own, closed when the task stops), never
/// one the browser already held, unless `target_id` names one. When the launched browser turns
/// out to have died (the start fails, or finds the old supervisor reconnecting), it is
/// relaunched and the start retried once. The context's token calls the whole of it off at
/// once (a launch, a start), leaving nothing behind.
pub(crate) fn connect(ctx: &Context<'_>, task: &str, args: &Value) -> Value {
    let (url, mut opts) = match start_options(args) {
        Ok(x) => x,
        Err(e) => return e,
    };
    opts.own_page = opts.target_id.is_none();
    let fresh = CancelToken::new();
    let cancel = ctx.cancel.unwrap_or(&fresh);
    let reg = ctx.registry;
    let configured = reg
        .config()
        .cdp_url()
        .map(str::to_string)
        .filter(|u| !u.trim().is_empty());
    if let Some(url) = url.or(configured) {
        let request = StartRequest::new(task, &url)
            .with_options(opts)
            .with_cancel(cancel);
        let result = reg.start(request);
        return started(reg, task, &url, result, false);
    }
    let Some(browser) = ctx.browser else {
        return failure(
            "no cdp_url given and none configured (browser.cdp_url), and this caller launches \
             no browser: pass the cdp_url of a running browser",
        );
    };
    let mut retried = false;
    loop {
        let launched = match browser.get_or_launch(reg.config(), cancel) {
            Ok(l) => l,
            Err(e) => return failure(e),
        };
        let request = StartRequest::new(task, &launched.ws_url)
            .with_options(opts.clone())
            .with_cancel(cancel);
        let result = reg.start(request);
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
        return started(reg, task, &launched.ws_url, result, true);
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

/// `browser_connect`'s result (the table adds the dialog status), with the task's CDP endpoint
/// (`cdp_endpoint`, `cdp_http_endpoint`: issue 30) when its listener could start.
fn started(
    reg: &SupervisorRegistry,
    task: &str,
    url: &str,
    result: Result<Arc<Supervisor>, Error>,
    launched: bool,
) -> Value {
    match result {
        Ok(sup) => {
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
            match reg.cdp_endpoint(task) {
                Ok(ep) => {
                    out["cdp_endpoint"] = json!(ep.ws_url);
                    out["cdp_http_endpoint"] = json!(ep.http_url);
                }
                Err(e) => log::warn!("task {task}: no CDP endpoint: {e}"),
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

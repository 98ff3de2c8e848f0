//! `browser_cdp`: a raw CDP call, routed by `frame_id`/`target_id` or by its domain, and every
//! way it can fail as a tool result.

use std::time::Duration;

use serde_json::{Value, json};

use super::Context;
use super::args::{check_task, failure, kind_of, live, opt_str, opt_timeout_s};
use crate::cancel::CancelToken;
use crate::error::Error;
use crate::registry::SupervisorRegistry;
use crate::supervisor::Route;

/// How long a `Browser.close` of the caller's launched browser waits for its exit.
const BROWSER_EXIT_WAIT: Duration = Duration::from_secs(3);

/// `browser_cdp`'s result, without the dialog status (`table::run` checked the argument names);
/// the context's token abandons the call.
/// When it closes the browser the caller launched (`Context::browser`), the answer waits until
/// that browser is gone, so that the next `browser_connect` launches a new one instead of
/// finding it still shutting down.
pub(crate) fn run(ctx: &Context<'_>, task_id: &str, args: &Value) -> Value {
    let reg = ctx.registry;
    let closing = (args.get("method").and_then(Value::as_str) == Some("Browser.close"))
        .then(|| ctx.browser?.current())
        .flatten()
        .filter(|l| {
            reg.get(task_id)
                .is_some_and(|s| s.cdp_url_raw() == l.ws_url)
        });
    let out = call(reg, task_id, args, ctx.cancel).unwrap_or_else(|e| e);
    if let Some(l) = closing {
        let _ = l.exited.recv_timeout(BROWSER_EXIT_WAIT);
    }
    out
}

fn call(
    reg: &SupervisorRegistry,
    task_id: &str,
    args: &Value,
    cancel: Option<&CancelToken>,
) -> Result<Value, Value> {
    check_task(task_id)?;
    let method = match opt_str(args, "method")? {
        Some(m) if !m.trim().is_empty() => m,
        _ => {
            return Err(failure(
                "missing method: a CDP method name such as \"Runtime.evaluate\"",
            ));
        }
    };
    let params = match args.get("params") {
        None | Some(Value::Null) => json!({}),
        Some(p @ Value::Object(_)) => p.clone(),
        Some(other) => {
            return Err(failure(format!(
                "params must be an object, got {}",
                kind_of(other)
            )));
        }
    };
    let frame_id = opt_str(args, "frame_id")?;
    let target_id = opt_str(args, "target_id")?;
    let timeout_s = opt_timeout_s(args)?;
    let route = match (frame_id, target_id) {
        (Some(_), Some(_)) => return Err(failure("give frame_id or target_id, not both")),
        (Some(f), None) => Route::Frame(f),
        (None, Some(t)) => Route::Target(t),
        (None, None) => Route::by_domain(method),
    };
    let sup = live(reg, task_id)?;
    let timeout = timeout_s.map_or(sup.config().call_timeout, Duration::from_secs_f64);
    let result = match cancel {
        Some(c) => sup.call_cancellable(method, params, route, timeout, c),
        None => sup.call_routed(method, params, route, timeout),
    };
    // The session it went to stays out: session ids are routing details, never LLM-visible.
    let (result, _session) = result.map_err(|e| failed(&e, route))?;
    let mut out = json!({
        "success": true,
        "method": method,
        "routed_to": route.as_str(),
        "result": result,
    });
    if let Some(f) = frame_id {
        out["frame_id"] = json!(f);
    }
    Ok(out)
}

/// A failed call as a tool result: the error's own words, and what the agent can act on (the
/// browser's error, the dialog that blocks the call, the option that refuses it, ...).
fn failed(e: &Error, route: Route<'_>) -> Value {
    let mut out = failure(e);
    match e {
        Error::Cdp { code, message, .. } => {
            if let Some(hint) = method_not_found_hint(route, *code) {
                out["error"] = json!(format!("{e}{hint}"));
            }
            out["routed_to"] = json!(route.as_str());
            out["cdp_error"] = json!({"code": code, "message": message});
        }
        Error::BlockedByDialog { dialog, .. } => {
            out["routed_to"] = json!(route.as_str());
            out["blocked_by_dialog"] = dialog.to_json();
        }
        Error::Refused { option, .. } => out["refused_by"] = json!(option),
        Error::Cancelled(_) => out["cancelled"] = json!(true),
        _ => {}
    }
    out
}

/// What to add to a CDP "method not found" (`-32601`): which target the call went to, and how
/// to send it elsewhere.
fn method_not_found_hint(route: Route<'_>, code: i64) -> Option<&'static str> {
    match (route, code) {
        (Route::Browser, -32601) => Some(
            " (the call went to the browser target, which does not serve this domain; pass \
             target_id or frame_id to send it to the page)",
        ),
        (_, -32601) => Some(
            " (this target does not serve that method; without target_id and frame_id, \
             browser-level domains go to the browser and the rest to the page)",
        ),
        _ => None,
    }
}

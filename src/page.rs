//! The supervisor page (issue 33): what a person sees of every task at `/`, live, and answers
//! from. A product surface of its own, not an MCP one: the HTTP server (`mcp::http`) serves it
//! for `mcp --http`, `watch --http` and `proxy --http` (the last two with `/mcp` off), after
//! that server's access rules (`mcp/http/access.rs`: `Host` names this server, an `Origin` is
//! its own, and with a token every request carries it, as `Authorization: Bearer` or the
//! cookie `/?token=` sets). Nothing here reads or writes the connection, and nothing here knows
//! the server: [`head`] and [`post`] decide from the request and what the server passes in
//! (the registry, the login's cookie), and [`Hub::stream`] writes through the server's writer.
//!
//! * `GET /`: the page (`page/index.html`, with `page/page.css` and `page/page.js`: written by
//!   hand, served from the binary, no build step). `/?token=TOKEN` (once): 303 to `/` with
//!   the cookie (`HttpOnly; SameSite=Strict`), so the token leaves the address bar.
//! * `GET /events`: Server-Sent Events of every task's view (`page/hub.rs`, `page/view.rs`).
//! * `POST /api/answer` (JSON: `task_id`, `dialog_id`, `action`, `prompt_text`): answers a
//!   pending dialog on the path `browser_dialog` takes (`Supervisor::respond_as_human`: the
//!   same rules, recorded `closed_by: "human"`).
//! * `POST /api/hold` (`task_id`, `hold`: true or false): a person takes the task over
//!   (`Supervisor::hand_over`) or gives it back (`Supervisor::take_back`).
//! * `POST /api/thumbnail` (`task_id`): a small JPEG of the task's page, base64
//!   (`Supervisor::thumbnail`: at most one capture a second per task, on this connection's
//!   thread, never while a dialog is open; otherwise the reason there is none).
//!
//! Every answer carries a Content-Security-Policy that allows no inline script and no other
//! origin, and the page inserts nothing as HTML (`textContent` only), so a dialog message
//! such as `<img src=x onerror=...>` is text.

mod hub;
mod view;

use serde_json::{Value, json};

use base64::Engine as _;

use crate::config::DialogAction;
use crate::error::Error;
use crate::http1::{RequestHead as Head, Response};
use crate::registry::SupervisorRegistry;
use crate::supervisor::Supervisor;

pub(crate) use hub::Hub;

const INDEX_HTML: &str = include_str!("page/index.html");
const PAGE_JS: &str = include_str!("page/page.js");
const PAGE_CSS: &str = include_str!("page/page.css");

const API_ANSWER: &str = "/api/answer";
const API_HOLD: &str = "/api/hold";
const API_THUMBNAIL: &str = "/api/thumbnail";

/// The largest POST body the page sends (a prompt answer and ids).
pub(crate) const BODY_MAX: usize = 64 * 1024;

/// What every answer of the page says about itself.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// What a page request comes to.
pub(crate) enum PagePlan {
    /// This answer, now.
    Respond(Response),
    /// Read the body, then [`post`].
    ReadBody,
    /// Open the event stream (`hub.rs`).
    Events,
}

/// An answer of the page with its safety headers.
fn page_response(status: u16, content_type: &'static str, body: &str) -> Response {
    Response::typed(status, content_type, body.to_string())
        .with("Content-Security-Policy", CSP)
        .with("X-Content-Type-Options", "nosniff")
        .with("Referrer-Policy", "no-referrer")
        .with("X-Frame-Options", "DENY")
}

fn text(status: u16, body: &str) -> Response {
    page_response(status, "text/plain; charset=utf-8", body)
}

fn json_answer(status: u16, body: &Value) -> Response {
    page_response(status, "application/json", &body.to_string())
}

/// What a page request's head comes to, once the server's access rules let it in;
/// `login_cookie`: the `Set-Cookie` value when the request is the one-time `/?token=` login.
pub(crate) fn head(head: &Head, login_cookie: Option<String>) -> PagePlan {
    let path = head.path();
    match (head.method.as_str(), path) {
        ("GET" | "HEAD", "/") if head.target.contains('?') => {
            // The one-time login (the access rules checked the token), or a stray query:
            // either way the address bar ends up at `/`.
            let mut r = Response::empty(303).with("Location", "/");
            if let Some(cookie) = login_cookie {
                r = r.with("Set-Cookie", cookie);
            }
            PagePlan::Respond(r.with("Referrer-Policy", "no-referrer"))
        }
        ("GET" | "HEAD", "/") => {
            PagePlan::Respond(page_response(200, "text/html; charset=utf-8", INDEX_HTML))
        }
        ("GET" | "HEAD", "/page.js") => PagePlan::Respond(page_response(
            200,
            "text/javascript; charset=utf-8",
            PAGE_JS,
        )),
        ("GET" | "HEAD", "/page.css") => {
            PagePlan::Respond(page_response(200, "text/css; charset=utf-8", PAGE_CSS))
        }
        ("GET", "/events") => PagePlan::Events,
        ("POST", API_ANSWER | API_HOLD | API_THUMBNAIL) if !is_json(head) => {
            PagePlan::Respond(text(
                415,
                "unsupported media type: POST JSON with Content-Type: application/json",
            ))
        }
        ("POST", API_ANSWER | API_HOLD | API_THUMBNAIL) => PagePlan::ReadBody,
        (_, "/" | "/page.js" | "/page.css" | "/events" | API_ANSWER | API_HOLD | API_THUMBNAIL) => {
            PagePlan::Respond(text(405, "method not allowed").with("Allow", "GET, POST"))
        }
        _ => PagePlan::Respond(text(404, "not found: the supervisor page is at /")),
    }
}

/// Whether a POST says it carries JSON.
fn is_json(head: &Head) -> bool {
    head.text("content-type").is_some_and(|t| {
        t.split(';')
            .next()
            .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
    })
}

/// The answer to a POST of the page, with its `body`, on `registry`'s tasks.
pub(crate) fn post(registry: &SupervisorRegistry, head: &Head, body: &[u8]) -> Response {
    let args: Value = match serde_json::from_slice(body) {
        Ok(v @ Value::Object(_)) => v,
        _ => {
            return json_answer(
                400,
                &json!({"ok": false, "error": "the body is no JSON object"}),
            );
        }
    };
    let Some(task) = arg(&args, "task_id") else {
        return json_answer(400, &json!({"ok": false, "error": "task_id is required"}));
    };
    let Some(sup) = registry.get(task) else {
        let why = format!("no task {}", crate::quote::quoted(task));
        return json_answer(404, &json!({"ok": false, "error": why}));
    };
    match head.path() {
        API_ANSWER => answer(&sup, &args),
        API_HOLD => hold(&sup, &args),
        API_THUMBNAIL => thumbnail(&sup),
        _ => text(404, "not found"),
    }
}

/// A string argument.
fn arg<'a>(args: &'a Value, name: &str) -> Option<&'a str> {
    args.get(name).and_then(Value::as_str)
}

/// An answer that says what went wrong.
fn failed(status: u16, why: impl std::fmt::Display) -> Response {
    json_answer(status, &json!({"ok": false, "error": why.to_string()}))
}

/// `POST /api/answer`: a person answers a pending dialog.
fn answer(sup: &Supervisor, args: &Value) -> Response {
    let Some(dialog) = arg(args, "dialog_id") else {
        return failed(400, "dialog_id is required");
    };
    let action = match arg(args, "action").map(DialogAction::parse) {
        Some(Ok(a)) => a,
        _ => return failed(400, "action is \"accept\" or \"dismiss\""),
    };
    match sup.respond_as_human(action, arg(args, "prompt_text"), Some(dialog)) {
        Ok(d) => json_answer(200, &json!({"ok": true, "dialog": d.id})),
        Err(e) => failed(409, e),
    }
}

/// `POST /api/hold`: a person takes the task over (`hold: true`) or gives it back.
fn hold(sup: &Supervisor, args: &Value) -> Response {
    let result = match args.get("hold").and_then(Value::as_bool) {
        Some(true) => sup.hand_over(),
        Some(false) => sup.take_back(),
        None => return failed(400, "hold is true (take over) or false (take back)"),
    };
    match result {
        Ok(h) => json_answer(200, &json!({"ok": true, "held_since": h.held_since})),
        Err(e) => failed(409, e),
    }
}

/// `POST /api/thumbnail`: the task page's thumbnail, or why there is none.
fn thumbnail(sup: &Supervisor) -> Response {
    match sup.thumbnail() {
        Ok(t) => json_answer(
            200,
            &json!({
                "ok": true,
                "data": base64::engine::general_purpose::STANDARD.encode(&t.jpeg),
                "width": t.width, "height": t.height, "taken_at": t.taken_at,
                "target_id": t.target_id,
            }),
        ),
        Err(Error::CannotCapture(why)) => failed(409, why),
        Err(e) => failed(409, e),
    }
}

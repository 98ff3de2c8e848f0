//! The scripted CDP behaviour: how each command is answered, per its
//! [`Rule`], and the built-in (Chromium-like) answer per method.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::shared::{Conn, Delayed, Shared, Target};
use super::{DEFAULT_PAGE_URL, PRODUCT, Rule};

/// Methods the default behaviour answers with an empty object.
const EMPTY_RESULT_METHODS: &[&str] = &[
    "Page.enable",
    "Page.disable",
    "Runtime.disable",
    "Runtime.runIfWaitingForDebugger",
    "Target.setAutoAttach",
    "Target.setDiscoverTargets",
    "Fetch.enable",
    "Fetch.disable",
    "Fetch.continueRequest",
    "Fetch.fulfillRequest",
    "Network.enable",
    "Page.reload",
    "Page.navigate",
    "Log.enable",
];
/// The browser target's id (`Target.attachToBrowserTarget`).
const BROWSER_TARGET_ID: &str = "BROWSER";
/// Domains that only exist on a page session, not on the browser endpoint.
const PAGE_ONLY_DOMAINS: &[&str] = &["Page.", "Runtime.", "Network.", "Log."];

/// A CDP error answer.
#[derive(Debug, Clone, PartialEq)]
struct CdpError {
    code: i64,
    message: String,
}

impl CdpError {
    /// Builds an error answer.
    fn new(code: i64, message: impl Into<String>) -> Self {
        CdpError {
            code,
            message: message.into(),
        }
    }

    /// Chromium's answer for a method it does not know.
    fn not_found(method: &str) -> Self {
        CdpError::new(-32601, format!("'{method}' wasn't found"))
    }
}

/// Builds the answer to `cmd`, echoing its `id` and `sessionId`.
fn reply_frame(cmd: &Value, outcome: Result<Value, CdpError>) -> Value {
    let mut frame = Map::new();
    frame.insert("id".into(), cmd.get("id").cloned().unwrap_or(Value::Null));
    if let Some(session) = cmd.get("sessionId") {
        frame.insert("sessionId".into(), session.clone());
    }
    match outcome {
        Ok(result) => frame.insert("result".into(), result),
        Err(e) => frame.insert(
            "error".into(),
            json!({"code": e.code, "message": e.message}),
        ),
    };
    Value::Object(frame)
}

/// The security origin of a URL, as Chromium reports it for a frame.
pub(super) fn origin_of(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) if scheme == "http" || scheme == "https" => {
            let host = rest.split('/').next().unwrap_or_default();
            format!("{scheme}://{host}")
        }
        _ => "://".to_string(),
    }
}

/// Handles one text message: records it and answers it per its rule.
pub(super) fn handle_text(shared: &Shared, conn: &Arc<Conn>, text: &str) {
    let cmd: Value = match serde_json::from_str(text) {
        Ok(cmd) => cmd,
        Err(_) => return shared.record_invalid(text.to_string()),
    };
    let (silent, rule) = shared.record_command(&cmd);
    if silent || !cmd.get("id").is_some_and(Value::is_number) {
        return;
    }
    if !cmd.get("method").is_some_and(Value::is_string) {
        let error = CdpError::new(-32600, "Message must have string 'method' property");
        return shared.send_json(conn, &reply_frame(&cmd, Err(error)));
    }
    apply_rule(shared, conn, &cmd, rule);
}

/// Answers a delayed command once it is due (the timer thread's `fire`), unless its connection
/// has closed in the meantime.
pub(super) fn apply_delayed(shared: &Shared, delayed: Delayed) {
    if !delayed.conn.is_closed() {
        apply_rule(shared, &delayed.conn, &delayed.cmd, delayed.rule);
    }
}

/// Answers `cmd` on `conn` according to `rule`.
pub(super) fn apply_rule(shared: &Shared, conn: &Arc<Conn>, cmd: &Value, rule: Rule) {
    if shared.state().silent {
        return;
    }
    match rule {
        Rule::Default => {
            let outcome = default_answer(shared, conn, cmd);
            shared.send_json(conn, &reply_frame(cmd, outcome));
        }
        Rule::Reply(result) => shared.send_json(conn, &reply_frame(cmd, Ok(result))),
        Rule::Error { code, message } => {
            let error = CdpError::new(code, message);
            shared.send_json(conn, &reply_frame(cmd, Err(error)));
        }
        Rule::Ignore => {}
        Rule::Delay(delay, inner) => shared.schedule(delay, conn, cmd, *inner),
        Rule::CloseConnection => shared.close_conn(conn),
    }
}

/// The built-in (Chromium-like) answer; automatic events are sent first.
fn default_answer(shared: &Shared, conn: &Conn, cmd: &Value) -> Result<Value, CdpError> {
    let method = cmd
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let params = cmd.get("params").cloned().unwrap_or(Value::Null);
    let session = match cmd.get("sessionId") {
        None => None,
        Some(id) => {
            let id = id.as_str().unwrap_or_default();
            match conn.session_target(id) {
                Some(target) => Some((id, target)),
                None => return Err(CdpError::new(-32001, "Session with given id not found.")),
            }
        }
    };
    match method {
        "Target.getTargets" => {
            let infos: Vec<Value> = shared
                .state()
                .targets
                .iter()
                .map(|t| t.info(false))
                .collect();
            Ok(json!({"targetInfos": infos}))
        }
        "Target.createTarget" => Ok(create_target(shared, &params)),
        "Target.closeTarget" => close_target(shared, &params),
        "Target.attachToTarget" => attach_to_target(shared, conn, &params, session),
        "Target.attachToBrowserTarget" => Ok(attach_to_browser(shared, conn)),
        "Target.setAutoAttach" if session.is_none() && shared.state().auto_attach_pages => {
            if params.get("autoAttach").and_then(Value::as_bool) == Some(true) {
                attach_every_page(shared, conn);
            }
            Ok(json!({}))
        }
        "Target.getTargetInfo" if shared.state().auto_attach_pages => {
            let target_id = params
                .get("targetId")
                .and_then(Value::as_str)
                .unwrap_or_default();
            match shared.target(target_id) {
                Some(t) => Ok(json!({"targetInfo": t.info(false)})),
                None => Err(CdpError::new(-32602, "No target with given id found")),
            }
        }
        "Target.detachFromTarget" if shared.state().auto_attach_pages => {
            let sid = params
                .get("sessionId")
                .and_then(Value::as_str)
                .unwrap_or_default();
            match conn.remove_session(sid) {
                Some(target) => {
                    let event = json!({"sessionId": sid, "targetId": target});
                    shared.send_event(conn, None, "Target.detachedFromTarget", event);
                    Ok(json!({}))
                }
                None => Err(CdpError::new(-32602, "No session with given id")),
            }
        }
        "Browser.getVersion" => Ok(json!({
            "protocolVersion": "1.3",
            "product": PRODUCT,
            "revision": "0",
            "userAgent": "Fake",
            "jsVersion": "0",
        })),
        m if EMPTY_RESULT_METHODS.contains(&m) && !needs_page(m, session.is_some()) => {
            Ok(json!({}))
        }
        "Page.addScriptToEvaluateOnNewDocument" if session.is_some() => {
            Ok(json!({"identifier": "1"}))
        }
        "Runtime.evaluate" if session.is_some() => {
            Ok(json!({"result": {"type": "string", "value": "fake"}}))
        }
        "Page.getFrameTree" => match session {
            Some((_, target)) => frame_tree(shared, &target),
            None => Err(CdpError::not_found(method)),
        },
        "Runtime.enable" => match session {
            Some((id, target)) => {
                let context = json!({"context": {
                    "id": 1,
                    "origin": origin_of(&target_url(shared, &target)),
                    "name": "",
                    "uniqueId": "CTX-U-1",
                    "auxData": {"isDefault": true, "type": "default", "frameId": target},
                }});
                shared.send_event(conn, Some(id), "Runtime.executionContextCreated", context);
                Ok(json!({}))
            }
            None => Err(CdpError::not_found(method)),
        },
        // Every target of the fake runs in a renderer of its own (a test that wants two
        // sessions to share one scripts this method's reply).
        "Runtime.getIsolateId" => match session {
            Some((_, target)) => Ok(json!({"id": format!("isolate-{target}")})),
            None => Err(CdpError::not_found(method)),
        },
        "Page.handleJavaScriptDialog" => match session {
            Some((id, _)) => handle_dialog(shared, conn, id, &params),
            None => Err(CdpError::not_found(method)),
        },
        _ => Err(CdpError::not_found(method)),
    }
}

/// Whether `method` belongs to a page-only domain and there is no session.
fn needs_page(method: &str, has_session: bool) -> bool {
    !has_session && PAGE_ONLY_DOMAINS.iter().any(|d| method.starts_with(d))
}

/// The URL of a target (the default page's URL if it is unknown).
fn target_url(shared: &Shared, target_id: &str) -> String {
    shared
        .target(target_id)
        .map_or_else(|| DEFAULT_PAGE_URL.to_string(), |t| t.url)
}

/// `Target.createTarget {url}`: adds a `PAGE-n` target.
fn create_target(shared: &Shared, params: &Value) -> Value {
    let url = params
        .get("url")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty())
        .unwrap_or("about:blank")
        .to_string();
    let id = shared.update(|st| {
        st.next_page += 1;
        let id = format!("PAGE-{}", st.next_page);
        st.targets.push(Target {
            id: id.clone(),
            title: url.clone(),
            url,
        });
        id
    });
    json!({"targetId": id})
}

/// `Target.closeTarget {targetId}`: removes the target (no events: nothing the fake's clients
/// wait for).
fn close_target(shared: &Shared, params: &Value) -> Result<Value, CdpError> {
    let target_id = params
        .get("targetId")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let removed = shared.update(|st| {
        let before = st.targets.len();
        st.targets.retain(|t| t.id != target_id);
        st.targets.len() < before
    });
    if removed {
        Ok(json!({"success": true}))
    } else {
        Err(CdpError::new(-32602, "No target with given id found"))
    }
}

/// `Target.attachToTarget`: emits `Target.attachedToTarget` (on the session the command came
/// on, as Chromium does), then answers with the new session id (Chromium's order). Always
/// behaves as flat.
fn attach_to_target(
    shared: &Shared,
    conn: &Conn,
    params: &Value,
    on: Option<(&str, String)>,
) -> Result<Value, CdpError> {
    let target_id = params
        .get("targetId")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Some(target) = shared.target(target_id) else {
        return Err(CdpError::new(-32602, "No target with given id found"));
    };
    let session = attach_session(shared, conn, &target, on.as_ref().map(|(s, _)| *s));
    Ok(json!({"sessionId": session}))
}

/// `Target.attachToBrowserTarget`: a session on the browser target (its commands answered as
/// on the connection's root), announced with `Target.attachedToTarget` first, as Chromium does.
fn attach_to_browser(shared: &Shared, conn: &Conn) -> Value {
    let session = shared.new_session_id();
    conn.add_session(&session, BROWSER_TARGET_ID);
    let event = json!({
        "sessionId": session,
        "targetInfo": {"targetId": BROWSER_TARGET_ID, "type": "browser", "title": "",
                       "url": "", "attached": true, "canAccessOpener": false},
        "waitingForDebugger": false,
    });
    shared.send_event(conn, None, "Target.attachedToTarget", event);
    json!({"sessionId": session})
}

/// Gives `conn` a new session on `target` and tells it so (`Target.attachedToTarget`, on `on`).
fn attach_session(shared: &Shared, conn: &Conn, target: &Target, on: Option<&str>) -> String {
    let session = shared.new_session_id();
    conn.add_session(&session, &target.id);
    let event = json!({
        "sessionId": session,
        "targetInfo": target.info(true),
        "waitingForDebugger": false,
    });
    shared.send_event(conn, on, "Target.attachedToTarget", event);
    session
}

/// A browser-level auto-attach (`FakeBrowser::set_auto_attach_pages`): every page the browser
/// holds is attached to `conn`, as Chromium does, each with a session of its own.
fn attach_every_page(shared: &Shared, conn: &Conn) {
    let targets = shared.state().targets.clone();
    for target in targets {
        attach_session(shared, conn, &target, None);
    }
}

/// `Page.getFrameTree` for a page target.
fn frame_tree(shared: &Shared, target_id: &str) -> Result<Value, CdpError> {
    let url = target_url(shared, target_id);
    let secure = if url.starts_with("https://") {
        "Secure"
    } else {
        "InsecureScheme"
    };
    Ok(json!({"frameTree": {"frame": {
        "id": target_id,
        "loaderId": "LOADER-1",
        "url": url,
        "domainAndRegistry": "",
        "securityOrigin": origin_of(&url),
        "mimeType": "text/html",
        "adFrameStatus": {"adFrameType": "none"},
        "secureContextType": secure,
        "crossOriginIsolatedContextType": "NotIsolated",
        "gatedAPIFeatures": [],
    }}}))
}

/// `Page.handleJavaScriptDialog`: closes the open dialog, emits
/// `Page.javascriptDialogClosed` on the session, then answers.
fn handle_dialog(
    shared: &Shared,
    conn: &Conn,
    session: &str,
    params: &Value,
) -> Result<Value, CdpError> {
    if !shared.take_dialog() {
        return Err(CdpError::new(-32602, "No dialog is showing"));
    }
    let accept = params
        .get("accept")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let input = params
        .get("promptText")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let event = json!({"result": accept, "userInput": input, "frameId": super::DEFAULT_PAGE_ID});
    shared.send_event(conn, Some(session), "Page.javascriptDialogClosed", event);
    Ok(json!({}))
}

//! One accepted connection: its request head (read with `crate::http1`, with a deadline), the
//! `Host` and `Origin` rules, discovery (`/json/version`, `/json/list`) and the WebSocket
//! upgrade, after which the connection is a client's (`client.rs`).

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use log::debug;
use serde_json::json;

use super::{Found, Listener, client};
use crate::config::EndpointSettings;
use crate::core::Command;
use crate::deadline::Deadline;
use crate::http1::{Conn, Limits, RequestHead, Response};
use crate::outbound::Outbound;
use crate::supervisor::Supervisor;
use crate::transport::Socket;

/// How long a connection may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// How long discovery waits for the browser's `Browser.getVersion`.
const VERSION_TIMEOUT: Duration = Duration::from_secs(5);

/// Why `/json/protocol` is not served (the browser's is 1.6 MB, fetched from its own port).
const NO_PROTOCOL: &str = "/json/protocol is not served by the task endpoint: use the protocol \
    your client ships (chrome-remote-interface: the option local: true)";

const LIMITS: Limits = Limits {
    head: 16 * 1024,
    headers: 64,
    body: 0,
};

/// Serves one connection: one request, or a client's whole WebSocket.
pub(super) fn serve(l: &Arc<Listener>, tcp: TcpStream, peer: SocketAddr) {
    let _ = tcp.set_nodelay(true);
    let Ok(mut raw) = tcp.try_clone() else { return };
    let deadline = Deadline::after(HEAD_TIMEOUT);
    let mut conn = Conn::new(Socket::new(tcp, deadline));
    let head = match conn.read_request(deadline, None, &LIMITS) {
        Ok(Some(h)) => h,
        Ok(None) => return,
        Err(e) => {
            debug!("CDP endpoint: a bad request from {peer}: {e}");
            return answer(&mut raw, Response::json(400, error_body("bad request")));
        }
    };
    if !host_ok(head.text("host"), l.addr) {
        let msg = "Host header is specified and is not an IP address or localhost.";
        return answer(&mut raw, Response::json(403, error_body(msg)));
    }
    let path = head.path().to_string();
    let not_found = |raw: &mut TcpStream, what: &str| {
        answer(raw, Response::json(404, error_body(what)));
    };
    // chrome-remote-interface asks for the protocol at the root of the host of the WebSocket
    // URL it was given, outside the task's token: tell it what to do rather than "no such
    // task". Nothing of any task is served there.
    if path.trim_start_matches('/').trim_end_matches('/') == "json/protocol" {
        return not_found(&mut raw, NO_PROTOCOL);
    }
    let Some((token, rest)) = path.trim_start_matches('/').split_once('/') else {
        return not_found(&mut raw, "not found");
    };
    let Some((found, browser_id)) = l.find(token) else {
        return not_found(&mut raw, "no such task");
    };
    if let Some(id) = rest.strip_prefix("devtools/page/") {
        // A page client (`mux/page.rs`), on a target `/json/list` lists: Chromium's refusal
        // otherwise (500, its words), for a target of another task as for none.
        let sup = match found {
            Found::Task(sup) if task_targets(&sup).iter().any(|i| i["targetId"] == id) => sup,
            _ => {
                let id: String = id.chars().take(64).collect();
                let msg = format!("No such target id: {id}");
                return answer(&mut raw, Response::typed(500, "text/plain", msg));
            }
        };
        if let Err(r) = upgrade_checks(&head, &l.settings) {
            return answer(&mut raw, r);
        }
        if !switch(&mut raw, &head) {
            return;
        }
        let (socket, leftover) = conn.into_parts();
        return client::run(
            &sup,
            socket.into_tcp(),
            leftover,
            peer,
            Some(id.to_string()),
        );
    }
    if let Some(id) = rest.strip_prefix("devtools/browser/") {
        if id != browser_id {
            return not_found(&mut raw, "no such browser");
        }
        if let Err(r) = upgrade_checks(&head, &l.settings) {
            return answer(&mut raw, r);
        }
        let (sup, task) = match found {
            Found::Task(sup) => (sup, None),
            Found::Proxy(p) => match p.start_task(peer) {
                Ok(task) => (Arc::clone(&task.sup), Some((p, task))),
                Err(e) => {
                    let msg = format!("the proxy could not start a task for this client: {e}");
                    return answer(&mut raw, Response::json(502, error_body(&msg)));
                }
            },
        };
        let upgraded = switch(&mut raw, &head);
        let (socket, leftover) = conn.into_parts();
        return match task {
            Some((p, task)) => p.run_client(task, upgraded, socket.into_tcp(), leftover, peer),
            None if upgraded => client::run(&sup, socket.into_tcp(), leftover, peer, None),
            None => {}
        };
    }
    let urls = l.urls(token, &browser_id);
    if let Found::Task(sup) = &found
        && let Some(r) = target_command(sup, &head, rest, &urls.http_url)
    {
        return answer(&mut raw, r);
    }
    let ws_url = urls.ws_url;
    let body = match (rest.trim_end_matches('/'), &found) {
        ("json/version", Found::Task(sup)) => version_json(&task_version(sup), &ws_url),
        ("json/version", Found::Proxy(p)) => version_json(&p.version(), &ws_url),
        ("json" | "json/list", Found::Task(sup)) => task_list(sup, &urls.http_url),
        // Each client of a proxy sees its own task; a discovery request is no client.
        ("json" | "json/list", Found::Proxy(_)) => json!([]),
        ("json/protocol", _) => return not_found(&mut raw, NO_PROTOCOL),
        _ => return not_found(&mut raw, "not found"),
    };
    answer(&mut raw, Response::json(200, format!("{body:#}")));
}

/// What the browser says of itself (`Browser.getVersion`), asked on `sup`'s connection, in the
/// names of Chromium's `/json/version` (empty strings when it does not answer in time).
pub(super) fn task_version(sup: &Supervisor) -> serde_json::Value {
    let cmd = Command::new("Browser.getVersion", json!({}));
    let v = sup
        .shared()
        .round_trip(cmd, Deadline::after(VERSION_TIMEOUT))
        .unwrap_or_default();
    let s = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string();
    json!({
        "Browser": s("product"),
        "Protocol-Version": s("protocolVersion"),
        "User-Agent": s("userAgent"),
        "V8-Version": s("jsVersion"),
        "WebKit-Version": s("revision"),
    })
}

/// Chromium's `/json/version` body: `fields` (its names) and `webSocketDebuggerUrl`.
fn version_json(fields: &serde_json::Value, ws_url: &str) -> serde_json::Value {
    let s = |k: &str| fields.get(k).and_then(|x| x.as_str()).unwrap_or("");
    json!({
        "Browser": s("Browser"),
        "Protocol-Version": s("Protocol-Version"),
        "User-Agent": s("User-Agent"),
        "V8-Version": s("V8-Version"),
        "WebKit-Version": s("WebKit-Version"),
        "webSocketDebuggerUrl": ws_url,
    })
}

/// Answers an upgrade (101); false when the client is gone.
fn switch(raw: &mut TcpStream, head: &RequestHead) -> bool {
    let key = head.text("sec-websocket-key").unwrap_or_default().trim();
    let accept = tungstenite::handshake::derive_accept_key(key.as_bytes());
    let ok = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {accept}\r\n\r\n"
    );
    raw.write_all(ok.as_bytes()).is_ok()
}

/// The task's pages, iframes and workers (`Target.getTargets`, narrowed to what a client of the
/// task may see): what `/json/list` lists and `/devtools/page/<id>` serves.
fn task_targets(sup: &Supervisor) -> Vec<serde_json::Value> {
    let cmd = Command::new("Target.getTargets", json!({}));
    let infos = sup
        .shared()
        .round_trip(cmd, Deadline::after(VERSION_TIMEOUT))
        .ok()
        .and_then(
            |mut v| match v.get_mut("targetInfos").map(serde_json::Value::take) {
                Some(serde_json::Value::Array(a)) => Some(a),
                _ => None,
            },
        )
        .unwrap_or_default();
    let mut infos = match client::mux_for(sup) {
        Some(m) => m.task_targets(infos),
        None => Vec::new(),
    };
    infos.retain(|i| matches!(i["type"].as_str(), Some("page" | "iframe" | "worker")));
    infos
}

/// `/json/list` of a task under `http_url` (`http://HOST:PORT/<token>`): its targets as Chromium
/// lists them, each with the `webSocketDebuggerUrl` of its page connection here
/// (`ws://HOST:PORT/<token>/devtools/page/<id>`). No `devtoolsFrontendUrl`: Chromium's points
/// its DevTools frontend at the browser's own port, which would bypass the task's connection,
/// and this endpoint serves no frontend.
fn task_list(sup: &Supervisor, http_url: &str) -> serde_json::Value {
    let base = http_url.replacen("http://", "ws://", 1);
    let list: Vec<_> = task_targets(sup)
        .iter()
        .map(|i| {
            let ws = i["targetId"]
                .as_str()
                .map(|id| format!("{base}/devtools/page/{id}"));
            json!({
                "description": "",
                "id": i["targetId"],
                "title": i["title"],
                "type": i["type"],
                "url": i["url"],
                "webSocketDebuggerUrl": ws,
            })
        })
        .collect();
    json!(list)
}

/// Chromium's `/json/new`, `/json/activate/<id>` and `/json/close/<id>` on the task's targets
/// (its answers, status codes and words, measured on Chromium 156), or `None` for another path.
/// A page opened by `/json/new` passes the task's security policy as a client's
/// `Target.createTarget` does and joins the task (followed, as pages clients create).
fn target_command(
    sup: &Supervisor,
    head: &RequestHead,
    rest: &str,
    http_url: &str,
) -> Option<Response> {
    // Chromium's content type, even for its plain-text answers.
    let chromium = |status: u16, body: String| {
        Response::typed(status, "application/json; charset=UTF-8", body)
    };
    let no_such = |id: &str| {
        let id: String = id.chars().take(64).collect();
        chromium(404, format!("No such target id: {id}"))
    };
    if rest == "json/new" {
        if head.method != "PUT" {
            let msg = format!(
                "Using unsafe HTTP verb {} to invoke /json/new. This action supports only PUT verb.",
                head.method
                    .chars()
                    .filter(char::is_ascii_alphabetic)
                    .take(16)
                    .collect::<String>()
            );
            return Some(chromium(405, msg));
        }
        let query = head.target.split_once('?').map_or("", |(_, q)| q);
        let query = query.split('#').next().unwrap_or("");
        let url = percent_encoding::percent_decode_str(query).decode_utf8_lossy();
        let url = if url.is_empty() { "about:blank" } else { &url };
        let created = sup.call(
            "Target.createTarget",
            json!({ "url": url }),
            crate::Route::Browser,
            VERSION_TIMEOUT,
        );
        let id = match created {
            Ok(v) => v["targetId"].as_str().unwrap_or_default().to_string(),
            Err(e) => return Some(chromium(500, format!("Could not create a new page: {e}"))),
        };
        if let Some(m) = client::mux_for(sup) {
            m.join_page(&id);
        }
        let ws = format!(
            "{}/devtools/page/{id}",
            http_url.replacen("http://", "ws://", 1)
        );
        let entry = json!({
            "description": "",
            "id": id,
            "title": "",
            "type": "page",
            "url": url,
            "webSocketDebuggerUrl": ws,
        });
        return Some(chromium(200, format!("{entry:#}")));
    }
    let (method, id, done) = if let Some(id) = rest.strip_prefix("json/activate/") {
        ("Target.activateTarget", id, "Target activated")
    } else if let Some(id) = rest.strip_prefix("json/close/") {
        ("Target.closeTarget", id, "Target is closing")
    } else {
        return None;
    };
    if !task_targets(sup).iter().any(|i| i["targetId"] == id) {
        return Some(no_such(id));
    }
    let cmd = Command::new(method, json!({ "targetId": id }));
    Some(
        match sup
            .shared()
            .round_trip(cmd, Deadline::after(VERSION_TIMEOUT))
        {
            Ok(_) => chromium(200, done.to_string()),
            Err(e) => chromium(500, format!("{method}: {e}")),
        },
    )
}

fn error_body(msg: &str) -> String {
    json!({ "error": msg }).to_string()
}

fn answer(raw: &mut TcpStream, r: Response) {
    let _ = raw.set_write_timeout(Some(HEAD_TIMEOUT));
    let _ = raw.write_all(&r.bytes(false));
    let _ = raw.shutdown(std::net::Shutdown::Write);
}

/// A WebSocket upgrade, and no `Origin` (a web page) unless `[endpoint] allowed_origins` lets
/// it in: Chromium's `--remote-allow-origins` rule.
fn upgrade_checks(head: &RequestHead, settings: &EndpointSettings) -> Result<(), Response> {
    if head.method != "GET"
        || !head.has_token("upgrade", "websocket")
        || head.text("sec-websocket-key").is_none()
    {
        return Err(Response::json(
            400,
            error_body("a WebSocket upgrade is expected here"),
        ));
    }
    match head.text("origin") {
        Some(origin) if !settings.origin_allowed(origin) => {
            let msg = format!(
                "Rejected an incoming WebSocket connection from the {} origin: list it in \
                 [endpoint] allowed_origins (or \"*\" for any) to allow connections from it",
                crate::quote::quoted(origin)
            );
            Err(Response::json(403, error_body(&msg)))
        }
        _ => Ok(()),
    }
}

/// Whether `Host` names this listener: a loopback name or its own address, with its port.
fn host_ok(host: Option<&str>, addr: SocketAddr) -> bool {
    let Some(host) = host else { return false };
    let host = host.trim().to_ascii_lowercase();
    let (name, port) = match host.rsplit_once(':') {
        Some((n, p)) if !n.ends_with(']') || n.starts_with('[') => (n, p.parse::<u16>().ok()),
        _ => (host.as_str(), Some(80)),
    };
    let ours = match addr {
        SocketAddr::V4(a) => a.ip().to_string(),
        SocketAddr::V6(a) => format!("[{}]", a.ip()),
    };
    port == Some(addr.port()) && matches!(name, "127.0.0.1" | "localhost" | "[::1]")
        || port == Some(addr.port()) && name == ours
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Chromium's `--remote-allow-origins` rule: no list, no origin; a listed origin (in any
    /// case, with or without a trailing `/`), or any with `*`.
    #[test]
    fn an_origin_passes_only_when_allowed_or_any_is() {
        let upgrade = |origin: Option<&str>| {
            let mut headers = vec![
                ("Host", "127.0.0.1:1"),
                ("Upgrade", "websocket"),
                ("Connection", "Upgrade"),
                ("Sec-WebSocket-Key", "a2V5"),
            ];
            headers.extend(origin.map(|o| ("Origin", o)));
            RequestHead::for_test("GET", "/t/devtools/browser/b", &headers)
        };
        let none = EndpointSettings::default();
        let some = EndpointSettings::default()
            .with_allowed_origins(["http://localhost:3000"])
            .unwrap();
        let any = EndpointSettings::default()
            .with_allowed_origins(["*"])
            .unwrap();
        let status = |origin: Option<&str>, s: &EndpointSettings| match upgrade_checks(
            &upgrade(origin),
            s,
        ) {
            Ok(()) => 101,
            Err(r) => r.status,
        };
        assert_eq!(status(None, &none), 101, "no Origin: not a web page");
        assert_eq!(status(Some("http://localhost:3000"), &none), 403);
        assert_eq!(status(Some("null"), &none), 403);
        assert_eq!(status(Some("http://localhost:3000"), &some), 101);
        assert_eq!(status(Some("HTTP://LOCALHOST:3000/"), &some), 101);
        assert_eq!(status(Some("http://localhost:3001"), &some), 403);
        assert_eq!(status(Some("http://evil.example"), &some), 403);
        assert_eq!(status(Some("http://evil.example"), &any), 101);
        assert_eq!(status(Some("null"), &any), 101);
        assert!(!none.origin_allowed("http://localhost:3000"));
    }

    #[test]
    fn host_must_name_this_listener() {
        let addr: SocketAddr = "127.0.0.1:4242".parse().unwrap();
        assert!(host_ok(Some("127.0.0.1:4242"), addr));
        assert!(host_ok(Some("LOCALHOST:4242"), addr));
        assert!(host_ok(Some("[::1]:4242"), addr));
        assert!(!host_ok(Some("evil.example:4242"), addr));
        assert!(!host_ok(Some("127.0.0.1:4243"), addr));
        assert!(!host_ok(Some("127.0.0.1"), addr));
        assert!(!host_ok(None, addr));
    }
}

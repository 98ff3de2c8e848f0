//! One accepted connection: its request head (read with `crate::http1`, with a deadline), the
//! `Host` and `Origin` rules, discovery (`/json/version`, `/json/list`) and the WebSocket
//! upgrade, after which the connection is a client's (`client.rs`).

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use log::debug;
use serde_json::json;

use super::{Listener, client};
use crate::core::Command;
use crate::deadline::Deadline;
use crate::http1::{Conn, Limits, RequestHead, Response};
use crate::outbound::Outbound;
use crate::transport::Socket;

/// How long a connection may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// How long discovery waits for the browser's `Browser.getVersion`.
const VERSION_TIMEOUT: Duration = Duration::from_secs(5);

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
    if let Some(token) = path.strip_prefix("/devtools/browser/") {
        if let Err(r) = upgrade_checks(&head) {
            return answer(&mut raw, r);
        }
        let Some(sup) = l.supervisor(token) else {
            return answer(&mut raw, Response::json(404, error_body("no such task")));
        };
        let key = head.text("sec-websocket-key").unwrap_or_default().trim();
        let accept = tungstenite::handshake::derive_accept_key(key.as_bytes());
        let ok = format!(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Accept: {accept}\r\n\r\n"
        );
        if raw.write_all(ok.as_bytes()).is_err() {
            return;
        }
        let (socket, leftover) = conn.into_parts();
        return client::run(&sup, socket.into_tcp(), leftover, peer);
    }
    let Some((token, rest)) = path.trim_start_matches('/').split_once('/') else {
        return answer(&mut raw, Response::json(404, error_body("not found")));
    };
    let Some(sup) = l.supervisor(token) else {
        return answer(&mut raw, Response::json(404, error_body("no such task")));
    };
    let ws_url = l.urls(token).ws_url;
    let body = match rest.trim_end_matches('/') {
        "json/version" => {
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
                "webSocketDebuggerUrl": ws_url,
            })
        }
        "json" | "json/list" => {
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
            let infos = match client::mux_for(&sup) {
                Some(m) => m.task_targets(infos),
                None => Vec::new(),
            };
            let list: Vec<_> = infos
                .iter()
                .filter(|i| matches!(i["type"].as_str(), Some("page" | "iframe" | "worker")))
                .map(|i| {
                    json!({
                        "description": "",
                        "id": i["targetId"],
                        "title": i["title"],
                        "type": i["type"],
                        "url": i["url"],
                    })
                })
                .collect();
            json!(list)
        }
        _ => return answer(&mut raw, Response::json(404, error_body("not found"))),
    };
    answer(&mut raw, Response::json(200, format!("{body:#}")));
}

fn error_body(msg: &str) -> String {
    json!({ "error": msg }).to_string()
}

fn answer(raw: &mut TcpStream, r: Response) {
    let _ = raw.set_write_timeout(Some(HEAD_TIMEOUT));
    let _ = raw.write_all(&r.bytes(false));
    let _ = raw.shutdown(std::net::Shutdown::Write);
}

/// A WebSocket upgrade, and no `Origin` (a web page): Chromium's `--remote-allow-origins` rule
/// with nothing allowed.
fn upgrade_checks(head: &RequestHead) -> Result<(), Response> {
    if head.method != "GET"
        || !head.has_token("upgrade", "websocket")
        || head.text("sec-websocket-key").is_none()
    {
        return Err(Response::json(
            400,
            error_body("a WebSocket upgrade is expected here"),
        ));
    }
    if let Some(origin) = head.text("origin") {
        let msg = format!(
            "Rejected an incoming WebSocket connection from the {} origin: the task's CDP \
             endpoint accepts no Origin (a web page cannot connect)",
            crate::quote::quoted(origin)
        );
        return Err(Response::json(403, error_body(&msg)));
    }
    Ok(())
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

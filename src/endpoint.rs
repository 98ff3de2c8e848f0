//! Turning what the user gave into a WebSocket URL (SPEC §9): `ws://`/`wss://` pass through,
//! `http://host:port` is resolved through `GET /json/version` (5 s bound).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::redact::{Secrets, redact_url};

/// Bound on resolving an `http://` endpoint.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// Resolves `url` to a WebSocket URL.
pub fn resolve(url: &str) -> Result<String, Error> {
    let invalid = |reason: &str| Error::InvalidUrl {
        url: redact_url(url),
        reason: reason.to_string(),
    };
    let parsed = url::Url::parse(url).map_err(|e| invalid(&e.to_string()))?;
    match parsed.scheme() {
        "ws" | "wss" => Ok(url.to_string()),
        "http" => json_version(&parsed, url),
        "https" => Err(invalid(
            "https:// endpoints are not supported; give the wss:// URL",
        )),
        other => Err(invalid(&format!(
            "unsupported scheme {other:?}: use ws://, wss:// or http://host:port"
        ))),
    }
}

fn json_version(parsed: &url::Url, raw: &str) -> Result<String, Error> {
    let secrets = Secrets::of(raw);
    let fail = |reason: String| Error::Connect {
        url: redact_url(raw),
        reason: secrets.scrub(&reason),
    };
    let host = parsed.host_str().ok_or_else(|| fail("no host".into()))?;
    let port = parsed.port_or_known_default().unwrap_or(80);
    let deadline = Instant::now() + RESOLVE_TIMEOUT;
    let addr = (host.trim_matches(['[', ']']), port)
        .to_socket_addrs()
        .map_err(|e| fail(format!("cannot resolve {host}: {e}")))?
        .next()
        .ok_or_else(|| fail(format!("{host} has no address")))?;
    let mut s =
        TcpStream::connect_timeout(&addr, RESOLVE_TIMEOUT).map_err(|e| fail(e.to_string()))?;
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    s.set_read_timeout(Some(left))
        .map_err(|e| fail(e.to_string()))?;
    s.set_write_timeout(Some(left))
        .map_err(|e| fail(e.to_string()))?;
    let auth = crate::transport::basic_auth(parsed)
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    let req = format!(
        "GET /json/version HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\nAccept: application/json\r\n{auth}\r\n"
    );
    s.write_all(req.as_bytes())
        .map_err(|e| fail(e.to_string()))?;
    // Chromium keeps the connection open despite `Connection: close`: read the head, then
    // exactly Content-Length bytes (or until close when there is none).
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    let mut need: Option<usize> = None;
    let mut head_end = None;
    loop {
        if let (Some(h), Some(n)) = (head_end, need)
            && data.len() >= h + n
        {
            break;
        }
        if Instant::now() >= deadline {
            return Err(fail("timed out reading /json/version".into()));
        }
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                data.extend_from_slice(&buf[..n]);
                if data.len() > 1 << 20 {
                    return Err(fail("/json/version answer is larger than 1 MiB".into()));
                }
            }
            Err(e) => return Err(fail(format!("reading /json/version: {e}"))),
        }
        if head_end.is_none()
            && let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n")
        {
            head_end = Some(i + 4);
            let head = String::from_utf8_lossy(&data[..i]).to_ascii_lowercase();
            need = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok());
        }
    }
    let Some(h) = head_end else {
        return Err(fail("not an HTTP answer".into()));
    };
    let head = String::from_utf8_lossy(&data[..h]).to_string();
    let end = need.map_or(data.len(), |n| (h + n).min(data.len()));
    let json = String::from_utf8_lossy(&data[h..end]).to_string();
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        let status = head.lines().next().unwrap_or("");
        return Err(fail(format!("/json/version answered {status:?}")));
    }
    let v: serde_json::Value = serde_json::from_str(json.trim())
        .map_err(|e| fail(format!("/json/version is not JSON: {e}")))?;
    let ws = v["webSocketDebuggerUrl"]
        .as_str()
        .ok_or_else(|| fail("/json/version has no webSocketDebuggerUrl".into()))?;
    // Keep the credentials the user gave on the resolved URL (hosted endpoints need them).
    let mut resolved =
        url::Url::parse(ws).map_err(|e| fail(format!("bad webSocketDebuggerUrl: {e}")))?;
    if resolved.query().is_none() && parsed.query().is_some() {
        resolved.set_query(parsed.query());
    }
    if resolved.username().is_empty() && !parsed.username().is_empty() {
        let _ = resolved.set_username(parsed.username());
        let _ = resolved.set_password(parsed.password());
    }
    Ok(resolved.to_string())
}

/// True when a CDP endpoint answers at `url` (resolution plus a WebSocket handshake), within a
/// few seconds. Never panics.
pub fn cdp_available(url: &str) -> bool {
    let Ok(ws) = resolve(url) else {
        return false;
    };
    let opts = crate::transport::ConnectOptions {
        connect_timeout: RESOLVE_TIMEOUT,
        ..Default::default()
    };
    crate::transport::Transport::connect(&ws, &opts)
        .map(|t| t.shutdown())
        .is_ok()
}

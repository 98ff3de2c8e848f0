//! Connecting: the TLS handshake of `wss://` and the WebSocket upgrade, each bounded by the
//! connect deadline that the [`Socket`] under them carries, and nothing of the request logged.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tungstenite::WebSocket;
use tungstenite::protocol::WebSocketConfig;

use super::socket::Socket;
use super::stream::{Stream, Watched};
use crate::deadline::Deadline;
use crate::http1::{self, Conn, HttpError, Limits, Request};
use crate::net;
use crate::quote::quoted;

/// Bytes tungstenite reads per `read` call. Its default (128 KiB) is zero-filled before every
/// read, which costs microseconds per message and makes 128 KiB per connection resident; CDP
/// messages are mostly small, and large ones simply take more reads.
const READ_CHUNK: usize = 8 * 1024;

fn ws_config(max: usize) -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(READ_CHUNK)
        .max_message_size(Some(max))
        .max_frame_size(Some(max))
}

/// The TLS client handshake of `wss://` over `socket`, finished here (so that a certificate
/// problem is reported as such) within the deadline `socket` carries; `started` is when the
/// connect began, for the time-out's message.
pub(super) fn tls(
    socket: Socket,
    host: &str,
    ca_file: Option<&std::path::Path>,
    started: Instant,
) -> Result<Stream, String> {
    let config = tls_config(ca_file)?;
    let name = rustls_pki_types::ServerName::try_from(host.trim_matches(['[', ']']).to_string())
        .map_err(|e| format!("{host} is not a valid TLS server name: {e}"))?;
    let conn =
        rustls::ClientConnection::new(config, name).map_err(|e| format!("TLS setup: {e}"))?;
    let mut tls = rustls::StreamOwned::new(conn, socket);
    while tls.conn.is_handshaking() {
        tls.conn
            .complete_io(&mut tls.sock)
            .map_err(|e| match e.kind() {
                io::ErrorKind::TimedOut => format!(
                    "the TLS handshake did not finish before the connect deadline \
                     ({:.1} s after the start)",
                    started.elapsed().as_secs_f64()
                ),
                _ => format!("TLS handshake failed: {e}"),
            })?;
    }
    Ok(Stream::Tls(Box::new(tls)))
}

/// The client side of the WebSocket upgrade, done here rather than by tungstenite's client
/// handshake so that nothing logs the request line or headers (query tokens, `Authorization`):
/// credentials never reach a log line, even a dependency's at trace level. The request and the
/// answer's head go through `http1`, by `deadline` (the one `stream`'s socket carries).
pub(super) fn websocket(
    mut stream: Stream,
    url: &url::Url,
    max_message_bytes: usize,
    deadline: Deadline,
) -> Result<WebSocket<Watched>, String> {
    let key = tungstenite::handshake::client::generate_key();
    let host = url.host_str().unwrap_or("");
    let host_header = match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    };
    let mut target = url.path().to_string();
    if let Some(q) = url.query() {
        target.push('?');
        target.push_str(q);
    }
    let mut req = Request::get(target)
        .with("Host", host_header)
        .with("Upgrade", "websocket")
        .with("Connection", "Upgrade")
        .with("Sec-WebSocket-Key", key.as_str())
        .with("Sec-WebSocket-Version", "13");
    if let Some(auth) = net::basic_auth(url) {
        req = req.with("Authorization", auth);
    }
    http1::write_all(&mut stream, &req.bytes(), Duration::MAX, deadline).map_err(|e| {
        match e.kind() {
            io::ErrorKind::TimedOut => {
                "the WebSocket upgrade request could not be sent before the connect deadline"
                    .to_string()
            }
            _ => format!("WebSocket handshake failed: sending the upgrade request: {e}"),
        }
    })?;
    let mut conn = Conn::new(stream);
    let head = conn
        .read_response(deadline, &UPGRADE_LIMITS)
        .map_err(|e| match e {
            HttpError::Closed { read, .. } => format!(
                "WebSocket handshake failed: the server closed the connection ({read} bytes of \
                 its answer)"
            ),
            HttpError::TimedOut { read, .. } => format!(
                "the server did not finish the WebSocket upgrade before the connect deadline \
                 ({read} bytes of its answer so far)"
            ),
            HttpError::Io(e) => format!("WebSocket handshake failed: reading the answer: {e}"),
            e => format!("WebSocket handshake failed: the answer's {e}"),
        })?;
    if head.code != 101 {
        return Err(format!(
            "WebSocket handshake failed: the server answered {} instead of 101 Switching \
             Protocols",
            quoted(&head.status)
        ));
    }
    let expected = tungstenite::handshake::derive_accept_key(key.as_bytes());
    if head.header("sec-websocket-accept") != Some(expected.as_str()) {
        return Err("WebSocket handshake failed: wrong or missing Sec-WebSocket-Accept".into());
    }
    let (stream, leftover) = conn.into_parts();
    Ok(WebSocket::from_partially_read(
        Watched::new(stream),
        leftover,
        tungstenite::protocol::Role::Client,
        Some(ws_config(max_message_bytes)),
    ))
}

/// The caps on an upgrade's answer head (it has no body).
const UPGRADE_LIMITS: Limits = Limits {
    head: 64 * 1024,
    headers: 96,
    body: 0,
};

/// A rustls client configuration: the web PKI roots, plus the certificates of `ca_file` (PEM).
fn tls_config(ca_file: Option<&std::path::Path>) -> Result<Arc<rustls::ClientConfig>, String> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = ca_file {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .map_err(|e| format!("cannot read CA file {}: {e}", path.display()))?
            .collect::<Result<_, _>>()
            .map_err(|e| format!("bad PEM in CA file {}: {e}", path.display()))?;
        if certs.is_empty() {
            return Err(format!("CA file {} holds no certificate", path.display()));
        }
        for c in certs {
            roots
                .add(c)
                .map_err(|e| format!("unusable certificate in {}: {e}", path.display()))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

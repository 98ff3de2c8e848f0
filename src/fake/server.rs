//! Connection plumbing: the accept loop, plain HTTP (`/json/version`), the
//! WebSocket handshake and read/write split, and the per-connection reader.

use std::io::{self, BufRead, BufReader, Cursor, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use serde_json::json;
use tungstenite::protocol::{Role, WebSocketConfig};
use tungstenite::{Message, WebSocket};

use super::PRODUCT;
use super::script::handle_text;
use super::shared::{Conn, Sessions, Shared};
use crate::sync::lock;

/// Largest WebSocket message (and frame) accepted or sent: 64 MiB.
const MAX_MESSAGE_SIZE: usize = 64 << 20;
/// Upper bound on the size of an HTTP request head.
const MAX_REQUEST_HEAD: usize = 16 * 1024;

/// The WebSocket configuration used on both halves of every connection.
fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE_SIZE))
        .max_frame_size(Some(MAX_MESSAGE_SIZE))
}

/// The accept thread: hands each socket to its own connection thread.
pub(super) fn accept_loop(shared: &Arc<Shared>, listener: &TcpListener) {
    loop {
        let accepted = listener.accept();
        if shared.is_shutdown() {
            return;
        }
        let stream = match accepted {
            Ok((stream, _)) => {
                // Small request/reply messages: Nagle plus delayed ACKs would add ~40 ms each.
                let _ = stream.set_nodelay(true);
                stream
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
            Err(e) => {
                log::warn!("fake browser: accept failed, no more connections: {e}");
                return;
            }
        };
        spawn_connection(shared, stream);
    }
}

/// Registers a socket (so `Drop` can shut it down) and starts its thread.
fn spawn_connection(shared: &Arc<Shared>, stream: TcpStream) {
    let id = shared.next_socket.fetch_add(1, Ordering::SeqCst);
    match stream.try_clone() {
        Ok(clone) => lock(&shared.sockets).insert(id, clone),
        Err(e) => {
            log::debug!("fake browser: cannot clone socket: {e}");
            return;
        }
    };
    let thread_shared = Arc::clone(shared);
    let spawned = thread::Builder::new()
        .name("fake-cdp-conn".into())
        .spawn(move || {
            if let Err(e) = serve_socket(&thread_shared, &stream) {
                log::debug!("fake browser: connection ended: {e}");
            }
            let _ = stream.shutdown(Shutdown::Both);
            lock(&thread_shared.sockets).remove(&id);
        });
    match spawned {
        Ok(handle) => {
            let mut workers = lock(&shared.workers);
            // Finished threads need no join; dropping their handles is enough.
            workers.retain(|w| !w.is_finished());
            workers.push(handle);
        }
        Err(e) => {
            log::warn!("fake browser: cannot spawn connection thread: {e}");
            if let Some(socket) = lock(&shared.sockets).remove(&id) {
                let _ = socket.shutdown(Shutdown::Both);
            }
        }
    }
}

/// The parts of an HTTP request head the fake cares about.
#[derive(Debug, PartialEq)]
pub(super) struct RequestHead {
    pub(super) method: String,
    pub(super) path: String,
    pub(super) websocket_upgrade: bool,
}

/// Reads an HTTP request head (up to the empty line) from `reader`.
pub(super) fn read_request_head(reader: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut head = Vec::new();
    loop {
        let start = head.len();
        let n = reader
            .by_ref()
            .take((MAX_REQUEST_HEAD - start) as u64)
            .read_until(b'\n', &mut head)?;
        if n == 0 || !head.ends_with(b"\n") {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "incomplete or oversized HTTP request head",
            ));
        }
        let line = &head[start..];
        if line == b"\r\n" || line == b"\n" {
            return Ok(head);
        }
    }
}

/// Parses the request line and looks for `Upgrade: websocket`.
pub(super) fn parse_request_head(head: &[u8]) -> RequestHead {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.lines();
    let mut first = lines.next().unwrap_or_default().split_whitespace();
    let method = first.next().unwrap_or_default().to_string();
    let target = first.next().unwrap_or_default();
    let path = target.split('?').next().unwrap_or_default().to_string();
    let websocket_upgrade = lines.any(|line| {
        line.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("upgrade")
                && value.to_ascii_lowercase().contains("websocket")
        })
    });
    RequestHead {
        method,
        path,
        websocket_upgrade,
    }
}

/// Formats a complete HTTP/1.1 response that closes the connection.
fn http_response(status: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json; charset=UTF-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Answers a plain HTTP request: `/json/version` or 404.
fn answer_http(shared: &Shared, head: &RequestHead, out: &mut TcpStream) -> io::Result<()> {
    let is_version =
        head.method == "GET" && (head.path == "/json/version" || head.path == "/json/version/");
    let response = if is_version {
        // An endpoint with a browser per connection names its root, as Browserless does.
        let path = if shared.state().new_browser_per_connection {
            ""
        } else {
            "/devtools/browser/fake"
        };
        let ws_url = format!("ws://127.0.0.1:{}{path}", shared.port);
        let body = json!({"Browser": PRODUCT, "webSocketDebuggerUrl": ws_url});
        http_response("200 OK", &body.to_string())
    } else {
        http_response("404 Not Found", "{}")
    };
    out.write_all(response.as_bytes())?;
    out.flush()
}

/// The stream given to the WebSocket handshake: the already read request
/// head is replayed before the rest of the socket.
struct HandshakeIo {
    read: io::Chain<Cursor<Vec<u8>>, BufReader<TcpStream>>,
    write: TcpStream,
}

impl Read for HandshakeIo {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read.read(buf)
    }
}

impl Write for HandshakeIo {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.write.flush()
    }
}

/// Serves one accepted socket: plain HTTP or a WebSocket connection.
fn serve_socket(shared: &Shared, stream: &TcpStream) -> io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let raw_head = read_request_head(&mut reader)?;
    let head = parse_request_head(&raw_head);
    if !head.websocket_upgrade {
        return answer_http(shared, &head, &mut stream.try_clone()?);
    }
    let io = HandshakeIo {
        read: Cursor::new(raw_head).chain(reader),
        write: stream.try_clone()?,
    };
    // The handshake's socket becomes the reading half: it keeps any bytes
    // the client sent right after its upgrade request.
    let ws_reader = tungstenite::accept_with_config(io, Some(ws_config()))
        .map_err(|e| io::Error::other(format!("WebSocket handshake failed: {e}")))?;
    let writer = WebSocket::from_raw_socket(stream.try_clone()?, Role::Server, Some(ws_config()));
    let conn = Arc::new(Conn {
        raw: stream.try_clone()?,
        writer: Mutex::new(writer),
        closed: AtomicBool::new(false),
        sessions: Mutex::new(Sessions::default()),
    });
    shared.add_conn(&conn);
    read_loop(shared, &conn, ws_reader);
    shared.close_conn(&conn);
    shared.remove_conn(&conn);
    Ok(())
}

/// Reads and handles frames until the connection or the fake shuts down.
fn read_loop(shared: &Shared, conn: &Arc<Conn>, mut reader: WebSocket<HandshakeIo>) {
    while shared.wait_while_stopped(conn) {
        match reader.read() {
            Ok(Message::Text(text)) => handle_text(shared, conn, text.as_str()),
            Ok(Message::Binary(data)) => {
                shared.record_invalid(format!("<binary {} bytes>", data.len()));
            }
            Ok(Message::Close(_)) => {
                // Best effort: send the close reply queued by tungstenite.
                let _ = reader.flush();
                return;
            }
            Ok(_) => {}
            Err(e) => {
                log::debug!("fake browser: read ended: {e}");
                return;
            }
        }
    }
}

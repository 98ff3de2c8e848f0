//! A raw HTTP/1.1 client for the crate's HTTP server in this process (`mcp::http`: `/mcp` and
//! the supervisor page), what `mcp_http_server` and `fake_page` share: a server on a free
//! loopback port, requests written by hand, answers and chunked SSE events read by hand, so
//! every byte the server sends is what a test sees.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use cdp_supervisor::Config;
use cdp_supervisor::mcp::http::{ENDPOINT, HttpOptions, HttpServer};
use serde_json::{Value, json};

/// How long a test waits for the server.
pub const WAIT: Duration = Duration::from_secs(10);

/// An answer as the client reads it.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: HashMap<String, String>,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

/// One client connection.
pub struct Client {
    pub stream: TcpStream,
    pub buf: Vec<u8>,
    pub host: String,
}

impl Client {
    pub fn new(server: &HttpServer) -> Client {
        let stream = TcpStream::connect(server.local_addr()).unwrap();
        stream.set_read_timeout(Some(WAIT)).unwrap();
        Client {
            stream,
            buf: Vec::new(),
            host: server.local_addr().to_string(),
        }
    }

    pub fn send(&mut self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) {
        let mut req = format!("{method} {path} HTTP/1.1\r\n");
        if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
            req.push_str(&format!("Host: {}\r\n", self.host));
        }
        for (n, v) in headers {
            req.push_str(&format!("{n}: {v}\r\n"));
        }
        if method == "POST" {
            req.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            ));
        }
        req.push_str("\r\n");
        req.push_str(body);
        self.stream.write_all(req.as_bytes()).unwrap();
    }

    pub fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 8192];
        match self.stream.read(&mut chunk) {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
        }
    }

    /// The head of the next answer (status and headers), its body left unread; `None` when the
    /// server closed the connection first.
    pub fn try_head(&mut self) -> Option<(u16, HashMap<String, String>)> {
        let end = loop {
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            if !self.fill() {
                return None;
            }
        };
        let head = String::from_utf8(self.buf[..end].to_vec()).unwrap();
        self.buf.drain(..end + 4);
        let mut lines = head.split("\r\n");
        let status = lines.next().unwrap()[9..12].parse().unwrap();
        let headers = lines
            .filter_map(|l| l.split_once(": "))
            .map(|(n, v)| (n.to_ascii_lowercase(), v.to_string()))
            .collect();
        Some((status, headers))
    }

    /// The head of the next answer, its body left unread.
    pub fn read_head(&mut self) -> (u16, HashMap<String, String>) {
        self.try_head()
            .expect("the connection closed before a head")
    }

    /// The body (of `Content-Length`) of the answer whose head was `headers`.
    pub fn body(&mut self, headers: &HashMap<String, String>) -> String {
        let len: usize = headers
            .get("content-length")
            .map_or(0, |l| l.parse().unwrap());
        while self.buf.len() < len {
            assert!(self.fill(), "the body ended early");
        }
        String::from_utf8(self.buf.drain(..len).collect()).unwrap()
    }

    /// The next answer; `None` when the server closed the connection first.
    pub fn read(&mut self) -> Option<Reply> {
        let (status, headers) = self.try_head()?;
        let body = self.body(&headers);
        Some(Reply {
            status,
            headers,
            body,
        })
    }

    pub fn post(&mut self, headers: &[(&str, &str)], body: &Value) -> Reply {
        self.send("POST", ENDPOINT, headers, &body.to_string());
        self.read().expect("an answer")
    }

    /// True once the server has closed the connection (within `WAIT`).
    pub fn closed(&mut self) -> bool {
        let t = Instant::now();
        while t.elapsed() < WAIT {
            if !self.fill() {
                return true;
            }
        }
        false
    }

    /// The next event of a chunked SSE body, as JSON; `None` at its last chunk.
    pub fn next_event(&mut self) -> Option<Value> {
        let line_end = loop {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                break i;
            }
            assert!(self.fill(), "the stream ended without its last chunk");
        };
        let size = usize::from_str_radix(
            std::str::from_utf8(&self.buf[..line_end]).unwrap().trim(),
            16,
        )
        .unwrap();
        while self.buf.len() < line_end + 2 + size + 2 {
            assert!(self.fill(), "a chunk ended early");
        }
        let chunk: Vec<u8> = self.buf.drain(..line_end + 2 + size + 2).collect();
        if size == 0 {
            return None;
        }
        let text = String::from_utf8(chunk[line_end + 2..line_end + 2 + size].to_vec()).unwrap();
        let data = text
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .unwrap_or_else(|| panic!("no data in {text:?}"));
        Some(serde_json::from_str(data).unwrap())
    }
}

/// A server on a free loopback port.
pub fn start(config: Config, options: HttpOptions) -> HttpServer {
    HttpServer::start(config, options.with_addr("127.0.0.1:0")).expect("the server starts")
}

/// A legacy `initialize` request.
pub fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}})
}

/// Waits until `done`, checking every `every`; fails with `what` once `within` has passed.
pub fn eventually(within: Duration, every: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let by = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < by, "{what}");
        std::thread::sleep(every);
    }
}

/// Whether the server closes the connection within `within` (the client reads and discards
/// what comes first).
pub fn closes_within(stream: &mut TcpStream, within: Duration) -> bool {
    let by = Instant::now() + within;
    let mut sink = [0u8; 8192];
    loop {
        let left = by.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        stream.set_read_timeout(Some(left)).unwrap();
        match stream.read(&mut sink) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return false;
            }
            // A reset is a close too.
            Err(_) => return true,
        }
    }
}

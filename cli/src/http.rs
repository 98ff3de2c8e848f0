//! A tiny loopback HTTP server for the demo's pages: fixed routes, and `/report?...` values that
//! the page's JS sends back, handed to the demo over a channel.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, unbounded};

/// The server; stops on drop.
pub struct Server {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    reports: Receiver<String>,
}

impl Server {
    /// Serves `pages` (path -> HTML; `{{PORT}}` becomes the server's port) on 127.0.0.1, also
    /// reachable as `localhost`, which Chromium treats as another site.
    pub fn start(pages: HashMap<&'static str, String>) -> std::io::Result<Server> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = unbounded();
        let pages = Arc::new(pages);
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("demo-http".into())
                .spawn(move || {
                    for conn in listener.incoming() {
                        if stop.load(Ordering::Acquire) {
                            break;
                        }
                        if let Ok(c) = conn {
                            let (pages, tx) = (Arc::clone(&pages), tx.clone());
                            let _ = std::thread::Builder::new()
                                .stack_size(64 * 1024)
                                .spawn(move || serve(c, port, &pages, &tx));
                        }
                    }
                })?
        };
        Ok(Server {
            port,
            stop,
            thread: Some(thread),
            reports: rx,
        })
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The next value the page reported, percent-decoded.
    pub fn next_report(&self, timeout: Duration) -> Option<String> {
        self.reports.recv_timeout(timeout).ok()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(
    mut c: TcpStream,
    port: u16,
    pages: &HashMap<&'static str, String>,
    reports: &Sender<String>,
) {
    let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 64 * 1024 {
        match c.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let head = String::from_utf8_lossy(&buf);
    let target = head.split_whitespace().nth(1).unwrap_or("/");
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let (status, body) = if path == "/report" {
        let _ = reports.send(percent_decode(query));
        ("204 No Content", String::new())
    } else if let Some(p) = pages.get(path) {
        ("200 OK", p.replace("{{PORT}}", &port.to_string()))
    } else {
        ("404 Not Found", "not found".into())
    };
    let resp = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\n\
         Access-Control-Allow-Origin: *\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = c.write_all(resp.as_bytes());
    let _ = c.shutdown(Shutdown::Write);
}

fn percent_decode(s: &str) -> String {
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push(h * 16 + l);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

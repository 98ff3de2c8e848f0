//! The client side of the HTTP/1.1 edge: `http://` discovery (`GET /json/version`, its answer
//! read and parsed, the WebSocket URL taken from it) and the WebSocket upgrade (the request,
//! the `101` head read and checked), each against a plain client doing the same on the same
//! browser.
//!
//! Custom harness (`harness = false`): `cargo bench --bench discovery`.
//!
//! * Discovery: `unversioned::resolve(http://HOST:PORT)` (TCP connect, the request, the answer
//!   by its framing, the JSON) against a plain `TcpStream` that writes the same request, reads
//!   until the server closes and parses the JSON body.
//! * Upgrade: `Transport::connect(ws://...)` then its shutdown, against tungstenite's own client
//!   handshake on a plain `TcpStream` (closed by drop).
//! * Browsers: the built-in fake ([`FAKE_SAMPLES`] per variant), then headless Chromium
//!   ([`CHROMIUM_SAMPLES`] per variant; skipped loudly when none is installed). Variants
//!   alternate sample by sample, so drift on a shared machine hits them alike.
//!
//! What it shows: the share of a discovery or an upgrade that is ours (the head parser, the
//! framing, the deadline-bounded socket) next to the TCP and server costs both pay.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use cdp_supervisor::fake::FakeBrowser;
use cdp_supervisor::unversioned::{
    ConnectOptions, LaunchedBrowser, Transport, find_browser, resolve,
};
use common::*;

const FAKE_SAMPLES: usize = 2000;
const CHROMIUM_SAMPLES: usize = 300;
const WARMUP: usize = 20;

/// The plain client's discovery: the request our discovery sends, the answer read by its
/// `Content-Length` (or until the server closes), the body's `webSocketDebuggerUrl`.
fn raw_discovery(host: &str, port: u16) -> String {
    let mut tcp = TcpStream::connect((host, port)).expect("connect");
    let _ = tcp.set_nodelay(true);
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
    write!(
        tcp,
        "GET /json/version HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\
         Accept: application/json\r\n\r\n"
    )
    .expect("write");
    // Chromium keeps the connection open after its answer: read the body by Content-Length.
    let mut all = Vec::new();
    let mut chunk = [0u8; 4096];
    let (end, len) = loop {
        let n = tcp.read(&mut chunk).expect("read");
        assert!(n > 0, "the server closed before its answer");
        all.extend_from_slice(&chunk[..n]);
        if let Some(i) = all.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&all[..i]).to_ascii_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok());
            break (i + 4, len);
        }
    };
    match len {
        Some(len) => {
            while all.len() < end + len {
                let n = tcp.read(&mut chunk).expect("read");
                assert!(n > 0, "the server closed in the middle of the body");
                all.extend_from_slice(&chunk[..n]);
            }
            all.truncate(end + len);
        }
        None => {
            tcp.read_to_end(&mut all).expect("read");
        }
    }
    let v: serde_json::Value = serde_json::from_slice(&all[end..]).expect("JSON");
    v["webSocketDebuggerUrl"]
        .as_str()
        .expect("webSocketDebuggerUrl")
        .to_string()
}

/// Alternating samples of the four variants on one browser.
fn measure(http_url: &str, ws_url: &str, n: usize) -> [hdrhistogram::Histogram<u64>; 4] {
    let u = url::Url::parse(http_url).expect("an http:// URL");
    let host = u.host_str().expect("host").to_string();
    let port = u.port_or_known_default().expect("port");
    let mut h = [new_hist(), new_hist(), new_hist(), new_hist()];
    let opts = ConnectOptions::default();
    for i in 0..WARMUP + n {
        let keep = i >= WARMUP;
        let t = Instant::now();
        let ws = raw_discovery(&host, port);
        let raw_d = t.elapsed();
        assert!(ws.starts_with("ws://"), "{ws}");
        let t = Instant::now();
        let ws = resolve(http_url).expect("discovery");
        let ours_d = t.elapsed();
        assert!(ws.starts_with("ws://"), "{ws}");
        let t = Instant::now();
        let tcp = TcpStream::connect((host.as_str(), port)).expect("connect");
        let _ = tcp.set_nodelay(true);
        let (raw_ws, _) = tungstenite::client::client(ws_url, tcp).expect("upgrade");
        let raw_u = t.elapsed();
        drop(raw_ws);
        let t = Instant::now();
        let transport = Transport::connect(ws_url, &opts).expect("upgrade");
        let ours_u = t.elapsed();
        transport.shutdown();
        drop(transport);
        if keep {
            record(&mut h[0], raw_d);
            record(&mut h[1], ours_d);
            record(&mut h[2], raw_u);
            record(&mut h[3], ours_u);
        }
    }
    h
}

fn report(title: &str, h: &[hdrhistogram::Histogram<u64>; 4]) -> String {
    println!();
    println!("{title}:");
    lat_header();
    lat_row("plain client: GET /json/version", &h[0], None);
    lat_row("resolve(http://...) (discovery)", &h[1], Some(&h[0]));
    lat_row("tungstenite client: WebSocket upgrade", &h[2], None);
    lat_row("Transport::connect (upgrade)", &h[3], Some(&h[2]));
    format!(
        "{title}: discovery p50 {:.1} us vs plain {:.1} us ({:.2}x); upgrade p50 {:.1} us vs \
         tungstenite {:.1} us ({:.2}x)",
        q_us(&h[1], 0.5),
        q_us(&h[0], 0.5),
        q_us(&h[1], 0.5) / q_us(&h[0], 0.5),
        q_us(&h[3], 0.5),
        q_us(&h[2], 0.5),
        q_us(&h[3], 0.5) / q_us(&h[2], 0.5),
    )
}

fn main() {
    let (date, nproc) = machine();
    println!("discovery: {date}, nproc = {nproc}");
    println!(
        "Timed: one discovery (connect, GET /json/version, the answer, its JSON) and one \
         WebSocket upgrade (connect, request, 101 head) per sample, ours against a plain client; \
         {WARMUP} warm-up samples each, closes untimed."
    );
    let fake = FakeBrowser::start().expect("start the fake browser");
    let h = measure(&fake.http_url(), &fake.ws_url(), FAKE_SAMPLES);
    drop(fake);
    let fake_line = report(
        &format!("Fake browser ({FAKE_SAMPLES} samples per variant, interleaved)"),
        &h,
    );
    let chrome_line = match find_browser(None) {
        Ok(Some(exe)) => {
            let browser = LaunchedBrowser::launch(&exe).expect("launch Chromium");
            let ws = browser.ws_url().to_string();
            let u = url::Url::parse(&ws).expect("ws URL");
            let http = format!(
                "http://{}:{}",
                u.host_str().expect("host"),
                u.port().expect("port")
            );
            let h = measure(&http, &ws, CHROMIUM_SAMPLES);
            drop(browser);
            report(
                &format!(
                    "Headless Chromium {} ({CHROMIUM_SAMPLES} samples per variant, interleaved)",
                    exe.display()
                ),
                &h,
            )
        }
        _ => {
            println!("SKIPPED: no Chromium");
            "Chromium: SKIPPED (none installed)".into()
        }
    };
    println!();
    println!("Summary: {fake_line}");
    println!("Summary: {chrome_line}");
}

//! A flood of events through the task's CDP endpoint on real Chromium (issue 30 point 3, slow
//! clients): a client that reads gets every event in order while one that has stopped reading
//! is disconnected alone, by its outlet's bounds (`src/cdp_endpoint/outlet.rs`).

use std::collections::HashSet;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use cdp_supervisor::{Config, Route, StartOptions, StartRequest, SupervisorRegistry};
use serde_json::{Value, json};
use tungstenite::{Message, WebSocket};

use crate::common::{self, Browser, RawCdp};

const T: Duration = Duration::from_secs(20);

/// Console lines the page logs, each with 200 characters of padding (about 0.6 KiB as an
/// event): some 12 MB in all, more than the kernel's buffers hold for a client that does not
/// read.
const LINES: usize = 20_000;

/// Whether this process holds a socket from `local_port` to `remote_port` on loopback (the
/// endpoint's side of one client's connection).
fn holds_socket(local_port: u16, remote_port: u16) -> bool {
    let inodes: HashSet<String> = std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter_map(|l| {
                    let l = l.to_string_lossy().to_string();
                    Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
                })
                .collect()
        })
        .unwrap_or_default();
    let port = |a: &str| {
        a.rsplit(':')
            .next()
            .and_then(|p| u16::from_str_radix(p, 16).ok())
    };
    ["/proc/self/net/tcp", "/proc/self/net/tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .any(|text| {
            text.lines().skip(1).any(|line| {
                let f: Vec<&str> = line.split_whitespace().collect();
                f.len() > 9
                    && port(f[1]) == Some(local_port)
                    && port(f[2]) == Some(remote_port)
                    && inodes.contains(f[9])
            })
        })
}

/// A client that will stop reading: a bare WebSocket, so that its local port is known.
struct Stalled {
    ws: WebSocket<TcpStream>,
    port: u16,
    next_id: u64,
}

impl Stalled {
    fn connect(url: &str) -> Stalled {
        let authority = url
            .strip_prefix("ws://")
            .and_then(|r| r.split('/').next())
            .unwrap();
        let tcp = TcpStream::connect(authority).expect("connect");
        tcp.set_read_timeout(Some(T)).unwrap();
        let port = tcp.local_addr().unwrap().port();
        let (ws, _) = tungstenite::client(url, tcp).expect("handshake");
        Stalled {
            ws,
            port,
            next_id: 1,
        }
    }

    fn call(&mut self, method: &str, params: Value, session: Option<&str>) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        self.ws.send(Message::text(msg.to_string())).unwrap();
        loop {
            let Message::Text(t) = self.ws.read().expect("a reply") else {
                continue;
            };
            let v: Value = serde_json::from_str(t.as_str()).unwrap();
            if v["id"] == id {
                return v["result"].clone();
            }
        }
    }

    /// Reads what reached its socket: the numbers of the console lines, then how it ended.
    fn drain(&mut self) -> (Vec<u64>, String) {
        let mut got = Vec::new();
        loop {
            match self.ws.read() {
                Ok(Message::Text(t)) => {
                    let v: Value = serde_json::from_str(t.as_str()).unwrap();
                    if v["method"] == "Runtime.consoleAPICalled" {
                        got.push(v["params"]["args"][0]["value"].as_u64().unwrap());
                    }
                }
                Ok(_) => {}
                Err(e) => return (got, e.to_string()),
            }
        }
    }
}

#[test]
fn a_fast_reader_gets_a_whole_flood_in_order_while_a_stalled_one_is_disconnected_alone() {
    if common::chromium_path().is_none() && !common::e2e_required() {
        eprintln!("SKIPPED: no Chromium");
        return;
    }
    let browser = Browser::launch().expect("launch Chromium");
    let reg = SupervisorRegistry::new(Config::default());
    let sup = reg
        .start(
            StartRequest::new("flood", &browser.ws_url)
                .with_options(StartOptions::default().with_new_page(true)),
        )
        .expect("start");
    let page = sup.snapshot().page_target_id.clone().expect("its page");
    let ep = reg.cdp_endpoint("flood").expect("the endpoint");
    let ep_port: u16 = ep
        .ws_url
        .strip_prefix("ws://127.0.0.1:")
        .and_then(|r| r.split('/').next())
        .and_then(|p| p.parse().ok())
        .expect("the endpoint's port");

    let mut fast = RawCdp::connect(&ep.ws_url).expect("the fast client");
    let sf = fast.attach(&page).unwrap();
    fast.call("Runtime.enable", json!({}), Some(&sf), T)
        .unwrap();
    let mut stalled = Stalled::connect(&ep.ws_url);
    let attached = stalled.call(
        "Target.attachToTarget",
        json!({"targetId": page, "flatten": true}),
        None,
    );
    let ss = attached["sessionId"].as_str().unwrap().to_string();
    stalled.call("Runtime.enable", json!({}), Some(&ss));
    assert!(holds_socket(ep_port, stalled.port));
    fast.clear_events();

    // The flood; from here on the stalled client reads nothing.
    let expr = format!(
        "setTimeout(() => {{ const pad = 'p'.repeat(200); \
         for (let i = 0; i < {LINES}; i++) console.log(i, pad); }}, 0); 1"
    );
    let started = Instant::now();
    fast.call(
        "Runtime.evaluate",
        json!({"expression": expr}),
        Some(&sf),
        T,
    )
    .unwrap();
    let mut next = 0u64;
    while next < LINES as u64 {
        let e = fast
            .wait_event("Runtime.consoleAPICalled", Some(&sf), T)
            .unwrap_or_else(|| panic!("the fast client got {next} of {LINES}"));
        assert_eq!(e["params"]["args"][0]["value"], next, "in order");
        next += 1;
    }
    let fast_took = started.elapsed();

    // The stalled client is let go (its socket closed by the endpoint), alone.
    let cut = common::wait_until(T, || {
        (!holds_socket(ep_port, stalled.port)).then(|| started.elapsed())
    })
    .expect("the stalled client was disconnected");
    assert_eq!(
        fast.evaluate(&sf, "6*7", T).unwrap(),
        json!(42),
        "the fast client goes on"
    );
    sup.call("Browser.getVersion", json!({}), Route::Browser, T)
        .expect("the task goes on");
    let (got, end) = stalled.drain();
    assert!(
        got.iter().enumerate().all(|(i, n)| *n == i as u64),
        "what reached the stalled client came in order"
    );
    assert!(got.len() < LINES, "the stalled client got everything");
    eprintln!(
        "{LINES} lines: the fast client got all of them in order in {fast_took:?}; the \
         stalled one was cut {cut:?} after the flood began, at {} lines ({end})",
        got.len()
    );
}

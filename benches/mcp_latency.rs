//! MCP round trip over stdio: `tools/call browser_snapshot` against `ping` (the floor), through
//! the real `cdp-supervisor mcp` process; and over Streamable HTTP (`cdp-supervisor mcp --http`):
//! a 2026-07-28 `browser_snapshot` POST against a `server/discover` POST (the plain HTTP round
//! trip through the same server: head and body read with their deadlines, the access rules, the
//! header checks, one JSON answer) on one keep-alive connection.
//!
//! Custom harness (`harness = false`): `cargo bench --bench mcp_latency`.
//!
//! * Server: the binary Cargo built for this bench (release), `cdp-supervisor mcp`, its stdin and
//!   stdout piped to this process; `browser_connect` attaches it to the built-in fake CDP browser
//!   (`cdp_supervisor::fake::FakeBrowser`, in this process) before measuring.
//!   `MCP_LATENCY_BIN` runs another build of the binary instead (to compare servers).
//! * Timed: from just before the request line is written (one `write_all` of a pre-encoded line)
//!   until its answer line (matched by id) has been read and its `id` parsed; notifications the
//!   server may interleave are skipped. `browser_snapshot` answers from the supervisor's
//!   published state: no CDP round trip, so the fake browser and Chromium cost the same here.
//! * Depth 1: one request in flight; ping and snapshot samples alternate.
//! * Depth 8: eight requests in flight (pipelined ids: each answer read sends the next request),
//!   in alternating blocks of ping and snapshot requests. A server that answers one request at a
//!   time queues them; a concurrent one may overlap them.
//!
//! * HTTP (issue 23): one keep-alive connection, one request in flight, snapshot and discover
//!   samples alternating; timed from the request's `write_all` until its whole answer (head and
//!   `Content-Length` body) has been read and its `id` parsed.
//!
//! Target (issue 11): snapshot p50 <= 1.5x the ping floor, at each depth; (issue 23) over HTTP
//! snapshot p50 <= 1.5x the `server/discover` round trip.
//!
//! Two runs, each with a fresh server: free (the scheduler places every thread) and pinned (this
//! process and the server on CPU 0), as in `respond_latency`: on 2 vCPUs an answer often wakes the
//! reader on the other vCPU, which moves the floor by tens of microseconds from run to run.
//!
//! Environment: `MCP_LATENCY_SAMPLES` (default 10000 per variant and depth), `MCP_LATENCY_BIN`.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use cdp_supervisor::fake::FakeBrowser;
use common::*;
use hdrhistogram::Histogram;
use serde::Deserialize;
use serde_json::{Value, json};

const WARMUP: usize = 500;
const DEPTH: usize = 8;
/// Requests per block at depth 8 (ping and snapshot blocks alternate).
const BLOCK: usize = 250;
const TARGET_RATIO: f64 = 1.5;

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Ping,
    Snapshot,
}

/// Only the id of an answer is parsed in the timed path (the rest is skipped unparsed).
#[derive(Deserialize)]
struct Answer {
    id: Option<u64>,
}

/// `cdp-supervisor mcp` with piped stdio; killed and reaped on drop if still running.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    line: String,
    next_id: u64,
}

impl Server {
    fn start(bin: &str) -> Server {
        let mut cmd = Command::new(bin);
        cmd.arg("mcp");
        for (k, _) in std::env::vars_os() {
            if k.to_str()
                .is_some_and(|k| k.starts_with("CDP_SUPERVISOR__") || k == "CDP_SUPERVISOR_CONFIG")
            {
                cmd.env_remove(k);
            }
        }
        cmd.env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {bin} mcp: {e}"));
        let stdin = child.stdin.take();
        let stdout = BufReader::with_capacity(1 << 16, child.stdout.take().expect("stdout"));
        Server {
            child,
            stdin,
            stdout,
            line: String::with_capacity(4096),
            next_id: 0,
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        let w = self.stdin.as_mut().expect("stdin open");
        w.write_all(bytes).expect("write to the server");
    }

    /// The next answer line's id (notifications skipped), the line left in `self.line`.
    fn read_answer(&mut self) -> u64 {
        loop {
            self.line.clear();
            let n = self
                .stdout
                .read_line(&mut self.line)
                .expect("read the server");
            assert!(n > 0, "the server closed its stdout");
            let a: Answer = serde_json::from_str(&self.line)
                .unwrap_or_else(|e| panic!("not a JSON-RPC line ({e}): {}", self.line));
            if let Some(id) = a.id {
                return id;
            }
        }
    }

    /// A pre-encoded request line with a fresh id.
    fn request(&mut self, kind: Kind) -> (u64, Vec<u8>) {
        self.next_id += 1;
        let id = self.next_id;
        let line = match kind {
            Kind::Ping => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#),
            Kind::Snapshot => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"browser_snapshot","arguments":{{}}}}}}"#
            ),
        };
        let mut b = line.into_bytes();
        b.push(b'\n');
        (id, b)
    }

    /// One untimed request, its whole answer parsed.
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut b = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
            .to_string()
            .into_bytes();
        b.push(b'\n');
        self.write(&b);
        while self.read_answer() != id {}
        serde_json::from_str(&self.line).expect("JSON")
    }

    /// Closes stdin and waits up to 5 s for the exit (then kills).
    fn stop(mut self) -> String {
        drop(self.stdin.take());
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(status)) = self.child.try_wait() {
                return format!("exited ({status}) {:.0} ms after EOF", ms(t0.elapsed()));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        "still running 5 s after EOF: killed".into()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Depth 1: `samples` of each kind, alternating (which kind goes first alternates too).
fn depth1(s: &mut Server, samples: usize) -> (Histogram<u64>, Histogram<u64>) {
    let (mut ping, mut snap) = (new_hist(), new_hist());
    for i in 0..WARMUP + samples {
        let order = if i % 2 == 0 {
            [Kind::Ping, Kind::Snapshot]
        } else {
            [Kind::Snapshot, Kind::Ping]
        };
        for kind in order {
            let (id, req) = s.request(kind);
            let t0 = Instant::now();
            s.write(&req);
            while s.read_answer() != id {}
            let el = t0.elapsed();
            if i >= WARMUP {
                record(
                    if kind == Kind::Ping {
                        &mut ping
                    } else {
                        &mut snap
                    },
                    el,
                );
            }
        }
    }
    (ping, snap)
}

/// One block at depth [`DEPTH`]: `n` requests of `kind`, `DEPTH` in flight; each answer's latency
/// is recorded into `h` (when given).
fn block(s: &mut Server, kind: Kind, n: usize, mut h: Option<&mut Histogram<u64>>) {
    let mut sent: Vec<(u64, Instant)> = Vec::with_capacity(DEPTH);
    let mut issued = 0;
    let mut done = 0;
    while issued < n.min(DEPTH) {
        let (id, req) = s.request(kind);
        sent.push((id, Instant::now()));
        s.write(&req);
        issued += 1;
    }
    while done < n {
        let id = s.read_answer();
        let now = Instant::now();
        let Some(pos) = sent.iter().position(|(i, _)| *i == id) else {
            continue; // not ours (an earlier untimed request)
        };
        let (_, t0) = sent.swap_remove(pos);
        done += 1;
        if let Some(h) = h.as_deref_mut() {
            record(h, now - t0);
        }
        if issued < n {
            let (id, req) = s.request(kind);
            sent.push((id, Instant::now()));
            s.write(&req);
            issued += 1;
        }
    }
}

/// Depth 8: alternating blocks of ping and snapshot requests, `samples` of each kind.
fn depth8(s: &mut Server, samples: usize) -> (Histogram<u64>, Histogram<u64>) {
    let (mut ping, mut snap) = (new_hist(), new_hist());
    block(s, Kind::Ping, WARMUP, None);
    block(s, Kind::Snapshot, WARMUP, None);
    let mut left = samples;
    let mut first = Kind::Ping;
    while left > 0 {
        let n = left.min(BLOCK);
        for kind in [first, other(first)] {
            let h = if kind == Kind::Ping {
                &mut ping
            } else {
                &mut snap
            };
            block(s, kind, n, Some(h));
        }
        left -= n;
        first = other(first);
    }
    (ping, snap)
}

fn other(k: Kind) -> Kind {
    match k {
        Kind::Ping => Kind::Snapshot,
        Kind::Snapshot => Kind::Ping,
    }
}

/// One server's measurements.
struct Run {
    p1: Histogram<u64>,
    s1: Histogram<u64>,
    p8: Histogram<u64>,
    s8: Histogram<u64>,
    ping_bytes: usize,
    snap_bytes: usize,
    stopped: String,
    /// Over HTTP, depth 1: `server/discover`, an unknown path (404), `browser_snapshot`.
    http: [Histogram<u64>; 3],
}

/// Starts a server, attaches it to `fake`, checks both answers once in full, measures both depths
/// and stops it (EOF).
fn run(bin: &str, fake: &FakeBrowser, samples: usize) -> Run {
    let mut s = Server::start(bin);
    let init = s.call(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "mcp_latency", "version": "0"}}),
    );
    assert!(init.get("result").is_some(), "initialize: {init}");
    s.write(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
    let conn = s.call(
        "tools/call",
        json!({"name": "browser_connect", "arguments": {"cdp_url": fake.ws_url()}}),
    );
    assert_eq!(
        conn["result"]["isError"],
        json!(false),
        "browser_connect: {conn}"
    );
    let ping = s.call("ping", json!({}));
    assert_eq!(ping["result"], json!({}), "ping: {ping}");
    let ping_bytes = s.line.len();
    let snap = s.call(
        "tools/call",
        json!({"name": "browser_snapshot", "arguments": {}}),
    );
    assert_eq!(snap["result"]["isError"], json!(false), "snapshot: {snap}");
    assert!(
        snap["result"]["structuredContent"]["frame_tree"].is_object(),
        "snapshot: {snap}"
    );
    let snap_bytes = s.line.len();
    let (p1, s1) = depth1(&mut s, samples);
    let (p8, s8) = depth8(&mut s, samples);
    let stopped = s.stop();
    let http = http_run(bin, fake, samples);
    Run {
        p1,
        s1,
        p8,
        s8,
        ping_bytes,
        snap_bytes,
        stopped,
        http,
    }
}

/// `cdp-supervisor mcp --http 127.0.0.1:0` and one keep-alive connection to it; killed on drop.
struct HttpBench {
    child: Child,
    conn: TcpStream,
    host: String,
    buf: Vec<u8>,
    next_id: u64,
}

impl HttpBench {
    fn start(bin: &str) -> HttpBench {
        let mut cmd = Command::new(bin);
        cmd.args(["mcp", "--http", "127.0.0.1:0"]);
        for (k, _) in std::env::vars_os() {
            if k.to_str()
                .is_some_and(|k| k.starts_with("CDP_SUPERVISOR_") || k == "CDP_SUPERVISOR_CONFIG")
            {
                cmd.env_remove(k);
            }
        }
        cmd.env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {bin} mcp --http: {e}"));
        let mut err = BufReader::new(child.stderr.take().expect("stderr"));
        let mut line = String::new();
        let host = loop {
            line.clear();
            let n = err.read_line(&mut line).expect("read the server's stderr");
            assert!(n > 0, "the HTTP server ended before printing its URL");
            if let Some(rest) = line.split("MCP over HTTP at http://").nth(1) {
                break rest.split('/').next().expect("host:port").to_string();
            }
        };
        // Keep draining stderr so the server never blocks on it.
        std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        let conn = TcpStream::connect(&host).expect("connect to the HTTP server");
        conn.set_nodelay(true).expect("nodelay");
        HttpBench {
            child,
            conn,
            host,
            buf: Vec::with_capacity(1 << 16),
            next_id: 0,
        }
    }

    /// A pre-encoded 2026-07-28 POST of `method` (`name`: the tool, for `Mcp-Name`).
    fn request(&mut self, method: &str, params: Value, name: Option<&str>) -> (u64, Vec<u8>) {
        self.next_id += 1;
        let id = self.next_id;
        let mut params = params;
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        let body =
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        let name = name.map_or(String::new(), |n| format!("Mcp-Name: {n}\r\n"));
        let req = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
             Mcp-Method: {method}\r\n{name}Content-Length: {}\r\n\r\n{body}",
            self.host,
            body.len()
        );
        (id, req.into_bytes())
    }

    /// Writes `req`, reads its whole answer; its id (the body left at the start of `buf`).
    fn round_trip(&mut self, req: &[u8]) -> (u64, usize) {
        self.conn.write_all(req).expect("write to the HTTP server");
        self.buf.clear();
        let mut chunk = [0u8; 16 * 1024];
        let (head_end, len) = loop {
            let n = self.conn.read(&mut chunk).expect("read the HTTP server");
            assert!(n > 0, "the HTTP server closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = std::str::from_utf8(&self.buf[..i]).expect("an ASCII head");
                assert!(
                    head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.1 404"),
                    "{head}"
                );
                let len = head
                    .lines()
                    .find_map(|l| l.strip_prefix("Content-Length: "))
                    .expect("Content-Length")
                    .parse::<usize>()
                    .expect("a length");
                break (i + 4, len);
            }
        };
        while self.buf.len() < head_end + len {
            let n = self.conn.read(&mut chunk).expect("read the HTTP server");
            assert!(n > 0, "the HTTP server closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
        self.buf.drain(..head_end);
        let a: Answer = serde_json::from_slice(&self.buf[..len]).expect("a JSON-RPC answer");
        (a.id.unwrap_or(0), len)
    }

    /// A pre-encoded `GET` of a path the server does not serve (404 after the access rules).
    fn not_found(&self) -> Vec<u8> {
        format!("GET /elsewhere HTTP/1.1\r\nHost: {}\r\n\r\n", self.host).into_bytes()
    }

    /// One untimed request, its answer parsed in full.
    fn call(&mut self, method: &str, params: Value, name: Option<&str>) -> Value {
        let (id, req) = self.request(method, params, name);
        let (got, len) = self.round_trip(&req);
        assert_eq!(got, id);
        serde_json::from_slice(&self.buf[..len]).expect("JSON")
    }
}

impl Drop for HttpBench {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Over HTTP (depth 1, one keep-alive connection): `server/discover`, a 404 of an unknown path
/// and `browser_snapshot` of a task attached to `fake`, in rotating order.
fn http_run(bin: &str, fake: &FakeBrowser, samples: usize) -> [Histogram<u64>; 3] {
    let mut s = HttpBench::start(bin);
    let conn = s.call(
        "tools/call",
        json!({"name": "browser_connect", "arguments": {"cdp_url": fake.ws_url()}}),
        Some("browser_connect"),
    );
    let task = conn["result"]["structuredContent"]["task_id"]
        .as_str()
        .unwrap_or_else(|| panic!("browser_connect over HTTP: {conn}"))
        .to_string();
    let snap = s.call(
        "tools/call",
        json!({"name": "browser_snapshot", "arguments": {"task_id": task}}),
        Some("browser_snapshot"),
    );
    assert!(
        snap["result"]["structuredContent"]["frame_tree"].is_object(),
        "snapshot over HTTP: {snap}"
    );
    let mut h = [new_hist(), new_hist(), new_hist()];
    for i in 0..WARMUP + samples {
        for k in 0..3 {
            let kind = (i + k) % 3;
            let (id, req) = match kind {
                0 => s.request("server/discover", json!({}), None),
                1 => (0, s.not_found()),
                _ => s.request(
                    "tools/call",
                    json!({"name": "browser_snapshot", "arguments": {"task_id": task}}),
                    Some("browser_snapshot"),
                ),
            };
            let t0 = Instant::now();
            let (got, _) = s.round_trip(&req);
            let el = t0.elapsed();
            assert_eq!(got, id);
            if i >= WARMUP {
                record(&mut h[kind], el);
            }
        }
    }
    h
}

/// Prints one run's tables and verdicts; returns its summary for the README line.
fn report(title: &str, r: &Run) -> String {
    println!();
    println!("{title}");
    let mut summary = Vec::new();
    for (depth, ping, snap) in [(1, &r.p1, &r.s1), (DEPTH, &r.p8, &r.s8)] {
        println!("{depth} request(s) in flight:");
        lat_header();
        lat_row("ping (the JSON-RPC loop's floor)", ping, None);
        lat_row("tools/call browser_snapshot", snap, Some(ping));
        let ratio = q_us(snap, 0.5) / q_us(ping, 0.5);
        println!(
            "Target snapshot p50 <= {TARGET_RATIO}x ping p50 at depth {depth}: {} ({ratio:.2}x: \
             {:.1} us vs {:.1} us).",
            verdict(ratio <= TARGET_RATIO),
            q_us(snap, 0.5),
            q_us(ping, 0.5)
        );
        summary.push(format!(
            "depth {depth} snapshot p50 {:.1} us / p99 {:.1} us vs ping {:.1} / {:.1} us \
             ({ratio:.2}x: {})",
            q_us(snap, 0.5),
            q_us(snap, 0.99),
            q_us(ping, 0.5),
            q_us(ping, 0.99),
            verdict(ratio <= TARGET_RATIO)
        ));
    }
    println!(
        "answer lines: ping {} bytes, browser_snapshot {} bytes; server {}.",
        r.ping_bytes, r.snap_bytes, r.stopped
    );
    let [discover, not_found, snap] = &r.http;
    println!("over HTTP (mcp --http, 2026-07-28 POSTs on one keep-alive connection, 1 in flight):");
    lat_header();
    lat_row(
        "POST server/discover (the HTTP round trip's floor)",
        discover,
        None,
    );
    lat_row(
        "GET /elsewhere (404 after the access rules)",
        not_found,
        Some(discover),
    );
    lat_row("POST tools/call browser_snapshot", snap, Some(discover));
    let ratio = q_us(snap, 0.5) / q_us(discover, 0.5);
    println!(
        "Target HTTP snapshot p50 <= {TARGET_RATIO}x server/discover p50: {} ({ratio:.2}x: \
         {:.1} us vs {:.1} us).",
        verdict(ratio <= TARGET_RATIO),
        q_us(snap, 0.5),
        q_us(discover, 0.5)
    );
    summary.push(format!(
        "HTTP snapshot p50 {:.1} us / p99 {:.1} us vs server/discover {:.1} / {:.1} us \
         ({ratio:.2}x: {}; a 404 of an unknown path {:.1} / {:.1} us)",
        q_us(snap, 0.5),
        q_us(snap, 0.99),
        q_us(discover, 0.5),
        q_us(discover, 0.99),
        verdict(ratio <= TARGET_RATIO),
        q_us(not_found, 0.5),
        q_us(not_found, 0.99),
    ));
    let short = title.split(':').next().unwrap_or(title);
    format!("{short}: {}", summary.join(", "))
}

/// The `cdp-supervisor` binary (package `cdp-supervisor-cli`, which cargo does not build for
/// this package's benches), built into this bench's target directory and profile.
fn built_binary() -> String {
    let exe = std::env::current_exe().expect("the bench binary's path");
    let dir = exe
        .parent()
        .and_then(std::path::Path::parent)
        .expect("a bench binary lies in <target>/<profile>/deps/");
    let profile = dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("release");
    let status = std::process::Command::new(env!("CARGO"))
        .args([
            "build",
            "--quiet",
            "--package",
            "cdp-supervisor-cli",
            "--profile",
            profile,
        ])
        .arg("--manifest-path")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .env(
            "CARGO_TARGET_DIR",
            dir.parent().expect("<target>/<profile>"),
        )
        .status()
        .expect("cargo runs");
    assert!(
        status.success(),
        "building cdp-supervisor-cli failed: {status}"
    );
    dir.join("cdp-supervisor").to_string_lossy().into_owned()
}

fn main() {
    let (date, nproc) = machine();
    let samples: usize = env_or("MCP_LATENCY_SAMPLES", 10_000, |v| *v > 0);
    let bin = std::env::var("MCP_LATENCY_BIN")
        .ok()
        .filter(|b| !b.is_empty())
        .unwrap_or_else(built_binary);
    let started = Instant::now();
    println!("mcp_latency: {date}, nproc = {nproc}");
    println!(
        "server: {bin} mcp over stdio pipes, attached to the built-in fake CDP browser (one \
         frame, no dialog). {samples} samples per variant and depth after {WARMUP} warm-up; timed \
         from the request's write to its answer's id parsed."
    );

    let fake = FakeBrowser::start().expect("start the fake browser");
    let free = run(&bin, &fake, samples);
    // Pinned: this process's threads (the fake browser's included) and the server it spawns
    // next (affinity is inherited) share CPU 0.
    let pinned = pin_process_to_cpu0().then(|| run(&bin, &fake, samples));
    drop(fake);
    let free_line = report(
        "free: the scheduler places every thread (an answer often wakes the reader on the other \
         vCPU, and other load moves the floor)",
        &free,
    );
    let pinned_line = match &pinned {
        Some(p) => report(
            "pinned: this process and the server on CPU 0 (no cross-vCPU wake-ups; the work alone)",
            p,
        ),
        None => "pinned run skipped (sched_setaffinity failed)".to_string(),
    };
    println!();
    println!("Total bench time: {:.1} s", started.elapsed().as_secs_f64());
    println!();
    println!(
        "README: mcp_latency ({date}, nproc={nproc}, cdp-supervisor mcp over stdio pipes and \
         mcp --http, fake browser, {samples} samples; target snapshot p50 <= {TARGET_RATIO}x \
         ping p50, over HTTP <= {TARGET_RATIO}x server/discover p50): \
         {free_line}; {pinned_line}."
    );
}

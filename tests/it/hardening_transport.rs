//! Issue 12, findings 2 and 15 (SPEC §3, §9): every handshake ends at its deadline against a peer
//! that trickles one byte every 200 ms (the WebSocket upgrade, the TLS handshake, `http://`
//! discovery; in the library and in `cdp-supervisor check`), a call's deadline holds while its
//! frame is being written to a peer that stopped reading, and `http://` endpoints with a path
//! prefix and a `?token=` query (Browserless) are discovered with both, with failures that say
//! why without leaking the token.
//!
//! Peers here are test threads on loopback; each ends when its client goes away. Child processes
//! run under [`Child`] guards that kill them on drop, also when a test fails.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::procs::clean_config_env;
use crate::common::wait_until;
use cdp_supervisor::fake::FakeBrowser;
use cdp_supervisor::{Config, Error, Route, SupervisorRegistry};
use serde_json::json;

/// The start bound these tests configure.
const START: Duration = Duration::from_secs(1);

/// Slack for a loaded 2-core machine on top of a bound.
const SLACK: Duration = Duration::from_millis(1500);

fn config(start_timeout: Duration) -> Config {
    Config::default()
        .with_start_timeout(start_timeout)
        .with_reconnect_attempts(0)
}

// ---------------------------------------------------------------------------
// A trickling peer
// ---------------------------------------------------------------------------

/// A loopback server that answers every connection with `prefix`, then one byte (`fill`) every
/// 200 ms, forever: each read succeeds, the answer never ends. Its threads end when their
/// client closes (the write fails) and the accept thread with the test process.
fn trickler(prefix: &'static [u8], fill: u8) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("local_addr").port();
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut s) = conn else { return };
            thread::spawn(move || {
                if s.write_all(prefix).is_err() {
                    return;
                }
                // The peer's pace, not a wait for a condition.
                loop {
                    thread::sleep(Duration::from_millis(200));
                    if s.write_all(&[fill]).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// An upgrade answer whose head never ends.
const WS_TRICKLE: &[u8] = b"HTTP/1.1 101 Switching Protocols\r\nX-Slow: ";
/// A `/json/version` answer whose head never ends.
const HTTP_TRICKLE: &[u8] = b"HTTP/1.1 200 OK\r\nX-Slow: ";
/// A TLS handshake record announcing 16 KiB that then arrive one byte at a time.
const TLS_TRICKLE: &[u8] = &[0x16, 0x03, 0x03, 0x3f, 0xff, 0x02];

/// Starts a supervisor against `url` with a 1 s start bound; returns the error and how long it
/// took.
fn start_fails(url: &str) -> (Error, Duration) {
    let reg = SupervisorRegistry::new(config(START));
    let t = Instant::now();
    let r = reg.get_or_start("trickle", url);
    let took = t.elapsed();
    match r {
        Ok(_) => panic!("{url}: a trickling peer was accepted as a browser"),
        Err(e) => (e, took),
    }
}

fn assert_ends_at_the_start_bound(url: &str, what: &str) {
    let (e, took) = start_fails(url);
    eprintln!("{what}: failed after {took:?}: {e}");
    assert!(
        took < START + SLACK,
        "{what}: connect took {took:?} with start_timeout_s = {START:?}: {e}"
    );
    assert!(
        took >= START - Duration::from_millis(100),
        "{what}: failed early ({took:?}), not at the deadline: {e}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("deadline"),
        "{what}: the error says the deadline passed: {msg}"
    );
}

#[test]
fn websocket_upgrade_to_a_trickling_peer_ends_at_start_timeout() {
    let port = trickler(WS_TRICKLE, b'a');
    assert_ends_at_the_start_bound(
        &format!("ws://127.0.0.1:{port}/devtools/browser/x"),
        "ws:// upgrade",
    );
}

#[test]
fn tls_handshake_with_a_trickling_peer_ends_at_start_timeout() {
    let port = trickler(TLS_TRICKLE, 0);
    assert_ends_at_the_start_bound(
        &format!("wss://127.0.0.1:{port}/devtools/browser/x"),
        "wss:// TLS handshake",
    );
}

#[test]
fn http_discovery_from_a_trickling_peer_ends_at_start_timeout() {
    let port = trickler(HTTP_TRICKLE, b'a');
    assert_ends_at_the_start_bound(&format!("http://127.0.0.1:{port}"), "http:// discovery");
}

// ---------------------------------------------------------------------------
// The binary
// ---------------------------------------------------------------------------

/// A child process, killed and reaped on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `cdp-supervisor check URL`; returns its status, stderr and how long it ran. Panics
/// when it runs longer than `bound`.
fn check(url: &str, bound: Duration) -> (ExitStatus, String, Duration) {
    let mut cmd = Command::new(crate::common::bin::bin());
    cmd.args(["check", url])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    clean_config_env(&mut cmd);
    let t = Instant::now();
    let mut p = Proc(cmd.spawn().expect("spawn cdp-supervisor"));
    let mut stderr = p.0.stderr.take().expect("stderr");
    let reader = thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let status = wait_until(bound, || p.0.try_wait().ok().flatten());
    let took = t.elapsed();
    let Some(status) = status else {
        drop(p);
        let err = reader.join().unwrap_or_default();
        panic!("check {url} still running after {took:?}\n--- stderr ---\n{err}");
    };
    let err = reader.join().unwrap_or_default();
    (status, err, took)
}

#[test]
fn check_against_trickling_peers_exits_within_its_bound() {
    // `check` is bounded by cdp_available's 5 s in all; run the three at once.
    let bound = cdp_supervisor::unversioned::AVAILABLE_TIMEOUT + SLACK;
    let urls = [
        format!(
            "ws://127.0.0.1:{}/devtools/browser/x",
            trickler(WS_TRICKLE, b'a')
        ),
        format!(
            "wss://127.0.0.1:{}/devtools/browser/x",
            trickler(TLS_TRICKLE, 0)
        ),
        format!("http://127.0.0.1:{}", trickler(HTTP_TRICKLE, b'a')),
    ];
    let runs: Vec<_> = urls
        .iter()
        .cloned()
        .map(|u| thread::spawn(move || (check(&u, bound + SLACK), u)))
        .collect();
    for r in runs {
        let ((status, err, took), url) = r.join().expect("check thread");
        eprintln!("check {url}: {status} after {took:?}: {}", err.trim());
        assert_eq!(status.code(), Some(1), "check {url} exits 1: {err}");
        assert!(took < bound, "check {url} took {took:?} (bound {bound:?})");
        assert!(
            err.contains("deadline"),
            "check {url} says why on stderr: {err}"
        );
    }
}

// ---------------------------------------------------------------------------
// A call's deadline while its frame is being written
// ---------------------------------------------------------------------------

#[test]
fn call_to_a_peer_that_stopped_reading_times_out_at_its_own_deadline() {
    let fake = FakeBrowser::start().expect("fake browser");
    let reg = SupervisorRegistry::new(config(Duration::from_secs(10)));
    let sup = reg.get_or_start("task", &fake.ws_url()).expect("attach");
    fake.set_stop_reading(true);
    // The fake's connection thread, blocked in a read, takes one more message before it parks.
    let one_more = sup.call(
        "Browser.getVersion",
        json!({}),
        Route::Browser,
        Duration::from_secs(10),
    );
    assert!(one_more.is_ok(), "{one_more:?}");
    // 48 MB: more than the socket buffers on both ends hold, so the write blocks.
    let big = "x".repeat(48 << 20);
    let timeout = Duration::from_secs(2);
    let t = Instant::now();
    let r = sup.call(
        "Runtime.evaluate",
        json!({ "expression": big }),
        Route::Browser,
        timeout,
    );
    let took = t.elapsed();
    eprintln!("a 2 s call to a peer that stopped reading returned after {took:?}: {r:?}");
    assert!(
        matches!(r, Err(Error::Timeout { .. })),
        "the call times out: {r:?}"
    );
    assert!(
        took < timeout + Duration::from_millis(800),
        "a {timeout:?} call returned after {took:?}"
    );
    // Still attached: a short stall is the call's problem, not the connection's.
    assert!(sup.is_alive(), "the supervisor is still alive");
    fake.set_stop_reading(false);
    let v = sup.call(
        "Browser.getVersion",
        json!({}),
        Route::Browser,
        Duration::from_secs(20),
    );
    assert!(
        v.is_ok(),
        "the connection still works once the peer reads: {v:?}"
    );
}

// ---------------------------------------------------------------------------
// http:// with a path prefix and a token (Browserless)
// ---------------------------------------------------------------------------

const TOKEN: &str = "S3CRETtok";

/// A Browserless-like gate in front of the fake browser: every request must carry
/// `token=S3CRETtok` in its query (401 otherwise); `GET <prefix>/json/version` is answered
/// here with a `webSocketDebuggerUrl` *without* the token (as Browserless does), and WebSocket
/// upgrades are relayed to the fake. Records every request line.
struct TokenGate {
    port: u16,
    requests: Arc<Mutex<Vec<String>>>,
}

impl TokenGate {
    fn start(upstream: u16) -> TokenGate {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("local_addr").port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&requests);
        thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(client) = conn else { return };
                let seen = Arc::clone(&seen);
                thread::spawn(move || gate(client, port, upstream, &seen));
            }
        });
        TokenGate { port, requests }
    }

    fn requests(&self) -> Vec<String> {
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

fn gate(mut client: TcpStream, port: u16, upstream: u16, seen: &Mutex<Vec<String>>) {
    let _ = client.set_read_timeout(Some(Duration::from_secs(10)));
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match client.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let text = String::from_utf8_lossy(&head).to_string();
    let line = text.lines().next().unwrap_or("").to_string();
    seen.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(line.clone());
    let target = line.split_whitespace().nth(1).unwrap_or("");
    if !target.contains(&format!("token={TOKEN}")) {
        let _ = client.write_all(
            b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
        return;
    }
    if target.starts_with("/bl/json/version") || target.starts_with("/json/version") {
        let body =
            format!(r#"{{"webSocketDebuggerUrl":"ws://127.0.0.1:{port}/devtools/browser/fake"}}"#);
        let _ = client.write_all(
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        );
        return;
    }
    let Ok(mut up) = TcpStream::connect(("127.0.0.1", upstream)) else {
        return;
    };
    let _ = client.set_read_timeout(None);
    if up.write_all(&head).is_err() {
        return;
    }
    let (Ok(mut up2), Ok(mut client2)) = (up.try_clone(), client.try_clone()) else {
        return;
    };
    let back = thread::spawn(move || {
        let _ = std::io::copy(&mut up2, &mut client2);
        let _ = client2.shutdown(Shutdown::Both);
    });
    let _ = std::io::copy(&mut client, &mut up);
    let _ = up.shutdown(Shutdown::Both);
    let _ = back.join();
}

#[test]
fn http_endpoint_with_a_token_query_and_a_path_prefix_is_discovered_and_attached() {
    let fake = FakeBrowser::start().expect("fake browser");
    let fake_port = url::Url::parse(&fake.ws_url())
        .ok()
        .and_then(|u| u.port())
        .expect("the fake's port");
    let gate = TokenGate::start(fake_port);
    for url in [
        format!("http://127.0.0.1:{}/?token={TOKEN}", gate.port),
        format!("http://127.0.0.1:{}/bl/?token={TOKEN}", gate.port),
    ] {
        let (status, err, took) = check(&url, Duration::from_secs(10));
        assert_eq!(status.code(), Some(0), "check {url} exits 0: {err}");
        eprintln!("check {url}: ok in {took:?}");
        let reg = SupervisorRegistry::new(config(Duration::from_secs(10)));
        let sup = reg
            .get_or_start("bl", &url)
            .unwrap_or_else(|e| panic!("get_or_start {url}: {e}"));
        assert!(
            sup.snapshot().page_target_id.is_some(),
            "attached to a page"
        );
        let shown = sup.snapshot().cdp_url.clone();
        assert!(
            !shown.contains(TOKEN),
            "the snapshot's URL is redacted: {shown}"
        );
        reg.stop_all();
    }
    let requests = gate.requests();
    assert!(
        requests
            .iter()
            .any(|l| l.starts_with(&format!("GET /json/version?token={TOKEN} "))),
        "discovery kept the query: {requests:?}"
    );
    assert!(
        requests
            .iter()
            .any(|l| l.starts_with(&format!("GET /bl/json/version?token={TOKEN} "))),
        "discovery kept the path prefix: {requests:?}"
    );
    assert!(
        requests
            .iter()
            .any(|l| l.starts_with(&format!("GET /devtools/browser/fake?token={TOKEN} "))),
        "the WebSocket upgrade carried the token: {requests:?}"
    );
}

#[test]
fn http_endpoint_with_a_wrong_token_fails_with_a_redacted_reason() {
    let gate = TokenGate::start(1);
    let url = format!("http://127.0.0.1:{}/?token=WR0NGtok", gate.port);
    let (status, err, _) = check(&url, Duration::from_secs(10));
    assert_eq!(status.code(), Some(1), "check exits 1: {err}");
    assert!(
        err.contains("401"),
        "check says the endpoint answered 401: {err}"
    );
    assert!(!err.contains("WR0NGtok"), "check leaked the token: {err}");
    let reg = SupervisorRegistry::new(config(Duration::from_secs(10)));
    let e = reg
        .get_or_start("bl", &url)
        .expect_err("a wrong token is refused");
    let msg = e.to_string();
    assert!(msg.contains("401"), "the error names the 401: {msg}");
    assert!(
        !msg.contains("WR0NGtok"),
        "the error leaked the token: {msg}"
    );
}

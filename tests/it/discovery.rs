//! Issue 20, items 9 and 11 (SPEC §9): `http://` discovery against scripted loopback HTTP
//! servers. `GET /json/version` answered with `Content-Length`, chunked with `Connection:
//! close`, chunked on a kept-alive connection (what Browserless does), redirects (relative,
//! absolute on the same host, to another host without credentials, to another scheme, too
//! many), a body over 1 MiB and a body that trickles until the start deadline. Userinfo reaches
//! the server as `Authorization: Basic` percent-decoded (`pa+ss` stays `pa+ss`).
//!
//! Each server is a test thread on loopback that records every request it gets; its
//! connection threads end with their client, the accept thread with the test process.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use base64::Engine;
use cdp_supervisor::fake::FakeBrowser;
use cdp_supervisor::unversioned::resolve;
use cdp_supervisor::{Config, SupervisorRegistry};

use crate::common::procs::clean_config_env;

const TOKEN: &str = "T0KEN-d1sc";

/// One request a [`Script`] server got.
#[derive(Debug, Clone)]
struct Seen {
    /// `GET /json/version?token=... HTTP/1.1`
    line: String,
    headers: Vec<(String, String)>,
}

impl Seen {
    fn target(&self) -> &str {
        self.line.split_whitespace().nth(1).unwrap_or("")
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What the server does once it has written its answer.
enum Then {
    /// Closes the connection.
    Close,
    /// Keeps it open until the client closes it.
    KeepOpen,
    /// Writes one more byte (`fill`) every 200 ms until the client goes away.
    Trickle(u8),
}

/// An answer: the bytes, then what happens to the connection.
struct Reply(Vec<u8>, Then);

type Handler = dyn Fn(&Seen, u16) -> Reply + Send + Sync;

/// A scripted loopback HTTP server: `handler` gets each request and the server's own port.
struct Script {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Script {
    fn start(handler: impl Fn(&Seen, u16) -> Reply + Send + Sync + 'static) -> Script {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("local_addr").port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let handler: Arc<Handler> = Arc::new(handler);
        thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(stream) = conn else { return };
                let (log, handler) = (Arc::clone(&log), Arc::clone(&handler));
                thread::spawn(move || serve(stream, port, &log, &*handler));
            }
        });
        Script { port, seen }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

fn serve(mut s: TcpStream, port: u16, log: &Mutex<Vec<Seen>>, handler: &Handler) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let text = String::from_utf8_lossy(&head).to_string();
    let mut lines = text.split("\r\n");
    let line = lines.next().unwrap_or("").to_string();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let seen = Seen { line, headers };
    log.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(seen.clone());
    let Reply(bytes, then) = handler(&seen, port);
    if s.write_all(&bytes).is_err() {
        return;
    }
    match then {
        Then::Close => {}
        Then::KeepOpen => {
            // Until the client closes (or 30 s pass).
            let mut sink = [0u8; 256];
            while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
        }
        Then::Trickle(fill) => loop {
            // The peer's pace, not a wait for a condition.
            thread::sleep(Duration::from_millis(200));
            if s.write_all(&[fill]).is_err() {
                return;
            }
        },
    }
}

/// The `/json/version` JSON naming `ws`.
fn version_json(ws: &str) -> String {
    format!(
        r#"{{"Browser":"Scripted/1.0","Protocol-Version":"1.3","webSocketDebuggerUrl":"{ws}"}}"#
    )
}

fn with_length(body: &str, extra_headers: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra_headers}\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// `body` chunked in pieces of at most 7 bytes (with a chunk extension and a trailer).
fn chunked(body: &str, extra_headers: &str) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n{extra_headers}\r\n"
    )
    .into_bytes();
    for (i, piece) in body.as_bytes().chunks(7).enumerate() {
        let ext = if i == 1 { ";name=value" } else { "" };
        out.extend_from_slice(format!("{:x}{ext}\r\n", piece.len()).as_bytes());
        out.extend_from_slice(piece);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\nX-Trailer: done\r\n\r\n");
    out
}

fn redirect(code: u16, location: &str) -> Reply {
    Reply(
        format!("HTTP/1.1 {code} Moved\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n")
            .into_bytes(),
        Then::KeepOpen,
    )
}

const WS: &str = "ws://127.0.0.1:9/devtools/browser/scripted";

/// Resolves `url`, returning the result and how long it took.
fn timed_resolve(url: &str) -> (Result<String, cdp_supervisor::Error>, Duration) {
    let t = Instant::now();
    let r = resolve(url);
    (r, t.elapsed())
}

// ---------------------------------------------------------------------------
// Framing
// ---------------------------------------------------------------------------

#[test]
fn a_content_length_answer_on_a_kept_alive_connection_is_read_at_once() {
    let server = Script::start(|_, _| Reply(with_length(&version_json(WS), ""), Then::KeepOpen));
    let (r, took) = timed_resolve(&format!("http://127.0.0.1:{}", server.port));
    eprintln!("Content-Length, keep-alive: {took:?}");
    assert_eq!(r.expect("resolved"), WS);
    assert!(took < Duration::from_secs(1), "took {took:?}");
}

#[test]
fn a_chunked_answer_then_close_is_decoded() {
    let server = Script::start(|_, _| {
        Reply(
            chunked(&version_json(WS), "Connection: close\r\n"),
            Then::Close,
        )
    });
    let r = resolve(&format!("http://127.0.0.1:{}", server.port));
    assert_eq!(r.expect("resolved"), WS);
}

#[test]
fn a_chunked_answer_on_a_kept_alive_connection_is_read_without_waiting_for_close() {
    // Browserless answers `/json/version` like this; it used to take the whole 5 s bound.
    let server = Script::start(|_, _| Reply(chunked(&version_json(WS), ""), Then::KeepOpen));
    let (r, took) = timed_resolve(&format!("http://127.0.0.1:{}/?token={TOKEN}", server.port));
    eprintln!("chunked, keep-alive: {took:?}");
    let ws = r.expect("resolved");
    assert_eq!(ws, format!("{WS}?token={TOKEN}"), "the token rides along");
    assert!(took < Duration::from_secs(1), "took {took:?}");
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].target(), format!("/json/version?token={TOKEN}"));
}

#[test]
fn a_chunked_discovery_attaches_and_check_passes() {
    let fake = FakeBrowser::start().expect("fake browser");
    let ws = fake.ws_url();
    let server = Script::start(move |_, _| Reply(chunked(&version_json(&ws), ""), Then::KeepOpen));
    let url = format!("http://127.0.0.1:{}/?token={TOKEN}", server.port);
    let reg = SupervisorRegistry::new(Config::default());
    let t = Instant::now();
    let sup = reg.get_or_start("chunked", &url).expect("attached");
    eprintln!("attach through chunked discovery: {:?}", t.elapsed());
    assert!(sup.snapshot().page_target_id.is_some());
    reg.stop_all();
    let mut cmd = Command::new(crate::common::bin::bin());
    cmd.args(["check", &url])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    clean_config_env(&mut cmd);
    let t = Instant::now();
    let out = cmd.output().expect("run check");
    let took = t.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "check exits 0: {err}");
    assert!(took < Duration::from_secs(4), "check took {took:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(!said.contains(TOKEN) && !err.contains(TOKEN), "{said}{err}");
}

#[test]
fn a_body_over_one_mib_is_refused() {
    let big = format!(
        r#"{{"webSocketDebuggerUrl":"{WS}","pad":"{}"}}"#,
        "x".repeat(1 << 20)
    );
    let big2 = big.clone();
    let length = Script::start(move |_, _| Reply(with_length(&big, ""), Then::KeepOpen));
    let chunks = Script::start(move |_, _| Reply(chunked(&big2, ""), Then::KeepOpen));
    for (what, port) in [("Content-Length", length.port), ("chunked", chunks.port)] {
        let (r, took) = timed_resolve(&format!("http://127.0.0.1:{port}"));
        let e = r.expect_err("over 1 MiB").to_string();
        eprintln!("{what} over 1 MiB: {took:?}: {e}");
        assert!(e.contains("larger than 1 MiB"), "{what}: {e}");
        assert!(took < Duration::from_secs(4), "{what}: took {took:?}");
    }
}

#[test]
fn a_body_that_trickles_is_cut_at_the_start_deadline() {
    let start = Duration::from_secs(1);
    let server = Script::start(|_, _| {
        Reply(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n{".to_vec(),
            Then::Trickle(b' '),
        )
    });
    let reg = SupervisorRegistry::new(
        Config::default()
            .with_start_timeout(start)
            .with_reconnect_attempts(0),
    );
    let t = Instant::now();
    let e = reg
        .get_or_start("trickle", &format!("http://127.0.0.1:{}", server.port))
        .expect_err("a trickle never resolves");
    let took = t.elapsed();
    eprintln!("trickled body: failed after {took:?}: {e}");
    assert!(took >= start - Duration::from_millis(100), "{took:?}");
    assert!(took < start + Duration::from_millis(1500), "{took:?}");
    assert!(e.to_string().contains("deadline"), "{e}");
}

// ---------------------------------------------------------------------------
// Redirects
// ---------------------------------------------------------------------------

/// `user:pa+ss` as a Basic credential.
fn basic(pair: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

#[test]
fn relative_and_absolute_same_host_redirects_are_followed_with_the_credentials() {
    let server = Script::start(|seen, port| match seen.target() {
        t if t.starts_with("/json/version") => {
            redirect(302, &format!("/moved/json/version?token={TOKEN}"))
        }
        t if t.starts_with("/moved/") => redirect(
            308,
            &format!("http://127.0.0.1:{port}/abs/json/version?token={TOKEN}"),
        ),
        _ => Reply(chunked(&version_json(WS), ""), Then::KeepOpen),
    });
    let url = format!("http://user:pa+ss@127.0.0.1:{}/?token={TOKEN}", server.port);
    let ws = resolve(&url).expect("resolved");
    assert_eq!(
        ws,
        format!("ws://user:pa+ss@127.0.0.1:9/devtools/browser/scripted?token={TOKEN}")
    );
    let seen = server.seen();
    let targets: Vec<_> = seen.iter().map(Seen::target).collect();
    assert_eq!(
        targets,
        [
            format!("/json/version?token={TOKEN}"),
            format!("/moved/json/version?token={TOKEN}"),
            format!("/abs/json/version?token={TOKEN}"),
        ]
    );
    for s in &seen {
        assert_eq!(
            s.header("authorization"),
            Some(basic("user:pa+ss").as_str()),
            "same host: the credentials go along ({})",
            s.line
        );
    }
}

#[test]
fn five_redirects_are_followed_and_a_sixth_is_refused() {
    let server = Script::start(|seen, _| {
        let hop: usize = seen
            .target()
            .strip_prefix("/hop")
            .and_then(|r| r.split('/').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let limit: usize = if seen.target().contains("limit=6") {
            6
        } else {
            5
        };
        if hop < limit {
            let q = seen.target().split_once('?').map(|(_, q)| q).unwrap_or("");
            redirect(301, &format!("/hop{}/json/version?{q}", hop + 1))
        } else {
            Reply(with_length(&version_json(WS), ""), Then::Close)
        }
    });
    let ok = resolve(&format!("http://127.0.0.1:{}/?limit=5", server.port));
    assert_eq!(
        ok.expect("5 redirects are followed"),
        format!("{WS}?limit=5")
    );
    let e = resolve(&format!("http://127.0.0.1:{}/?limit=6", server.port))
        .expect_err("a sixth redirect is refused")
        .to_string();
    assert!(e.contains("more than 5 times"), "{e}");
    let hops = server
        .seen()
        .iter()
        .filter(|s| s.target().contains("limit=6"))
        .count();
    assert_eq!(hops, 6, "the sixth redirect was not followed");
}

#[test]
fn a_redirect_to_another_scheme_is_refused() {
    for location in [
        "https://127.0.0.1:1/json/version",
        "ws://127.0.0.1:1/devtools/browser/x",
        "file:///etc/passwd",
    ] {
        let loc = location.to_string();
        let server = Script::start(move |_, _| redirect(302, &loc));
        let e = resolve(&format!("http://127.0.0.1:{}/?token={TOKEN}", server.port))
            .expect_err("refused")
            .to_string();
        eprintln!("redirect to {location}: {e}");
        assert!(e.contains("another scheme"), "{location}: {e}");
        assert!(!e.contains(TOKEN), "{e}");
    }
}

#[test]
fn a_redirect_to_another_host_gets_no_credentials() {
    let other = Script::start(|_, _| Reply(chunked(&version_json(WS), ""), Then::KeepOpen));
    let other_port = other.port;
    let server = Script::start(move |_, _| {
        // Userinfo in a Location is ignored too.
        redirect(
            307,
            &format!("http://evil:pw@localhost:{other_port}/json/version"),
        )
    });
    let url = format!("http://user:pa+ss@127.0.0.1:{}/?token={TOKEN}", server.port);
    let ws = resolve(&url).expect("resolved through the other host");
    assert_eq!(
        ws, WS,
        "the other host's URL gets none of the user's credentials"
    );
    let seen = other.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].header("authorization"), None, "{seen:?}");
    assert_eq!(seen[0].target(), "/json/version");
    assert!(
        seen[0]
            .header("host")
            .is_some_and(|h| h.starts_with("localhost:"))
    );
    assert_eq!(
        server.seen()[0].header("authorization"),
        Some(basic("user:pa+ss").as_str())
    );
}

#[test]
fn a_redirect_to_another_host_that_would_carry_the_token_is_refused() {
    let other = Script::start(|_, _| Reply(chunked(&version_json(WS), ""), Then::KeepOpen));
    let other_port = other.port;
    let server = Script::start(move |seen, _| {
        let q = seen.target().split_once('?').map(|(_, q)| q).unwrap_or("");
        redirect(
            302,
            &format!("http://localhost:{other_port}/json/version?{q}"),
        )
    });
    let e = resolve(&format!("http://127.0.0.1:{}/?token={TOKEN}", server.port))
        .expect_err("refused")
        .to_string();
    eprintln!("redirect with the token to another host: {e}");
    assert!(e.contains("another host"), "{e}");
    assert!(!e.contains(TOKEN), "{e}");
    assert!(other.seen().is_empty(), "the other host was contacted");
}

#[test]
fn basic_auth_from_userinfo_reaches_the_server_percent_decoded() {
    let server = Script::start(|_, _| Reply(with_length(&version_json(WS), ""), Then::Close));
    for (userinfo, pair) in [
        ("user:pa+ss", "user:pa+ss"),
        ("user:pa%2Bss", "user:pa+ss"),
        ("us%40er:p%40ss", "us@er:p@ss"),
        ("j%C3%BCrgen:p%C3%A4ss", "jürgen:päss"),
        ("user:pa%zzss", "user:pa%zzss"),
    ] {
        resolve(&format!("http://{userinfo}@127.0.0.1:{}/", server.port)).expect("resolved");
        let seen = server.seen();
        let last = seen.last().expect("a request");
        assert_eq!(
            last.header("authorization"),
            Some(basic(pair).as_str()),
            "{userinfo}"
        );
    }
}

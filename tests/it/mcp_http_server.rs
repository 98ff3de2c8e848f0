//! The MCP HTTP server (`mcp::http`) in this process, driven with raw HTTP/1.1 over TCP: the
//! access rules, keep-alive, deadlines and caps, legacy sessions, the 2026-07-28 header checks,
//! tasks per client (on the fake browser), a call cancelled by its client leaving, and shutdown
//! with a call in flight. The client is [`crate::common::raw_http`]; `cdp-supervisor mcp --http`
//! as a process is `mcp_http`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use cdp_supervisor::Config;
use cdp_supervisor::fake::{FakeBrowser, Rule};
use cdp_supervisor::mcp::MAX_LINE;
use cdp_supervisor::mcp::http::{ENDPOINT, HttpOptions, HttpServer, TOKEN_ENV};
use cdp_supervisor::unversioned::mcp::{calls_in_flight, open_places, streams_open};
use serde_json::{Value, json};

use crate::common::raw_http::{Client, Reply, WAIT, closes_within, eventually, initialize, start};

/// A server with the default configuration and `options`.
fn serve(options: HttpOptions) -> HttpServer {
    start(Config::default(), options)
}

/// A legacy `tools/list` request.
fn tools_list(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"})
}

/// A 2026-07-28 request and its mirrored headers.
fn modern(id: u64, method: &str, params: Value) -> (Value, Vec<(&'static str, String)>) {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let mut headers = vec![
        ("MCP-Protocol-Version", "2026-07-28".to_string()),
        ("Mcp-Method", method.to_string()),
    ];
    if let Some(name) = params.get("name").and_then(Value::as_str) {
        headers.push(("Mcp-Name", name.to_string()));
    }
    (
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        headers,
    )
}

/// Posts a 2026-07-28 request with `_meta` additions.
fn send_modern(c: &mut Client, id: u64, method: &str, params: Value, meta: Value) {
    let (mut body, headers) = modern(id, method, params);
    for (k, v) in meta.as_object().unwrap() {
        body["params"]["_meta"][k] = v.clone();
    }
    let h: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    c.send("POST", ENDPOINT, &h, &body.to_string());
}

fn post_modern(c: &mut Client, id: u64, method: &str, params: Value) -> Reply {
    send_modern(c, id, method, params, json!({}));
    c.read().expect("an answer")
}

fn tool(c: &mut Client, id: u64, name: &str, args: Value) -> Value {
    let r = post_modern(
        c,
        id,
        "tools/call",
        json!({"name": name, "arguments": args}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    r.json()["result"]["structuredContent"].clone()
}

/// Connects a task on the fake through `c`; its id.
fn connect_task(c: &mut Client) -> String {
    tool(c, 1, "browser_connect", json!({}))["task_id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A server (with `options`) whose tasks start on a fake browser of their own.
fn on_fake(options: HttpOptions) -> (FakeBrowser, HttpServer) {
    let fake = FakeBrowser::start().unwrap();
    let server = start(
        Config::default().with_cdp_url(fake.ws_url()).unwrap(),
        options,
    );
    (fake, server)
}

/// A `subscriptions/listen` POST for `task`'s resource on a fresh connection, its answer unread.
fn open_listen(server: &HttpServer, id: u64, task: &str) -> Client {
    let mut l = Client::new(server);
    let uri = format!("cdp-supervisor://tasks/{task}");
    let params = json!({"notifications": {"resourceSubscriptions": [uri]}});
    send_modern(&mut l, id, "subscriptions/listen", params, json!({}));
    l
}

#[test]
fn host_origin_and_token_rules_hold_before_anything_else() {
    let server = start(
        Config::default()
            .with_allowed_hosts(["mcp.example.test"])
            .unwrap(),
        HttpOptions::default().with_token(Some("tok-42".into())),
    );
    let port = server.local_addr().port();
    let own = format!("localhost:{port}");
    let auth = ("Authorization", "Bearer tok-42");

    let r = Client::new(&server).post(&[("Host", "evil.example:80"), auth], &initialize());
    assert_eq!(r.status, 403, "{r:?}");
    let r = Client::new(&server).post(
        &[("Host", &own), ("Origin", "http://evil.example"), auth],
        &initialize(),
    );
    assert_eq!(r.status, 403, "{r:?}");
    let r = Client::new(&server).post(&[("Host", &own)], &initialize());
    assert_eq!(r.status, 401, "{r:?}");
    assert!(r.header("www-authenticate").unwrap().starts_with("Bearer"));
    let r = Client::new(&server).post(
        &[("Host", &own), ("Authorization", "Bearer tok-43")],
        &initialize(),
    );
    assert_eq!(r.status, 401, "{r:?}");
    assert!(!r.body.contains("tok-4"), "{r:?}");
    // Even an unknown path needs the token.
    let mut c = Client::new(&server);
    c.send("GET", "/elsewhere", &[("Host", &own)], "");
    assert_eq!(c.read().unwrap().status, 401);

    let mut c = Client::new(&server);
    let r = c.post(
        &[("Host", &own), ("Origin", &format!("http://{own}")), auth],
        &initialize(),
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.header("mcp-session-id").is_some_and(|s| s.len() == 32));
    let r = c.post(&[("Host", "mcp.example.test"), auth], &initialize());
    assert_eq!(r.status, 200, "an allowed host: {r:?}");
    let r = c.post(&[("Host", &format!("[::1]:{port}")), auth], &initialize());
    assert_eq!(r.status, 200, "{r:?}");
}

#[test]
fn one_connection_serves_many_requests_and_bad_ones_get_the_right_status() {
    let server = serve(HttpOptions::default());
    let mut c = Client::new(&server);
    let init = c.post(&[], &initialize());
    let session = init.header("mcp-session-id").unwrap().to_string();
    let s = [("Mcp-Session-Id", session.as_str())];
    assert_eq!(
        c.post(
            &s,
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
        )
        .status,
        202
    );
    for id in 2..12 {
        let r = c.post(&s, &tools_list(id));
        assert_eq!(r.status, 200);
        assert_eq!(r.json()["id"], id);
        assert_eq!(r.json()["result"]["tools"].as_array().unwrap().len(), 7);
    }
    c.send("GET", ENDPOINT, &[], "");
    let r = c.read().unwrap();
    assert_eq!((r.status, r.header("allow")), (405, Some("POST, DELETE")));
    c.send("GET", "/nothing-here", &[], "");
    assert_eq!(c.read().unwrap().status, 404);
    // A request of a session that ended, or none at all.
    let r = c.post(&[("Mcp-Session-Id", "0000")], &tools_list(3));
    assert_eq!(r.status, 404, "{r:?}");
    let r = c.post(&[], &tools_list(3));
    assert_eq!(r.status, 400, "{r:?}");
    assert!(r.body.contains("initialize"), "{r:?}");
    let r = c.post(
        &[
            ("Mcp-Session-Id", &session),
            ("MCP-Protocol-Version", "2025-06-18"),
        ],
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
    );
    assert_eq!(r.status, 400, "another version than the session's: {r:?}");
    c.send("POST", ENDPOINT, &[], "{not json");
    let r = c.read().unwrap();
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!(-32700))
    );
    c.send("DELETE", ENDPOINT, &s, "");
    assert_eq!(c.read().unwrap().status, 200);
    let r = c.post(&s, &tools_list(4));
    assert_eq!(r.status, 404, "the session ended: {r:?}");

    // A body of another type is refused, and the connection closes (its body is unread).
    let mut c = Client::new(&server);
    c.stream
        .write_all(
            format!(
                "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nhi",
                c.host
            )
            .as_bytes(),
        )
        .unwrap();
    assert_eq!(c.read().unwrap().status, 415);
    assert!(c.closed());
}

#[test]
fn trickling_and_oversized_requests_are_cut_off() {
    let server = serve(
        HttpOptions::default()
            .with_header_timeout(Duration::from_millis(300))
            .with_body_timeout(Duration::from_millis(300)),
    );
    let mut c = Client::new(&server);
    c.stream.write_all(b"POST /mcp HTTP/1.1\r\nHo").unwrap();
    let t = Instant::now();
    let r = c.read().expect("an answer before the close");
    assert_eq!(r.status, 408);
    assert!(c.closed());
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());

    let mut c = Client::new(&server);
    c.stream
        .write_all(
            format!(
                "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                c.host,
                MAX_LINE + 1
            )
            .as_bytes(),
        )
        .unwrap();
    assert_eq!(c.read().unwrap().status, 413);
}

#[test]
fn a_stateless_request_must_mirror_its_body_in_its_headers() {
    let server = serve(HttpOptions::default());
    let mut c = Client::new(&server);
    let (body, _) = modern(5, "tools/list", json!({}));
    let cases: [(&[(&str, &str)], &str); 4] = [
        (&[("Mcp-Method", "tools/list")], "MCP-Protocol-Version"),
        (
            &[
                ("MCP-Protocol-Version", "2025-11-25"),
                ("Mcp-Method", "tools/list"),
            ],
            "does not match",
        ),
        (&[("MCP-Protocol-Version", "2026-07-28")], "Mcp-Method"),
        (
            &[
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/call"),
            ],
            "Mcp-Method",
        ),
    ];
    for (headers, says) in cases {
        let r = c.post(headers, &body);
        assert_eq!(r.status, 400, "{headers:?}: {r:?}");
        assert_eq!(r.json()["error"]["code"], -32020, "{r:?}");
        assert_eq!(r.json()["id"], 5);
        assert!(r.body.contains(says), "{says}: {r:?}");
    }
    let (call, _) = modern(
        6,
        "tools/call",
        json!({"name": "browser_snapshot", "arguments": {"task_id": "x"}}),
    );
    let base = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
    ];
    let r = c.post(&[base[0], base[1], ("Mcp-Name", "browser_cdp")], &call);
    assert_eq!(r.status, 400, "{r:?}");
    // The base64 form of the name is the same name.
    let r = c.post(
        &[
            base[0],
            base[1],
            ("Mcp-Name", "=?base64?YnJvd3Nlcl9zbmFwc2hvdA==?="),
        ],
        &call,
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["result"]["isError"], true, "no such task: {r:?}");
    // The handshake is no 2026-07-28 method: 404 with -32601, and no session.
    let r = post_modern(&mut c, 9, "initialize", initialize()["params"].clone());
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (404, json!(-32601)),
        "{r:?}"
    );
    assert!(r.header("mcp-session-id").is_none(), "{r:?}");
    // A session id on a stateless request is ignored.
    let r = c.post(
        &[
            base[0],
            base[1],
            ("Mcp-Name", "browser_snapshot"),
            ("Mcp-Session-Id", "nope"),
        ],
        &call,
    );
    assert_eq!(r.status, 200, "{r:?}");
}

#[test]
fn clients_that_name_no_task_get_fresh_tasks_of_their_own() {
    let (_fake, server) = on_fake(HttpOptions::default());
    let (mut a, mut b) = (Client::new(&server), Client::new(&server));
    let (ta, tb) = (connect_task(&mut a), connect_task(&mut b));
    assert_ne!(ta, tb);
    for t in [&ta, &tb] {
        assert!(t.starts_with("task-") && t.len() == 37, "{t}");
        assert!(server.mcp().registry().get(t).is_some());
    }
    for name in [
        "browser_snapshot",
        "browser_dialog",
        "browser_cdp",
        "browser_disconnect",
    ] {
        let out = tool(
            &mut a,
            2,
            name,
            json!({"action": "accept", "method": "Page.enable"}),
        );
        assert_eq!(out["success"], false, "{name}: {out}");
        assert!(
            out["error"]
                .as_str()
                .unwrap()
                .contains("task_id is required"),
            "{name}: {out}"
        );
    }
    let snap = tool(&mut a, 3, "browser_snapshot", json!({"task_id": ta}));
    assert!(
        snap["success"] != false && snap.get("frame_tree").is_some(),
        "{snap}"
    );
    let bye = tool(&mut b, 3, "browser_disconnect", json!({"task_id": tb}));
    assert_eq!(bye["stopped"], true, "{bye}");
    assert!(
        server.mcp().registry().get(&ta).is_some(),
        "a's task is a's"
    );
}

#[test]
fn a_client_that_leaves_cancels_its_call_and_shutdown_drops_calls_in_flight() {
    let (fake, server) = on_fake(HttpOptions::default());
    fake.set_rule("Runtime.evaluate", Rule::Ignore);
    let mut c = Client::new(&server);
    let task = connect_task(&mut c);
    let hang = json!({"name": "browser_cdp", "arguments": {
        "task_id": task, "method": "Runtime.evaluate", "params": {"expression": "1"}, "timeout_s": 60}});
    let started = || calls_in_flight(server.mcp()) == 1;
    let tick = Duration::from_millis(1);
    send_modern(&mut c, 2, "tools/call", hang.clone(), json!({}));
    eventually(WAIT, tick, "the call never started", started);
    drop(c);
    let (within, what) = (Duration::from_secs(2), "the call outlived its client");
    eventually(within, tick, what, || calls_in_flight(server.mcp()) == 0);

    // Another call in flight, then shutdown: no answer, the connection closes.
    let mut c = Client::new(&server);
    send_modern(&mut c, 2, "tools/call", hang, json!({}));
    eventually(WAIT, tick, "the call never started", started);
    let t = Instant::now();
    server.shutdown();
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert!(c.read().is_none(), "a call in flight got an answer");
    assert!(
        TcpStream::connect(server.local_addr()).is_err() || {
            // The port may still accept for a moment; nothing answers there.
            let mut late = Client::new(&server);
            late.send("POST", ENDPOINT, &[], &initialize().to_string());
            late.read().is_none()
        }
    );
}

#[test]
fn connections_past_the_limit_are_answered_503() {
    let server = serve(HttpOptions::default().with_max_connections(2));
    let mut held: Vec<Client> = (0..2).map(|_| Client::new(&server)).collect();
    for c in &mut held {
        assert_eq!(c.post(&[], &initialize()).status, 200);
    }
    // Admission comes with the first request: the third one's is read, then refused.
    let mut third = Client::new(&server);
    let r = third.post(&[], &initialize());
    assert_eq!(
        (r.status, r.header("retry-after")),
        (503, Some("1")),
        "{r:?}"
    );
    assert!(third.closed());
    drop(held);
    let tick = Duration::from_millis(10);
    eventually(WAIT, tick, "the places never came back", || {
        let mut c = Client::new(&server);
        c.send("POST", ENDPOINT, &[], &initialize().to_string());
        c.read().is_some_and(|r| r.status == 200)
    });
}

#[test]
fn a_public_address_without_a_token_refuses_to_start() {
    let start_at = |addr: &str, token: Option<&str>| {
        let options = HttpOptions::default().with_addr(addr);
        HttpServer::start(
            Config::default(),
            options.with_token(token.map(String::from)),
        )
    };
    let t = start_at("0.0.0.0:0", None).unwrap_err().to_string();
    assert!(
        t.contains("without a token") && t.contains(TOKEN_ENV),
        "{t}"
    );
    let e = start_at("127.0.0.1:0", Some("")).unwrap_err();
    assert!(e.to_string().contains("empty"), "{e}");
    // With a token it starts, and Debug never shows the token.
    let server = start_at("0.0.0.0:0", Some("tok-123")).expect("a token allows a public address");
    assert!(!format!("{server:?}").contains("tok-123"));
    server.shutdown();
}

#[test]
fn a_request_that_asks_for_logs_gets_them_on_an_sse_stream_before_its_result() {
    let (fake, server) = on_fake(HttpOptions::default());
    fake.set_rule("Runtime.evaluate", Rule::Ignore);
    let mut c = Client::new(&server);
    let task = connect_task(&mut c);
    // Without the opt-in: one JSON body, even when a dialog opens during the call.
    for (id, meta) in [
        (2, json!({})),
        (3, json!({"io.modelcontextprotocol/logLevel": "info"})),
    ] {
        let expression = format!("alert({id})");
        let call = json!({"name": "browser_cdp", "arguments": {
            "task_id": task, "method": "Runtime.evaluate", "params": {"expression": expression},
            "timeout_s": 10}});
        send_modern(&mut c, id, "tools/call", call, meta.clone());
        let sent = fake.wait_for_command(
            |m| m["method"] == "Runtime.evaluate" && m["params"]["expression"] == expression,
            WAIT,
        );
        assert!(sent.is_some(), "the call reached the browser");
        fake.open_dialog("alert", &format!("hello {id}"), "");
        let (status, headers) = c.read_head();
        assert_eq!(status, 200);
        let events: Vec<Value> = if meta.as_object().unwrap().is_empty() {
            assert_eq!(headers["content-type"], "application/json", "{headers:?}");
            vec![serde_json::from_str(&c.body(&headers)).unwrap()]
        } else {
            assert_eq!(headers["content-type"], "text/event-stream", "{headers:?}");
            std::iter::from_fn(|| c.next_event()).collect()
        };
        let (last, before) = events.split_last().unwrap();
        assert_eq!(last["id"], id, "{events:?}");
        assert_eq!(last["result"]["resultType"], "complete", "{last}");
        if id == 3 {
            assert!(
                before
                    .iter()
                    .any(|n| n["method"] == "notifications/message"
                        && n.to_string().contains("hello 3")),
                "the dialog that opened during the call is logged first: {events:?}"
            );
        }
        assert!(before.iter().all(|n| n.get("id").is_none()), "{events:?}");
        fake.close_dialog_remotely();
        // The next call is judged against the snapshot: it must show the dialog closed (the
        // close reaches the supervisor's reader after this returns).
        let deadline = std::time::Instant::now() + WAIT;
        for n in 100.. {
            let snap = tool(
                &mut c,
                10 * n + id,
                "browser_snapshot",
                json!({"task_id": task}),
            );
            if snap["pending_dialogs"] == json!([]) {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the dialog stays open: {snap}"
            );
        }
    }
    // The connection carries on after the stream.
    let snap = tool(&mut c, 4, "browser_snapshot", json!({"task_id": task}));
    assert!(snap.get("frame_tree").is_some(), "{snap}");
}

#[test]
fn a_listen_stream_carries_its_tasks_events_until_the_client_leaves_or_the_server_ends_it() {
    let (fake, server) = on_fake(HttpOptions::default());
    let mut c = Client::new(&server);
    let task = connect_task(&mut c);
    let uri = format!("cdp-supervisor://tasks/{task}");
    let open = |id: u64| {
        let mut l = open_listen(&server, id, &task);
        let (status, headers) = l.read_head();
        assert_eq!(
            (status, headers["content-type"].as_str()),
            (200, "text/event-stream")
        );
        let ack = l.next_event().expect("the acknowledgement");
        assert_eq!(
            ack["method"], "notifications/subscriptions/acknowledged",
            "{ack}"
        );
        assert_eq!(
            ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
            id
        );
        l
    };
    let mut l = open(7);
    fake.open_dialog("confirm", "sure?", "");
    let update = l.next_event().expect("an update");
    assert_eq!(
        update["method"], "notifications/resources/updated",
        "{update}"
    );
    assert_eq!(update["params"]["uri"], uri.as_str(), "{update}");
    // The client leaves: its stream is dropped (no writes to a closed socket pile up).
    drop(l);
    let (tick, what) = (Duration::from_millis(5), "the stream outlived its client");
    eventually(WAIT, tick, what, || streams_open(server.mcp()) == 0);
    // Shutdown ends an open stream with its response and the last chunk.
    let mut l = open(8);
    server.shutdown();
    let end = l.next_event().expect("the response");
    assert_eq!(
        (end["id"].clone(), end["result"]["resultType"].clone()),
        (json!(8), json!("complete")),
        "{end}"
    );
    assert!(l.next_event().is_none(), "the stream's last chunk");
}

// ---------------------------------------------------------------------------
// Issue 28: slots, closes, framing and sessions
// ---------------------------------------------------------------------------

/// A `browser_cdp` call (it runs on a worker) as a 2026-07-28 POST, with `extra` headers, in
/// HTTP/1.`minor`.
fn worker_call(c: &mut Client, task: &str, id: u64, minor: u8, extra: &[(&str, &str)]) {
    let (body, headers) = modern(
        id,
        "tools/call",
        json!({"name": "browser_cdp", "arguments": {
            "task_id": task, "method": "Runtime.evaluate", "params": {"expression": "1"}}}),
    );
    let body = body.to_string();
    let mut req = format!(
        "POST {ENDPOINT} HTTP/1.{minor}\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n",
        c.host,
        body.len()
    );
    for (n, v) in headers
        .iter()
        .map(|(n, v)| (*n, v.as_str()))
        .chain(extra.iter().copied())
    {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(&body);
    c.stream.write_all(req.as_bytes()).unwrap();
}

#[test]
fn an_answer_that_says_close_closes_the_connection_right_after_it() {
    let (_fake, server) = on_fake(HttpOptions::default());
    let task = connect_task(&mut Client::new(&server));
    for round in 0..5 {
        // Connection: close on HTTP/1.1, and HTTP/1.0 without keep-alive: a worker writes the
        // answer, and the connection ends with it.
        for (minor, extra) in [(1, &[("Connection", "close")][..]), (0, &[][..])] {
            let mut c = Client::new(&server);
            worker_call(&mut c, &task, 10 + round, minor, extra);
            let r = c.read().expect("the answer");
            assert_eq!(r.status, 200, "{r:?}");
            assert_eq!(r.header("connection"), Some("close"), "{r:?}");
            let t = Instant::now();
            assert!(
                closes_within(&mut c.stream, Duration::from_secs(2)),
                "HTTP/1.{minor} {extra:?}: still open {:?} after the answer",
                t.elapsed()
            );
        }
    }
}

/// Sends `raw` on a fresh connection and reads the answer's status (`None`: no answer).
fn status_of(server: &HttpServer, raw: &[u8]) -> Option<u16> {
    let mut c = Client::new(server);
    let _ = c.stream.write_all(raw);
    c.read().map(|r| r.status)
}

#[test]
fn lenient_framing_and_ambiguous_heads_are_refused_with_400() {
    let server = serve(HttpOptions::default());
    let port = server.local_addr().port();
    let host = format!("127.0.0.1:{port}");
    let init = initialize().to_string();
    let n = init.len();
    let chunked = |size: &str| format!("{size}\r\n{init}\r\n0\r\n\r\n");
    let post = |headers: &str, body: &str| {
        format!("POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\n{headers}\r\n{body}")
            .into_bytes()
    };
    let h = format!("Host: {host}\r\n");
    let with_length = |headers: &str| post(&format!("{headers}Content-Length: {n}\r\n"), &init);
    let chunked_with = |headers: &str, size: String| {
        post(
            &format!("{headers}Transfer-Encoding: chunked\r\n"),
            &chunked(&size),
        )
    };
    // The well-formed forms are served, so each refusal below is the one flaw's.
    for ok in [
        with_length(&h),
        chunked_with(&h, format!("{n:x}")),
        with_length(&format!("{h}Origin: http://{host}\r\n")),
    ] {
        assert_eq!(
            status_of(&server, &ok),
            Some(200),
            "{}",
            String::from_utf8_lossy(&ok)
        );
    }
    // A Transfer-Encoding that is not UTF-8: the byte 0xff where \u{1} is written.
    let te_not_utf8 = with_length(&format!("{h}Transfer-Encoding: \u{1}chunked\r\n"))
        .into_iter()
        .map(|b| if b == 1 { 0xff } else { b })
        .collect();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "two Host lines, ours first",
            with_length(&format!("{h}Host: evil.example\r\n")),
        ),
        (
            "two Origin lines, ours first",
            with_length(&format!(
                "{h}Origin: http://{host}\r\nOrigin: http://evil.example\r\n"
            )),
        ),
        (
            "Transfer-Encoding chunked, then a second line gzip",
            post(
                &format!("{h}Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n"),
                &chunked(&format!("{n:x}")),
            ),
        ),
        (
            "a Transfer-Encoding that is not UTF-8, beside Content-Length",
            te_not_utf8,
        ),
        (
            "Content-Length: +N",
            post(&format!("{h}Content-Length: +{n}\r\n"), &init),
        ),
        ("chunk size +N", chunked_with(&h, format!("+{n:x}"))),
        (
            "chunk size with a space before it",
            chunked_with(&h, format!(" {n:x}")),
        ),
        (
            "Host port +P",
            with_length(&format!("Host: 127.0.0.1:+{port}\r\n")),
        ),
        (
            "Host port 0P",
            with_length(&format!("Host: 127.0.0.1:0{port}\r\n")),
        ),
    ];
    for (what, raw) in cases {
        assert_eq!(status_of(&server, &raw), Some(400), "{what}");
    }
}

#[test]
fn a_flood_of_initialize_requests_does_not_end_sessions_in_use() {
    let server = serve(HttpOptions::default());
    let mut a = Client::new(&server);
    let session = a
        .post(&[], &initialize())
        .header("mcp-session-id")
        .unwrap()
        .to_string();
    let list = tools_list(2);
    assert_eq!(a.post(&[("Mcp-Session-Id", &session)], &list).status, 200);
    // One client opens more sessions than the server keeps.
    let mut flood = Client::new(&server);
    let mut refused = 0;
    for _ in 0..1100 {
        let r = flood.post(&[], &initialize());
        match r.status {
            200 => {}
            503 => {
                // When the oldest session may be replaced: after 10 minutes of idleness.
                let after: u64 = r.header("retry-after").unwrap().parse().unwrap();
                assert!((1..=600).contains(&after), "{r:?}");
                refused += 1;
            }
            s => panic!("{s}: {r:?}"),
        }
    }
    assert!(refused > 0, "past the cap, new sessions are refused");
    let r = a.post(&[("Mcp-Session-Id", &session)], &list);
    assert_eq!(
        r.status, 200,
        "the session in use survived the flood: {r:?}"
    );
}

/// `n` clients that open a connection and send nothing (`partial`: the start of a head), each
/// opening a new one as soon as the server closes it, until `stop`.
fn silent_clients(
    server: &HttpServer,
    n: usize,
    partial: bool,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<usize> {
    let addr = server.local_addr();
    std::thread::spawn(move || {
        let open = || {
            let s = TcpStream::connect(addr).ok()?;
            s.set_nonblocking(true).ok()?;
            if partial {
                let _ = (&s).write_all(b"POST /mcp HTTP/1.1\r\nHo");
            }
            Some(s)
        };
        let mut conns: Vec<Option<TcpStream>> = (0..n).map(|_| open()).collect();
        let mut opened = n;
        while !stop.load(std::sync::atomic::Ordering::Acquire) {
            for slot in conns.iter_mut() {
                let closed = match slot {
                    None => true,
                    Some(s) => {
                        let mut b = [0u8; 512];
                        match s.read(&mut b) {
                            Ok(0) => true,
                            Ok(_) => false,
                            Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
                        }
                    }
                };
                if closed {
                    *slot = open();
                    opened += 1;
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        opened
    })
}

#[test]
fn connections_that_send_no_head_cannot_keep_an_authenticated_client_out() {
    // Issue 28's attack: 64 connections (as many as the server's places) that send nothing, or
    // the start of a head, each opened again as soon as the server closes it.
    let server = serve(
        HttpOptions::default()
            .with_token(Some("tok-6".into()))
            .with_header_timeout(Duration::from_millis(500)),
    );
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let silent = silent_clients(&server, 32, false, std::sync::Arc::clone(&stop));
    let partial = silent_clients(&server, 32, true, std::sync::Arc::clone(&stop));
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let mut served = 0;
    while started.elapsed() < Duration::from_secs(3) {
        let mut c = Client::new(&server);
        let r = c.post(&[("Authorization", "Bearer tok-6")], &initialize());
        assert_eq!(r.status, 200, "after {:?}: {r:?}", started.elapsed());
        served += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, std::sync::atomic::Ordering::Release);
    let opened = silent.join().unwrap() + partial.join().unwrap();
    assert!(served >= 10, "{served}");
    // The silent connections were closed at their head deadline, and opened again, all along.
    assert!(opened >= 3 * 64, "{opened}");
}

#[test]
fn past_the_new_connection_cap_the_oldest_silent_one_is_closed_for_a_new_one() {
    let server = serve(HttpOptions::default().with_max_new_connections(2));
    let mut first = Client::new(&server);
    let mut second = Client::new(&server);
    // A partial head: not the first to go while one that sent nothing is there.
    second.stream.write_all(b"POST /mcp HTTP/1.1\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    // A third, before it sends anything: it must be held, so one of the two goes at once.
    let mut third = Client::new(&server);
    assert!(
        closes_within(&mut first.stream, Duration::from_secs(1)),
        "the oldest silent one is closed"
    );
    assert_eq!(third.post(&[], &initialize()).status, 200);
    // The one with a partial head is still held (it closes at its head deadline, not now).
    second.stream.set_nonblocking(true).unwrap();
    let mut b = [0u8; 16];
    assert!(
        matches!(second.stream.read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the partial one is still open"
    );
}

#[test]
fn a_connection_that_sends_nothing_is_closed_at_the_head_deadline() {
    let server = serve(HttpOptions::default().with_header_timeout(Duration::from_millis(500)));
    let mut c = Client::new(&server);
    assert!(closes_within(&mut c.stream, Duration::from_secs(3)));
}

#[test]
fn a_refusal_past_the_limit_is_a_readable_503_not_a_reset() {
    let server = serve(HttpOptions::default().with_max_connections(1));
    let mut held = Client::new(&server);
    assert_eq!(held.post(&[], &initialize()).status, 200);
    // A request with a body large enough that the client is still sending when refused.
    let mut big = initialize();
    big["params"]["padding"] = json!("x".repeat(256 * 1024));
    let body = big.to_string();
    for i in 0..20 {
        let mut c = Client::new(&server);
        let req = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            c.host,
            body.len()
        );
        // The client writes as a client across a network does: the refusal may come first.
        let (head, rest) = req.as_bytes().split_at(req.len() / 2);
        // An HTTP client whose write fails reports a reset, whatever the server wrote.
        c.stream
            .write_all(head)
            .unwrap_or_else(|e| panic!("attempt {i}: {e}"));
        std::thread::sleep(Duration::from_millis(20));
        c.stream
            .write_all(rest)
            .unwrap_or_else(|e| panic!("attempt {i}: the request was not read: {e}"));
        let r = c
            .read()
            .unwrap_or_else(|| panic!("attempt {i}: a reset instead of 503"));
        assert_eq!(r.status, 503, "{r:?}");
        assert_eq!(r.header("retry-after"), Some("1"), "{r:?}");
    }
    drop(held);
}

#[test]
fn listen_streams_that_never_read_cannot_keep_an_authenticated_client_out() {
    let (_fake, server) = on_fake(HttpOptions::default().with_max_connections(4));
    let task = connect_task(&mut Client::new(&server));
    let streams: Vec<Client> = (0..4)
        .map(|i| {
            let mut l = open_listen(&server, 100 + i, &task);
            assert_eq!(l.read_head().0, 200);
            l
        })
        .collect();
    for id in 0..5 {
        let mut c = Client::new(&server);
        let r = post_modern(&mut c, id, "tools/list", json!({}));
        assert_eq!(r.status, 200, "{r:?}");
    }
    drop(streams);
}

#[test]
fn a_listen_stream_that_stops_reading_is_dropped_at_its_write_deadline() {
    let (fake, server) = on_fake(HttpOptions::default());
    let task = connect_task(&mut Client::new(&server));
    let mut l = open_listen(&server, 7, &task);
    assert_eq!(l.read_head().0, 200);
    // The client stops reading; the task's dialogs (16 KiB messages) fill the socket.
    let message = "m".repeat(16 * 1024);
    let open = || open_places(&server);
    let by = Instant::now() + Duration::from_secs(30);
    while open() > 0 {
        assert!(
            Instant::now() < by,
            "the stream's connection outlived its stalled writes"
        );
        fake.open_dialog("alert", &message, "");
        std::thread::sleep(Duration::from_millis(2));
        fake.close_dialog_remotely();
    }
    drop(l);
}

#[test]
fn listen_streams_past_their_own_cap_are_refused_with_503_and_a_place_frees_when_one_ends() {
    let (_fake, server) = on_fake(HttpOptions::default().with_max_listen_streams(2));
    let task = connect_task(&mut Client::new(&server));
    let open = |id: u64| {
        let mut l = open_listen(&server, id, &task);
        let (status, headers) = l.read_head();
        (l, status, headers)
    };
    let (first, s1, _) = open(1);
    let (_second, s2, _) = open(2);
    assert_eq!((s1, s2), (200, 200));
    let (_, s3, headers) = open(3);
    assert_eq!(
        (s3, headers.get("retry-after").map(String::as_str)),
        (503, Some("1"))
    );
    // The streams' connections took no connection place: requests are served meanwhile.
    let r = post_modern(&mut Client::new(&server), 4, "tools/list", json!({}));
    assert_eq!(r.status, 200, "{r:?}");
    drop(first);
    let (tick, what) = (
        Duration::from_millis(20),
        "the ended stream's place never came back",
    );
    eventually(WAIT, tick, what, || open(5).1 == 200);
}

#[test]
fn the_mcp_section_of_the_configuration_sets_the_http_limits() {
    let config = Config::from_toml(
        "[mcp]\nhttp_head_timeout_s = 2\nhttp_max_new_connections = 7\nhttp_max_listen_streams = 3",
    )
    .unwrap();
    let limits = |o: HttpOptions| {
        (
            o.header_timeout,
            o.max_new_connections,
            o.max_listen_streams,
        )
    };
    let o = HttpOptions::from_config(&config);
    assert_eq!(limits(o), (Duration::from_secs(2), 7, 3));
    assert_eq!(
        limits(HttpOptions::default()),
        (Duration::from_secs(5), 128, 16),
        "the defaults are config/default.toml's"
    );
}

//! Unit tests of the fake browser, driven by a minimal blocking CDP client.

use std::io::{Cursor, Read};

use super::script::origin_of;
use super::server::{parse_request_head, read_request_head};
use super::*;
use tungstenite::WebSocket;
use tungstenite::client::client;

/// Client read/write timeout: long enough for CI, short enough not to hang.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// A minimal blocking CDP client for the tests.
struct Client {
    ws: WebSocket<TcpStream>,
}

impl Client {
    /// Connects to the fake's WebSocket endpoint.
    fn connect(fake: &FakeBrowser) -> Client {
        let addr = SocketAddr::from(([127, 0, 0, 1], fake.shared.port));
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        stream.set_write_timeout(Some(IO_TIMEOUT)).expect("timeout");
        let (ws, _) = client(fake.ws_url(), stream).expect("handshake");
        Client { ws }
    }

    /// Sends a JSON message.
    fn send(&mut self, value: Value) {
        self.ws
            .send(Message::text(value.to_string()))
            .expect("send");
    }

    /// Sends a command, with a session when given.
    fn command(&mut self, id: u64, method: &str, params: Value, session: Option<&str>) {
        let mut cmd = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            cmd["sessionId"] = Value::from(s);
        }
        self.send(cmd);
    }

    /// Reads the next message as JSON (text messages only).
    fn recv(&mut self) -> Value {
        loop {
            match self.ws.read().expect("read") {
                Message::Text(t) => return serde_json::from_str(t.as_str()).expect("json"),
                Message::Ping(_) | Message::Pong(_) => continue,
                other => panic!("unexpected message {other:?}"),
            }
        }
    }

    /// Attaches to the default page and returns the session id.
    fn attach(&mut self, id: u64) -> String {
        self.command(
            id,
            "Target.attachToTarget",
            json!({"targetId": DEFAULT_PAGE_ID, "flatten": true}),
            None,
        );
        let event = self.recv();
        assert_eq!(event["method"], "Target.attachedToTarget");
        let reply = self.recv();
        assert_eq!(reply["id"], id);
        reply["result"]["sessionId"]
            .as_str()
            .expect("session")
            .to_string()
    }

    /// Asserts that the connection ends (close frame or EOF/reset), not a timeout.
    fn expect_closed(&mut self) {
        loop {
            match self.ws.read() {
                Ok(Message::Close(_)) => continue,
                Ok(other) => panic!("unexpected message {other:?}"),
                Err(tungstenite::Error::Io(e))
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    panic!("timed out instead of being closed")
                }
                Err(_) => return,
            }
        }
    }
}

/// Sends a raw HTTP GET and returns the whole response.
fn http_get(fake: &FakeBrowser, path: &str) -> String {
    let addr = SocketAddr::from(([127, 0, 0, 1], fake.shared.port));
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").expect("write");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    response
}

#[test]
fn attach_flow() {
    let fake = FakeBrowser::start().expect("start");
    let mut c = Client::connect(&fake);
    c.command(1, "Target.getTargets", json!({}), None);
    let reply = c.recv();
    assert_eq!(reply["id"], 1);
    let infos = reply["result"]["targetInfos"].as_array().expect("infos");
    assert_eq!(infos.len(), 1);
    assert_eq!(infos[0]["targetId"], fake.page_target_id());
    assert_eq!(infos[0]["type"], "page");

    let session = c.attach(2);
    assert_eq!(fake.page_sessions(), vec![session.clone()]);

    c.command(3, "Page.getFrameTree", json!({}), Some(&session));
    let reply = c.recv();
    assert_eq!(reply["id"], 3);
    assert_eq!(reply["sessionId"], session.as_str());
    assert_eq!(reply["result"]["frameTree"]["frame"]["id"], DEFAULT_PAGE_ID);

    c.command(4, "Runtime.enable", json!({}), Some(&session));
    let event = c.recv();
    assert_eq!(event["method"], "Runtime.executionContextCreated");
    assert_eq!(event["sessionId"], session.as_str());
    assert_eq!(
        event["params"]["context"]["auxData"]["frameId"],
        DEFAULT_PAGE_ID
    );
    assert_eq!(c.recv()["id"], 4);

    c.command(5, "Page.getFrameTree", json!({}), None);
    assert_eq!(c.recv()["error"]["code"], -32601);
    c.command(6, "Page.enable", json!({}), Some("NOPE"));
    assert_eq!(c.recv()["error"]["code"], -32001);
    c.command(7, "Nope.nothing", json!({}), None);
    let reply = c.recv();
    assert_eq!(reply["error"]["message"], "'Nope.nothing' wasn't found");
    c.command(8, "Target.attachToTarget", json!({"targetId": "X"}), None);
    assert_eq!(c.recv()["error"]["code"], -32602);

    c.command(
        9,
        "Target.createTarget",
        json!({"url": "about:blank"}),
        None,
    );
    let created = c.recv()["result"]["targetId"].clone();
    assert_eq!(created, "PAGE-2");
    c.command(10, "Target.getTargets", json!({}), None);
    assert_eq!(
        c.recv()["result"]["targetInfos"].as_array().map(Vec::len),
        Some(2)
    );
}

#[test]
fn browser_level_auto_attach_hands_over_every_page_when_asked_to() {
    let fake = FakeBrowser::start().expect("start");
    let mut c = Client::connect(&fake);
    c.command(
        1,
        "Target.createTarget",
        json!({"url": "about:blank"}),
        None,
    );
    assert_eq!(c.recv()["id"], 1);
    // Off (the default): nothing attached.
    let auto = json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true});
    c.command(2, "Target.setAutoAttach", auto.clone(), None);
    assert_eq!(c.recv()["id"], 2);

    fake.set_auto_attach_pages(true);
    c.command(3, "Target.setAutoAttach", auto, None);
    let mut attached = Vec::new();
    let reply = loop {
        let m = c.recv();
        if m["method"] == "Target.attachedToTarget" {
            assert_eq!(m["params"]["waitingForDebugger"], false);
            attached.push((
                m["params"]["sessionId"].as_str().expect("sid").to_string(),
                m["params"]["targetInfo"]["targetId"].clone(),
            ));
        } else {
            break m;
        }
    };
    assert_eq!(reply["id"], 3);
    let targets: Vec<&Value> = attached.iter().map(|(_, t)| t).collect();
    assert_eq!(targets, [DEFAULT_PAGE_ID, "PAGE-2"]);

    let (sid, target) = attached[1].clone();
    c.command(
        4,
        "Target.detachFromTarget",
        json!({"sessionId": sid}),
        None,
    );
    let event = c.recv();
    assert_eq!(event["method"], "Target.detachedFromTarget");
    assert_eq!(event["params"]["targetId"], target);
    assert_eq!(c.recv()["id"], 4);
    c.command(5, "Page.enable", json!({}), Some(&sid));
    assert_eq!(c.recv()["error"]["code"], -32001);
}

#[test]
fn dialog_flow() {
    let fake = FakeBrowser::start().expect("start");
    let mut c = Client::connect(&fake);
    let session = c.attach(1);

    fake.open_dialog("prompt", "Name?", "anon");
    assert!(fake.dialog_open());
    let opening = c.recv();
    assert_eq!(opening["method"], "Page.javascriptDialogOpening");
    assert_eq!(opening["sessionId"], session.as_str());
    assert_eq!(opening["params"]["type"], "prompt");
    assert_eq!(opening["params"]["defaultPrompt"], "anon");
    assert_eq!(opening["params"]["frameId"], DEFAULT_PAGE_ID);

    let params = json!({"accept": true, "promptText": "bob"});
    c.command(2, "Page.handleJavaScriptDialog", params, Some(&session));
    let closed = c.recv();
    assert_eq!(closed["method"], "Page.javascriptDialogClosed");
    assert_eq!(
        closed["params"],
        json!({"result": true, "userInput": "bob", "frameId": DEFAULT_PAGE_ID})
    );
    let reply = c.recv();
    assert_eq!(reply["id"], 2);
    assert_eq!(reply["result"], json!({}));
    assert!(!fake.dialog_open());

    let params = json!({"accept": true});
    c.command(3, "Page.handleJavaScriptDialog", params, Some(&session));
    let reply = c.recv();
    assert_eq!(
        reply["error"],
        json!({"code": -32602, "message": "No dialog is showing"})
    );

    fake.open_dialog("alert", "hi", "");
    assert_eq!(c.recv()["method"], "Page.javascriptDialogOpening");
    fake.close_dialog_remotely();
    let closed = c.recv();
    assert_eq!(closed["params"], json!({"result": false, "userInput": ""}));
    assert!(!fake.dialog_open());
}

#[test]
fn rules_override_answers() {
    let fake = FakeBrowser::start().expect("start");
    let mut c = Client::connect(&fake);

    fake.set_rule("Browser.getVersion", Rule::Reply(json!({"x": 1})));
    c.command(1, "Browser.getVersion", json!({}), Some("S"));
    let reply = c.recv();
    assert_eq!(reply["result"], json!({"x": 1}));
    assert_eq!(reply["sessionId"], "S");

    let error = Rule::Error {
        code: -32000,
        message: "boom".into(),
    };
    fake.set_rule("Browser.getVersion", error);
    c.command(2, "Browser.getVersion", json!({}), None);
    assert_eq!(
        c.recv()["error"],
        json!({"code": -32000, "message": "boom"})
    );

    fake.clear_rule("Browser.getVersion");
    fake.set_rule("Page.enable", Rule::Ignore);
    c.command(3, "Page.enable", json!({}), None);
    c.command(4, "Browser.getVersion", json!({}), None);
    let reply = c.recv();
    assert_eq!(reply["id"], 4);
    assert_eq!(reply["result"]["product"], PRODUCT);

    let late = Rule::Delay(
        Duration::from_millis(200),
        Box::new(Rule::Reply(json!({"late": true}))),
    );
    fake.set_rule("Custom.slow", late);
    c.command(5, "Custom.slow", json!({}), None);
    c.command(6, "Browser.getVersion", json!({}), None);
    assert_eq!(c.recv()["id"], 6);
    let reply = c.recv();
    assert_eq!(reply["id"], 5);
    assert_eq!(reply["result"], json!({"late": true}));

    fake.set_rule("Browser.close", Rule::CloseConnection);
    c.command(7, "Browser.close", json!({}), None);
    c.expect_closed();
    assert!(fake.wait_for_connections(0, IO_TIMEOUT));
    assert_eq!(fake.accepted_count(), 1);
}

#[test]
fn delayed_default_and_silent() {
    let fake = FakeBrowser::start().expect("start");
    let mut c = Client::connect(&fake);
    let delayed = Rule::Delay(Duration::from_millis(50), Box::new(Rule::Default));
    fake.set_rule("Target.attachToTarget", delayed);
    let session = c.attach(1);
    assert!(!session.is_empty());

    fake.set_silent(true);
    c.command(2, "Browser.getVersion", json!({}), None);
    assert!(
        fake.wait_for_command(|m| m["id"] == 2, IO_TIMEOUT)
            .is_some()
    );
    fake.set_silent(false);
    c.command(3, "Browser.getVersion", json!({}), None);
    assert_eq!(c.recv()["id"], 3);
}

#[test]
fn emit_events() {
    let fake = FakeBrowser::start().expect("start");
    let mut c = Client::connect(&fake);
    assert!(fake.wait_for_connections(1, IO_TIMEOUT));

    fake.emit(None, "Custom.event", json!({"a": 1}));
    assert_eq!(
        c.recv(),
        json!({"method": "Custom.event", "params": {"a": 1}})
    );
    fake.emit(Some("S-9"), "Custom.event", json!({}));
    assert_eq!(c.recv()["sessionId"], "S-9");

    // Not attached: emit_on_page sends nothing, so the next frame is a reply.
    fake.emit_on_page("Page.loadEventFired", json!({}));
    c.command(1, "Browser.getVersion", json!({}), None);
    assert_eq!(c.recv()["id"], 1);

    let session = c.attach(2);
    fake.emit_on_page("Page.loadEventFired", json!({"timestamp": 1}));
    let event = c.recv();
    assert_eq!(event["method"], "Page.loadEventFired");
    assert_eq!(event["sessionId"], session.as_str());

    fake.send_raw_text("garbage{");
    match c.ws.read().expect("read") {
        Message::Text(t) => assert_eq!(t.as_str(), "garbage{"),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn invalid_input_is_recorded_not_answered() {
    let fake = FakeBrowser::start().expect("start");
    let mut c = Client::connect(&fake);
    c.ws.send(Message::text("not json")).expect("send");
    c.ws.send(Message::binary(vec![1u8, 2, 3])).expect("send");
    c.send(json!({"method": "Page.enable"}));
    c.send(json!({"id": "x", "method": "Page.enable"}));
    c.command(1, "Browser.getVersion", json!({}), None);
    assert_eq!(c.recv()["id"], 1);
    assert_eq!(
        fake.received_invalid(),
        vec!["not json".to_string(), "<binary 3 bytes>".to_string()]
    );
    assert_eq!(fake.received().len(), 3);
    let found = fake.wait_for_command(|m| m["id"] == "x", Duration::ZERO);
    assert!(found.is_some());
    let missing = fake.wait_for_command(|m| m["id"] == 99, Duration::from_millis(50));
    assert!(missing.is_none());
}

#[test]
fn json_version_over_http() {
    let fake = FakeBrowser::start().expect("start");
    let response = http_get(&fake, "/json/version");
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let body = response.split("\r\n\r\n").nth(1).expect("body");
    let body: Value = serde_json::from_str(body).expect("json");
    assert_eq!(body["Browser"], PRODUCT);
    assert_eq!(body["webSocketDebuggerUrl"], fake.ws_url());
    assert!(http_get(&fake, "/json/list").starts_with("HTTP/1.1 404"));
    assert_eq!(fake.accepted_count(), 0);
    assert!(fake.http_url().starts_with("http://127.0.0.1:"));
}

#[test]
fn drop_connections_wakes_client() {
    let fake = FakeBrowser::start().expect("start");
    let mut a = Client::connect(&fake);
    let mut b = Client::connect(&fake);
    assert!(fake.wait_for_connections(2, IO_TIMEOUT));
    fake.drop_connections();
    a.expect_closed();
    b.expect_closed();
    assert!(fake.wait_for_connections(0, IO_TIMEOUT));
    assert_eq!(fake.accepted_count(), 2);
}

#[test]
fn stop_reading_blocks_client_writes() {
    let fake = FakeBrowser::start().expect("start");
    let mut c = Client::connect(&fake);
    // Make sure the reader is live before stopping it.
    c.command(1, "Browser.getVersion", json!({}), None);
    assert_eq!(c.recv()["id"], 1);
    fake.set_stop_reading(true);
    c.ws.get_mut()
        .set_write_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let chunk = vec![0u8; 256 * 1024];
    let mut written = 0usize;
    let mut blocked = false;
    // Loopback socket buffers absorb roughly 5-6 MB before writes block.
    while written < 32 << 20 {
        match c.ws.send(Message::binary(chunk.clone())) {
            Ok(()) => written += chunk.len(),
            Err(_) => {
                blocked = true;
                break;
            }
        }
    }
    assert!(blocked, "client wrote {written} bytes without blocking");
    let started = Instant::now();
    drop(fake);
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[test]
fn drop_is_fast_and_joins_threads() {
    let fake = FakeBrowser::start().expect("start");
    let mut a = Client::connect(&fake);
    let _session = a.attach(1);
    let mut b = Client::connect(&fake);
    let addr = SocketAddr::from(([127, 0, 0, 1], fake.shared.port));
    let _idle = TcpStream::connect(addr).expect("connect");
    let slow = Rule::Delay(Duration::from_secs(30), Box::new(Rule::Default));
    fake.set_rule("Page.enable", slow);
    a.command(2, "Page.enable", json!({}), None);
    assert!(
        fake.wait_for_command(|m| m["id"] == 2, IO_TIMEOUT)
            .is_some()
    );
    assert!(fake.wait_for_connections(2, IO_TIMEOUT));

    let shared = Arc::downgrade(&fake.shared);
    let started = Instant::now();
    drop(fake);
    assert!(started.elapsed() < Duration::from_secs(1));
    // Every thread held an Arc<Shared>; all of them are gone.
    assert!(shared.upgrade().is_none());
    a.expect_closed();
    b.expect_closed();
}

#[test]
fn request_head_parsing() {
    let head = b"GET /devtools/browser/x?y=1 HTTP/1.1\r\nUpgrade: WebSocket\r\n\r\n";
    let parsed = parse_request_head(head);
    assert_eq!(parsed.method, "GET");
    assert_eq!(parsed.path, "/devtools/browser/x");
    assert!(parsed.websocket_upgrade);
    let mut reader = Cursor::new(b"GET / HTTP/1.1\r\nHost: x".to_vec());
    assert!(read_request_head(&mut reader).is_err());
    assert_eq!(origin_of("https://a.b/c"), "https://a.b");
    assert_eq!(origin_of("about:blank"), "://");
}

//! The supervisor page over raw HTTP/1.1, on the fake browser: what it serves and with which
//! policy, the token (header, one-time login, cookie), the access rules on answers (a
//! cross-site POST cannot answer), the event stream (full state, then changes, then the end),
//! and a viewer that stops reading dropped without delaying the others.

use std::collections::HashMap;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::*;
use crate::fake::FakeBrowser;

/// Reads events of `c`'s stream until `pick` finds what it wants in one (within `WAIT`).
fn event_where(c: &mut Client, what: &str, pick: impl Fn(&Value) -> bool) -> Value {
    let by = Instant::now() + WAIT;
    loop {
        assert!(Instant::now() < by, "no event with {what}");
        let e = c.next_event().expect("the stream goes on");
        if pick(&e) {
            return e;
        }
    }
}

/// The view of `task` in an event, if the event carries it.
fn task_in<'a>(event: &'a Value, task: &str) -> Option<&'a Value> {
    event["tasks"]
        .as_array()?
        .iter()
        .find(|t| t["task_id"] == task)
}

/// Opens the page's event stream on a fresh connection (`headers` added).
fn events(server: &HttpServer, headers: &[(&str, &str)]) -> Client {
    let mut c = Client::new(server);
    c.send("GET", "/events", headers, "");
    let (status, h) = c.read_head();
    assert_eq!(status, 200);
    assert_eq!(h["content-type"], "text/event-stream");
    c
}

/// A POST of the page (JSON) with `headers`.
fn page_post(c: &mut Client, path: &str, headers: &[(&str, &str)], body: &Value) -> Reply {
    c.send("POST", path, headers, &body.to_string());
    c.read().expect("an answer")
}

#[test]
fn the_page_is_served_from_the_binary_under_a_policy_that_runs_no_inline_script() {
    let server = start(Config::default(), HttpOptions::default());
    let mut c = Client::new(&server);
    let mut bodies = HashMap::new();
    for (path, kind) in [
        ("/", "text/html; charset=utf-8"),
        ("/page.js", "text/javascript; charset=utf-8"),
        ("/page.css", "text/css; charset=utf-8"),
    ] {
        c.send("GET", path, &[], "");
        let r = c.read().unwrap();
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.header("content-type"), Some(kind), "{path}");
        let csp = r.header("content-security-policy").unwrap();
        assert!(
            csp.contains("script-src 'self'") && !csp.contains("unsafe"),
            "{csp}"
        );
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
        // No CDN: nothing loads from another origin.
        assert!(
            !r.body.contains("https://") && !r.body.contains("//cdn"),
            "{path}"
        );
        bodies.insert(path, r.body);
    }
    // Nothing from the page is inserted as HTML: the script never parses markup.
    for sink in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
    ] {
        assert!(!bodies["/page.js"].contains(sink), "page.js uses {sink}");
    }
    assert!(!bodies["/"].contains("<script>"), "no inline script");
    c.send("GET", "/nothing-here", &[], "");
    assert_eq!(c.read().unwrap().status, 404);
    c.send("DELETE", "/", &[], "");
    assert_eq!(c.read().unwrap().status, 405);
}

#[test]
fn with_a_token_viewing_and_posting_need_it_and_the_login_moves_it_into_a_cookie() {
    let token = "s3cret-page-token";
    let server = start(
        Config::default(),
        HttpOptions::default().with_token(Some(token.into())),
    );
    let get = |path: &str, headers: &[(&str, &str)]| {
        let mut c = Client::new(&server);
        c.send("GET", path, headers, "");
        c.read().unwrap()
    };
    let r = get("/", &[]);
    assert_eq!(r.status, 401);
    assert!(
        r.body.contains("/?token=") && !r.body.contains(token),
        "{r:?}"
    );
    assert_eq!(get("/events", &[]).status, 401);
    assert_eq!(get("/?token=wrong", &[]).status, 401);
    assert_eq!(
        get("/", &[("Authorization", &format!("Bearer {token}"))]).status,
        200
    );

    let login = get(&format!("/?token={token}"), &[]);
    assert_eq!(login.status, 303, "{login:?}");
    assert_eq!(login.header("location"), Some("/"));
    let cookie = login.header("set-cookie").unwrap();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    assert!(
        !cookie.contains(token),
        "the cookie holds a digest, not the token"
    );
    let pair = cookie.split(';').next().unwrap().to_string();
    assert!(pair.starts_with("cdp_supervisor_token="), "{pair}");
    // Percent-encoded, the same token logs in too.
    let encoded = token.replace('-', "%2D");
    assert_eq!(get(&format!("/?token={encoded}"), &[]).status, 303);

    let r = get("/", &[("Cookie", &format!("other=1; {pair}"))]);
    assert_eq!(r.status, 200);
    assert!(r.body.contains("<main"));
    assert_eq!(get("/page.js", &[("Cookie", &pair)]).status, 200);
    let mut c = Client::new(&server);
    c.send("GET", "/events", &[("Cookie", &pair)], "");
    assert_eq!(c.read_head().0, 200);
    // A cookie with anything else in it is a wrong token.
    let bad = format!("cdp_supervisor_token={}", "0".repeat(64));
    assert_eq!(get("/", &[("Cookie", &bad)]).status, 401);
    assert_eq!(
        get("/", &[("Cookie", "cdp_supervisor_token=x")]).status,
        401
    );
    // Posting needs it too; and the cookie never authorizes /mcp.
    let mut c = Client::new(&server);
    let r = page_post(&mut c, "/api/answer", &[], &json!({}));
    assert_eq!(r.status, 401);
    let r = Client::new(&server).post(&[("Cookie", &pair)], &initialize());
    assert_eq!(r.status, 401, "{r:?}");
    // The query token counts only as the login (GET /).
    assert_eq!(get(&format!("/events?token={token}"), &[]).status, 401);
}

#[test]
fn a_cross_site_post_cannot_answer_and_the_page_s_own_post_does() {
    let fake = FakeBrowser::start().unwrap();
    let server = start(Config::default(), HttpOptions::default());
    let reg = server.mcp().registry();
    let sup = reg.get_or_start("page-t1", &fake.ws_url()).unwrap();
    fake.open_dialog("prompt", "Your name?", "anon");
    let dialog = sup.wait_for_dialog(WAIT).expect("the dialog is pending");
    let port = server.local_addr().port();
    let own = format!("http://127.0.0.1:{port}");
    let body = json!({"task_id": "page-t1", "dialog_id": dialog.id, "action": "accept",
                      "prompt_text": "from a person"});

    for origin in ["http://evil.example", "null", "http://127.0.0.1:1"] {
        let r = page_post(
            &mut Client::new(&server),
            "/api/answer",
            &[("Origin", origin)],
            &body,
        );
        assert_eq!(r.status, 403, "{origin}: {r:?}");
    }
    // A form (the only cross-site POST without a preflight) is not JSON: 415 even from here.
    let mut raw = TcpStream::connect(server.local_addr()).unwrap();
    let form = "task_id=page-t1&action=accept";
    let req = format!(
        "POST /api/answer HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: \
         application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{form}",
        form.len()
    );
    std::io::Write::write_all(&mut raw, req.as_bytes()).unwrap();
    let mut answer = String::new();
    let _ = std::io::Read::read_to_string(&mut raw, &mut answer);
    assert!(answer.starts_with("HTTP/1.1 415"), "{answer}");
    assert!(fake.dialog_open(), "nothing answered the dialog");
    assert_eq!(sup.snapshot().pending_dialogs.len(), 1);

    let mut c = Client::new(&server);
    let r = page_post(
        &mut c,
        "/api/answer",
        &[("Origin", &own)],
        &json!({"task_id": "page-t1"}),
    );
    assert_eq!(r.status, 400, "{r:?}");
    let r = page_post(&mut c, "/api/answer", &[("Origin", &own)], &body);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["ok"], true);
    let snap = sup
        .wait_for(WAIT, |s| s.closed_dialog(&dialog.id).is_some())
        .expect("the dialog closed");
    let closed = snap.closed_dialog(&dialog.id).unwrap();
    assert_eq!(closed.user_input.as_deref(), Some("from a person"));
    assert_eq!(closed.closed_by.as_str(), "human");
    // Answering it again says why not.
    let r = page_post(&mut c, "/api/answer", &[("Origin", &own)], &body);
    assert_eq!(r.status, 409, "{r:?}");
    assert!(
        r.json()["error"].as_str().unwrap().contains("closed"),
        "{r:?}"
    );
}

#[test]
fn the_event_stream_starts_with_every_task_then_carries_each_change_and_the_end() {
    let fake = FakeBrowser::start().unwrap();
    let server = start(Config::default(), HttpOptions::default());
    let reg = server.mcp().registry();
    reg.get_or_start("page-a", &fake.ws_url()).unwrap();
    let mut c = events(&server, &[]);
    let first = c.next_event().unwrap();
    assert_eq!(first["reset"], true, "{first}");
    let a = task_in(&first, "page-a").expect("the task is in the full state");
    assert_eq!(a["state"], "active");
    assert_eq!(a["pending"], json!([]));

    let message = "<img src=x onerror=alert(1)>";
    fake.open_dialog("confirm", message, "");
    let e = event_where(&mut c, "the pending dialog", |e| {
        task_in(e, "page-a").is_some_and(|t| t["pending"].as_array().is_some_and(|p| !p.is_empty()))
    });
    let d = &task_in(&e, "page-a").unwrap()["pending"][0];
    assert_eq!(d["kind"], "confirm");
    assert_eq!(d["message"], message, "sent as data, unchanged");
    assert!(d["watchdog_at"].as_f64().unwrap() > d["opened_at"].as_f64().unwrap());

    reg.get_or_start("page-b", &fake.ws_url()).unwrap();
    event_where(&mut c, "the new task", |e| task_in(e, "page-b").is_some());
    reg.stop("page-a");
    event_where(&mut c, "the stopped task gone", |e| {
        e["gone"]
            .as_array()
            .is_some_and(|g| g.contains(&json!("page-a")))
    });
    // Shutdown ends the stream.
    server.shutdown();
    assert!(closes_within(&mut c.stream, Duration::from_secs(2)));
}

#[test]
fn a_viewer_that_stops_reading_is_dropped_and_the_others_keep_up() {
    let fake = FakeBrowser::start().unwrap();
    let server = start(Config::default(), HttpOptions::default());
    let reg = server.mcp().registry();
    let sup = reg.get_or_start("page-flood", &fake.ws_url()).unwrap();
    let stalled = events(&server, &[]);
    let mut reader = events(&server, &[]);
    reader.next_event().unwrap();
    let open = || server.shared.places.open();
    assert_eq!(open(), 2);
    // Large console errors change the task's view with every publish; the stalled viewer's
    // socket and queue fill, the reader reads on.
    let text = "e".repeat(900);
    let by = Instant::now() + Duration::from_secs(30);
    let mut n = 0u64;
    while open() > 1 {
        assert!(Instant::now() < by, "the stalled viewer was never dropped");
        n += 1;
        let before = sup.snapshot().version;
        fake.emit_on_page(
            "Runtime.exceptionThrown",
            json!({"timestamp": 0, "exceptionDetails": {"exceptionId": n, "text": format!("{n} {text}"),
                   "lineNumber": 0, "columnNumber": 0}}),
        );
        // The reader sees this very publish before the next one is made.
        let v = sup.wait_for(WAIT, |s| s.version > before).unwrap().version;
        event_where(&mut reader, "the latest version", |e| {
            task_in(e, "page-flood").is_some_and(|t| t["version"].as_u64() >= Some(v))
        });
    }
    assert!(!sup.snapshot().console_errors.is_empty());
    drop(stalled);
    // Still live for the one that reads.
    fake.open_dialog("alert", "still here", "");
    event_where(&mut reader, "the dialog", |e| {
        task_in(e, "page-flood").is_some_and(|t| t["pending"][0]["message"] == "still here")
    });
}

#[test]
fn a_watch_server_serves_the_page_and_no_mcp_endpoint() {
    let server = start(
        Config::default(),
        HttpOptions::default().with_mcp_endpoint(false),
    );
    let r = Client::new(&server).post(&[], &initialize());
    assert_eq!(r.status, 404, "{r:?}");
    let mut c = Client::new(&server);
    c.send("GET", "/", &[], "");
    assert_eq!(c.read().unwrap().status, 200);
}

#[test]
fn the_login_token_is_read_from_the_query_percent_decoded() {
    use super::access::{cookie, login_token};
    assert_eq!(login_token("/?token=abc").as_deref(), Some(&b"abc"[..]));
    assert_eq!(
        login_token("/?x=1&token=a%2Fb#f").as_deref(),
        Some(&b"a/b"[..])
    );
    assert_eq!(login_token("/?token="), None);
    assert_eq!(login_token("/"), None);
    assert_eq!(login_token("/?token=%zz").as_deref(), Some(&b"%zz"[..]));
    assert_eq!(cookie("a=1; b=2", "b"), Some("2"));
    assert_eq!(cookie("a=1", "b"), None);
}

#[test]
fn a_person_takes_a_task_over_and_back_from_the_page_and_the_stream_shows_the_hold() {
    let fake = FakeBrowser::start().unwrap();
    let server = start(Config::default(), HttpOptions::default());
    let sup = server
        .mcp()
        .registry()
        .get_or_start("page-hold", &fake.ws_url())
        .unwrap();
    let mut stream = events(&server, &[]);
    let first = stream.next_event().unwrap();
    assert_eq!(
        task_in(&first, "page-hold").unwrap()["held_since"],
        Value::Null
    );
    let mut c = Client::new(&server);
    let r = page_post(
        &mut c,
        "/api/hold",
        &[],
        &json!({"task_id": "page-hold", "hold": true}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert!(sup.is_held());
    let e = event_where(&mut stream, "the hold", |e| {
        task_in(e, "page-hold").is_some_and(|t| t["held_since"].is_f64())
    });
    assert_eq!(task_in(&e, "page-hold").unwrap()["holds"], 1);
    // While held, a dialog has no watchdog time.
    fake.open_dialog("confirm", "Held?", "");
    let e = event_where(&mut stream, "the held dialog", |e| {
        task_in(e, "page-hold")
            .is_some_and(|t| t["pending"].as_array().is_some_and(|p| !p.is_empty()))
    });
    assert_eq!(
        task_in(&e, "page-hold").unwrap()["pending"][0]["watchdog_at"],
        Value::Null
    );
    let r = page_post(
        &mut c,
        "/api/hold",
        &[],
        &json!({"task_id": "page-hold", "hold": false}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert!(!sup.is_held());
    event_where(&mut stream, "the end of the hold", |e| {
        task_in(e, "page-hold").is_some_and(|t| t["held_since"].is_null() && t["holds"] == 1)
    });
    let r = page_post(&mut c, "/api/hold", &[], &json!({"task_id": "page-hold"}));
    assert_eq!(r.status, 400, "{r:?}");
    // A thumbnail while the dialog is open: none, and why.
    let r = page_post(
        &mut c,
        "/api/thumbnail",
        &[],
        &json!({"task_id": "page-hold"}),
    );
    assert_eq!(r.status, 409, "{r:?}");
    assert!(
        r.json()["error"].as_str().unwrap().contains("dialog"),
        "{r:?}"
    );
}

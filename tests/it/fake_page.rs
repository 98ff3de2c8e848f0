//! The supervisor page (`crate::page`) as the HTTP server in this process serves it, over raw
//! HTTP/1.1, on the fake browser: what it serves and with which policy, the token (header,
//! one-time login, cookie), the access rules on answers (a cross-site POST cannot answer), the
//! event stream (full state, then changes, then the end), and a viewer that stops reading
//! dropped without delaying the others.

use std::collections::HashMap;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use cdp_supervisor::fake::FakeBrowser;
use cdp_supervisor::mcp::http::{HttpOptions, HttpServer};
use cdp_supervisor::unversioned::mcp::open_places;
use cdp_supervisor::{Config, DialogAction};
use serde_json::{Value, json};

use crate::common::raw_http::{Client, Reply, WAIT, closes_within, initialize, start};

/// What a page holds of every task, from the events of its stream (as `page.js` takes them
/// in: a list as new items and the indexes of the items held).
#[derive(Default)]
struct Seen {
    tasks: HashMap<String, serde_json::Map<String, Value>>,
}

impl Seen {
    /// Takes in one event.
    fn take(&mut self, event: &Value) {
        if event["reset"] == true {
            self.tasks.clear();
        }
        for t in event["tasks"].as_array().expect("tasks") {
            let id = t["task_id"].as_str().expect("task_id").to_string();
            let held = self.tasks.entry(id).or_default();
            for (k, v) in t.as_object().unwrap() {
                let value = match (held.get(k), v) {
                    (Some(Value::Array(was)), Value::Array(items)) => Value::Array(
                        items
                            .iter()
                            .map(|i| match i.as_u64() {
                                Some(n) => was[n as usize].clone(),
                                None => i.clone(),
                            })
                            .collect(),
                    ),
                    _ => v.clone(),
                };
                held.insert(k.clone(), value);
            }
        }
        for gone in event["gone"].as_array().into_iter().flatten() {
            self.tasks.remove(gone.as_str().unwrap());
        }
    }

    /// Task `id` as the page holds it (`Null`: not there).
    fn task(&self, id: &str) -> Value {
        self.tasks
            .get(id)
            .map_or(Value::Null, |m| Value::Object(m.clone()))
    }

    /// Reads `c`'s events until `pick` holds of what the page holds (within `WAIT`); the event
    /// that made it so.
    fn until(&mut self, c: &mut Client, what: &str, pick: impl Fn(&Seen) -> bool) -> Value {
        let by = Instant::now() + WAIT;
        loop {
            assert!(Instant::now() < by, "no event with {what}");
            let e = c.next_event().expect("the stream goes on");
            self.take(&e);
            if pick(self) {
                return e;
            }
        }
    }
}

/// The entry of `task` in an event, if the event carries it.
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
    let sup = reg.get_or_start("page-a", &fake.ws_url()).unwrap();
    let mut c = events(&server, &[]);
    let mut seen = Seen::default();
    let first = c.next_event().unwrap();
    seen.take(&first);
    assert_eq!(first["reset"], true, "{first}");
    let a = task_in(&first, "page-a").expect("the task is in the full state");
    assert_eq!(a["state"], "active");
    assert_eq!(a["pending"], json!([]));
    assert!(
        a["cdp_url"].is_string() && a["frames"].is_array(),
        "in full: {a}"
    );

    // Only the fields that changed, with the task and its version.
    let message = "<img src=x onerror=alert(1)>";
    fake.open_dialog("confirm", message, "");
    let e = seen.until(&mut c, "the pending dialog", |s| {
        s.task("page-a")["pending"]
            .as_array()
            .is_some_and(|p| !p.is_empty())
    });
    let change = task_in(&e, "page-a").unwrap();
    assert!(change["version"].is_u64(), "{change}");
    for unchanged in ["state", "cdp_url", "frames", "policy", "recent", "console"] {
        assert!(
            change.get(unchanged).is_none(),
            "{unchanged} was sent: {change}"
        );
    }
    let d = &change["pending"][0];
    assert_eq!(d["kind"], "confirm");
    assert_eq!(d["message"], message, "sent as data, unchanged");
    assert!(d["watchdog_at"].as_f64().unwrap() > d["opened_at"].as_f64().unwrap());

    // A list goes as its new items and the indexes of the items the page has.
    sup.respond_to_dialog(DialogAction::Accept, None, None)
        .unwrap();
    seen.until(&mut c, "the first dialog closed", |s| {
        s.task("page-a")["recent"]
            .as_array()
            .is_some_and(|r| r.len() == 1)
    });
    fake.open_dialog("alert", "second", "");
    sup.wait_for_dialog(WAIT)
        .expect("the second dialog is pending");
    sup.respond_to_dialog(DialogAction::Dismiss, None, None)
        .unwrap();
    let e = seen.until(&mut c, "the second dialog closed", |s| {
        s.task("page-a")["recent"]
            .as_array()
            .is_some_and(|r| r.len() == 2)
    });
    let recent = &task_in(&e, "page-a").unwrap()["recent"];
    assert_eq!(recent[0]["message"], "second", "{recent}");
    assert_eq!(
        recent[1],
        json!(0),
        "the one the page has, by index: {recent}"
    );
    assert_eq!(recent.as_array().unwrap().len(), 2);
    let held = seen.task("page-a");
    assert_eq!(held["recent"][1]["message"], message);
    assert_eq!(held["pending"], json!([]));

    reg.get_or_start("page-b", &fake.ws_url()).unwrap();
    let e = seen.until(&mut c, "the new task", |s| !s.task("page-b").is_null());
    assert!(
        task_in(&e, "page-b").unwrap()["cdp_url"].is_string(),
        "a new task goes in full"
    );
    reg.stop("page-a");
    seen.until(&mut c, "the stopped task gone", |s| {
        s.task("page-a").is_null()
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
    // Every task is on the fake's one page: each exception is news of every task.
    let sups: Vec<_> = (0..40)
        .map(|i| {
            reg.get_or_start(&format!("page-flood-{i:02}"), &fake.ws_url())
                .unwrap()
        })
        .collect();
    let stalled = events(&server, &[]);
    let mut reader = events(&server, &[]);
    let mut seen = Seen::default();
    seen.take(&reader.next_event().unwrap());
    let open = || open_places(&server);
    assert_eq!(open(), 2);
    // Rounds of twelve large console errors (every shown one new) change every task's view;
    // the stalled viewer's socket and queue fill, the reader reads on.
    let text = "e".repeat(900);
    let by = Instant::now() + Duration::from_secs(60);
    let mut n = 0u64;
    while open() > 1 {
        assert!(Instant::now() < by, "the stalled viewer was never dropped");
        for _ in 0..12 {
            n += 1;
            fake.emit_on_page(
                "Runtime.exceptionThrown",
                json!({"timestamp": 0, "exceptionDetails": {"exceptionId": n, "text": format!("{n} {text}"),
                       "lineNumber": 0, "columnNumber": 0}}),
            );
        }
        // The reader sees this round before the next one is made.
        let newest = format!("{n} ");
        for sup in [&sups[0], &sups[39]] {
            sup.wait_for(WAIT, |s| {
                s.console_errors.len() >= 12
                    && s.console_errors
                        .last()
                        .is_some_and(|c| c.text.starts_with(&newest))
            })
            .expect("the round is published");
        }
        seen.until(&mut reader, "the latest round", |s| {
            ["page-flood-00", "page-flood-39"].iter().all(|t| {
                s.task(t)["console"][0]["text"]
                    .as_str()
                    .is_some_and(|x| x.starts_with(&newest))
            })
        });
    }
    drop(stalled);
    // Still live for the one that reads.
    fake.open_dialog("alert", "still here", "");
    seen.until(&mut reader, "the dialog", |s| {
        s.task("page-flood-07")["pending"][0]["message"] == "still here"
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
fn a_person_takes_a_task_over_and_back_from_the_page_and_the_stream_shows_the_hold() {
    let fake = FakeBrowser::start().unwrap();
    let server = start(Config::default(), HttpOptions::default());
    let sup = server
        .mcp()
        .registry()
        .get_or_start("page-hold", &fake.ws_url())
        .unwrap();
    let mut stream = events(&server, &[]);
    let mut seen = Seen::default();
    seen.take(&stream.next_event().unwrap());
    assert_eq!(seen.task("page-hold")["held_since"], Value::Null);
    let mut c = Client::new(&server);
    let r = page_post(
        &mut c,
        "/api/hold",
        &[],
        &json!({"task_id": "page-hold", "hold": true}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert!(sup.is_held());
    seen.until(&mut stream, "the hold", |s| {
        s.task("page-hold")["held_since"].is_f64()
    });
    assert_eq!(seen.task("page-hold")["holds"], 1);
    // While held, a dialog has no watchdog time.
    fake.open_dialog("confirm", "Held?", "");
    seen.until(&mut stream, "the held dialog", |s| {
        s.task("page-hold")["pending"]
            .as_array()
            .is_some_and(|p| !p.is_empty())
    });
    assert_eq!(
        seen.task("page-hold")["pending"][0]["watchdog_at"],
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
    seen.until(&mut stream, "the end of the hold", |s| {
        let t = s.task("page-hold");
        t["held_since"].is_null() && t["holds"] == 1
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

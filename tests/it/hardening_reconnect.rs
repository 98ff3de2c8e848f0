//! State around a reconnect (issue 12, findings 8 and 16; SPEC §3, §5, §10): no dialog leaves
//! `pending_dialogs` without a record, the snapshot says `reconnecting` (attempt n of m) while
//! the supervisor reconnects, a raw HTTP response written into the WebSocket (Browserless's 408)
//! is reported as such, and a reconnect never adopts another browser's page.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cdp_supervisor::fake::FakeBrowser;
use cdp_supervisor::{Config, Supervisor, SupervisorRegistry, tools};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(10);

fn start(fake: &FakeBrowser, cfg: Config) -> (SupervisorRegistry, Arc<Supervisor>) {
    let reg = SupervisorRegistry::new(cfg);
    let sup = reg.get_or_start("task", &fake.ws_url()).expect("attach");
    (reg, sup)
}

fn config(attempts: u32, backoff: Duration) -> Config {
    Config::default()
        .with_reconnect_attempts(attempts)
        .unwrap()
        .with_reconnect_backoff(backoff)
}

/// Waits for a snapshot whose JSON satisfies `pred`; panics with the last one otherwise.
fn wait_json(sup: &Supervisor, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    sup.wait_for(WAIT, |s| pred(&s.to_json()))
        .map(|s| s.to_json())
        .unwrap_or_else(|| {
            panic!(
                "timed out waiting for {what}; last: {}",
                sup.snapshot().to_json()
            )
        })
}

fn recent_entry<'a>(snap: &'a Value, id: &str) -> Option<&'a Value> {
    snap["recent_dialogs"]
        .as_array()?
        .iter()
        .find(|d| d["id"] == id)
}

#[test]
fn dialog_open_when_the_connection_drops_is_recorded_as_connection_lost() {
    let fake = FakeBrowser::start().unwrap();
    let (_reg, sup) = start(&fake, config(5, Duration::from_millis(250)));
    fake.open_dialog("confirm", "Leave the page?", "");
    sup.wait_for_dialog(WAIT).expect("dialog seen");

    fake.drop_connections();
    let down = wait_json(&sup, "d-1 in recent_dialogs", |j| {
        recent_entry(j, "d-1").is_some()
    });
    let d1 = recent_entry(&down, "d-1").unwrap();
    assert_eq!(d1["closed_by"], "connection_lost", "{down}");
    assert_eq!(d1["message"], "Leave the page?");
    assert_eq!(down["pending_dialogs"], json!([]), "{down}");
    assert_eq!(down["state"], "reconnecting", "{down}");

    let up = wait_json(&sup, "active again", |j| j["state"] == "active");
    assert_eq!(
        recent_entry(&up, "d-1").map(|d| d["closed_by"].clone()),
        Some(json!("connection_lost")),
        "the record survives the reconnect: {up}"
    );
}

#[test]
fn snapshot_while_reconnecting_says_attempt_1_of_n_then_active_again() {
    let fake = FakeBrowser::start().unwrap();
    let (reg, sup) = start(&fake, config(4, Duration::from_millis(250)));
    assert_eq!(sup.snapshot().to_json()["state"], "active");
    let page = sup.snapshot().page_target_id.clone();

    fake.drop_connections();
    // The first attempt waits out its 250 ms back-off: plenty of time to look.
    let down = wait_json(&sup, "reconnecting", |j| j["state"] == "reconnecting");
    assert_eq!(down["attempt"], 1, "{down}");
    assert_eq!(down["of"], 4, "{down}");
    assert!(
        down["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "says why the connection dropped: {down}"
    );
    assert_eq!(down["page_target_id"], json!(page), "{down}");
    let tool = tools::browser_snapshot(&reg, "task", &json!({}));
    assert_eq!(
        tool["state"], "reconnecting",
        "the tool, not 'no supervisor': {tool}"
    );
    assert_eq!(tool["attempt"], 1, "{tool}");
    assert_eq!(tool["of"], 4, "{tool}");

    let up = wait_json(&sup, "active again", |j| j["state"] == "active");
    assert!(up.get("attempt").is_none(), "{up}");
    assert!(up.get("reason").is_none(), "{up}");
    let s = sup.snapshot();
    assert!(s.is_active() && s.page_session_id.is_some());
    assert_eq!(s.page_target_id, page, "the same page");
    assert_eq!(
        tools::browser_snapshot(&reg, "task", &json!({}))["state"],
        "active"
    );

    assert!(reg.stop("task"));
    let end = sup.snapshot().to_json();
    assert_eq!(end["state"], "stopped", "{end}");
}

#[test]
fn attempts_count_up_while_the_endpoint_is_gone_then_the_supervisor_is_dead() {
    let fake = FakeBrowser::start().unwrap();
    let (_reg, sup) = start(&fake, config(3, Duration::from_millis(20)));
    let watcher = record_snapshots(&sup);
    drop(fake); // every attempt is refused
    sup.wait_for(WAIT, |_| !sup.is_alive())
        .expect("the supervisor ends");
    let seen = watcher.join().unwrap();
    let end = sup.snapshot().to_json();
    let mut attempts: Vec<u64> = seen
        .iter()
        .filter(|j| j["state"] == "reconnecting")
        .map(|j| {
            assert_eq!(j["of"], 3, "{j}");
            j["attempt"].as_u64().unwrap()
        })
        .collect();
    attempts.dedup();
    assert_eq!(
        attempts,
        vec![1, 2, 3],
        "attempts seen in order; end: {end}"
    );
    assert_eq!(end["state"], "dead", "{end}");
    let reason = end["reason"].as_str().unwrap_or("");
    assert!(
        reason.contains("gave up after 3 reconnect attempts"),
        "{end}"
    );
}

/// Records the snapshots of `sup` as they are published, until it ends (a waiter may miss one
/// that was superseded at once).
fn record_snapshots(sup: &Arc<Supervisor>) -> std::thread::JoinHandle<Vec<Value>> {
    let sup = Arc::clone(sup);
    let mut v = sup.snapshot().version;
    std::thread::spawn(move || {
        let mut seen: Vec<Value> = Vec::new();
        let deadline = Instant::now()
            .checked_add(WAIT)
            .expect("a deadline within range");
        while Instant::now() < deadline {
            let Some(s) = sup.wait_for(WAIT, |s| s.version != v) else {
                break;
            };
            v = s.version;
            seen.push(s.to_json());
            if !sup.is_alive() && sup.snapshot().version == v {
                break;
            }
        }
        seen
    })
}

/// What Browserless writes into the WebSocket at its session time-out, then closes: the bare
/// status line, and the full response with headers and a body (which tungstenite reads as a
/// frame with reserved bits set).
const HTTP_408_SHORT: &[u8] = b"HTTP/1.1 408 Request Timeout\r\n\r\n";
const HTTP_408_FULL: &[u8] = b"HTTP/1.1 408 Request Timeout\r\nContent-Type: text/plain; \
charset=utf-8\r\nContent-Length: 64\r\nConnection: close\r\n\r\nThe session timed out after \
30000ms and was closed by the server...";

fn session_timeout_is_reported_and_the_new_browser_is_not_adopted(http: &[u8]) {
    let fake = FakeBrowser::start().unwrap();
    let (_reg, sup) = start(&fake, config(5, Duration::from_millis(20)));
    let page = sup.snapshot().page_target_id.clone().expect("attached");
    fake.set_new_browser_per_connection(true);

    let watcher = record_snapshots(&sup);
    fake.send_raw_bytes(http);
    fake.drop_connections();
    sup.wait_for(WAIT, |_| !sup.is_alive())
        .expect("the supervisor ends");
    let seen = watcher.join().unwrap();
    let end = sup.snapshot().to_json();

    let dropped = seen
        .iter()
        .find_map(|j| j["reason"].as_str().map(str::to_string))
        .unwrap_or_default();
    assert!(
        dropped.contains("the server ended the session: 408 Request Timeout"),
        "the drop is reported as the server's 408: {dropped:?}"
    );
    eprintln!("dropped: {dropped}\nended: {}", end["reason"]);
    assert_eq!(end["state"], "dead", "{end}");
    let reason = end["reason"].as_str().unwrap_or("");
    assert!(
        reason.contains("new browser") && reason.contains("page") && reason.contains("gone"),
        "says the endpoint gave a new browser and the page is gone: {reason:?}"
    );
    assert!(reason.contains(&page), "names the page: {reason:?}");
    for j in seen.iter().chain([&end]) {
        assert_eq!(
            j["page_target_id"],
            json!(page),
            "page_target_id never changes: {j}"
        );
    }
    let foreign: Vec<Value> = fake
        .received()
        .into_iter()
        .filter(|c| c["method"] == "Target.attachToTarget" && c["params"]["targetId"] != page)
        .collect();
    assert!(
        foreign.is_empty(),
        "never attached to another page: {foreign:?}"
    );
    assert_eq!(
        fake.accepted_count(),
        2,
        "no further reconnects once the page is gone"
    );
    assert!(
        !fake.page_target_ids().contains(&page),
        "the fake really did give a new browser"
    );
}

#[test]
fn browserless_408_status_line_ends_the_session_and_the_new_browser_is_not_adopted() {
    session_timeout_is_reported_and_the_new_browser_is_not_adopted(HTTP_408_SHORT);
}

#[test]
fn browserless_408_with_headers_and_body_is_not_reported_as_reserved_bits() {
    session_timeout_is_reported_and_the_new_browser_is_not_adopted(HTTP_408_FULL);
}

/// A call in flight on a connection where nothing else comes fails with the connection when it
/// drops (ConnectionLost at once), not at its deadline: the reader drains the calls registered
/// since its last read before it fails them all.
#[test]
fn a_call_in_flight_on_a_quiet_connection_fails_at_once_when_it_drops() {
    let fake = FakeBrowser::start().unwrap();
    fake.set_rule("DOM.getDocument", cdp_supervisor::fake::Rule::Ignore);
    let (reg, sup) = start(&fake, config(5, Duration::from_millis(100)));
    let caller = {
        let sup = Arc::clone(&sup);
        std::thread::spawn(move || {
            sup.call(
                "DOM.getDocument",
                json!({}),
                cdp_supervisor::Route::Page,
                Duration::from_secs(20),
            )
        })
    };
    fake.wait_for_command(|m| m["method"] == "DOM.getDocument", WAIT)
        .expect("the call is written");
    let t0 = Instant::now();
    fake.drop_connections();
    let r = caller.join().expect("the caller");
    let took = t0.elapsed();
    assert!(
        matches!(r, Err(cdp_supervisor::Error::ConnectionLost(_))),
        "{r:?}"
    );
    assert!(
        took < Duration::from_secs(2),
        "failed {took:?} after the drop"
    );
    reg.stop_all();
}

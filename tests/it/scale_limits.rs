//! Scale and hostile-wire limits (SPEC §14: nothing read from the page or the wire can panic the
//! process or grow memory without bound; every ring and map has a cap; frames above
//! `max_message_bytes` are refused with a logged reason).
//!
//! The tests of this module run one at a time (a shared lock) so their timings and RSS figures
//! are not disturbed by each other. Every wait has a deadline; figures go to stderr
//! (`cargo test --test it scale_limits:: -- --nocapture`).

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use cdp_supervisor::fake::FakeBrowser;
use cdp_supervisor::{
    ClosedBy, Config, DialogAction, Error, Limits, Route, Snapshot, Supervisor, SupervisorRegistry,
};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(10);
/// Bound on digesting a whole flood (generous: a debug-ish build on a loaded CI machine).
const FLOOD_WAIT: Duration = Duration::from_secs(120);

fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Resident set size of this process, in KiB.
fn rss_kib() -> u64 {
    common::procs::self_status("VmRSS").unwrap_or(0)
}

fn start(fake: &FakeBrowser, cfg: Config) -> (SupervisorRegistry, Arc<Supervisor>) {
    let reg = SupervisorRegistry::new(cfg);
    let sup = reg.get_or_start("task", &fake.ws_url()).expect("attach");
    sup.wait_for(WAIT, |s| s.frame_tree.top.is_some())
        .expect("main frame seeded");
    (reg, sup)
}

fn wait(
    sup: &Supervisor,
    what: &str,
    timeout: Duration,
    pred: impl Fn(&Snapshot) -> bool,
) -> Arc<Snapshot> {
    match sup.wait_for(timeout, pred) {
        Some(s) => s,
        None => panic!(
            "timed out after {timeout:?} waiting for {what}; last snapshot: active={} reason={:?} frames={} console={}",
            sup.snapshot().is_active(),
            sup.snapshot().disconnect_reason,
            sup.snapshot().frames.len(),
            sup.snapshot().console_errors.len()
        ),
    }
}

/// A console error event whose text is `text`.
fn console_error(text: &str) -> Value {
    json!({"type": "error", "args": [{"type": "string", "value": text}],
           "executionContextId": 1, "timestamp": 0})
}

/// Opens an alert, answers it as the agent and checks the record: the supervisor still serves.
fn dialog_round_trip(fake: &FakeBrowser, sup: &Supervisor, message: &str) {
    fake.open_dialog("alert", message, "");
    let d = wait(sup, "the dialog", WAIT, |s| {
        s.pending_dialogs.iter().any(|d| d.message == message)
    })
    .pending_dialogs
    .iter()
    .find(|d| d.message == message)
    .cloned()
    .unwrap();
    sup.respond_to_dialog(DialogAction::Accept, None, Some(&d.id))
        .expect("the answer is acknowledged");
    let s = wait(sup, "the dialog record", WAIT, |s| {
        s.closed_dialog(&d.id).is_some()
    });
    assert_eq!(s.closed_dialog(&d.id).unwrap().closed_by, ClosedBy::Agent);
}

fn browser_call_works(sup: &Supervisor) {
    let v = sup
        .call("Browser.getVersion", json!({}), Route::Browser, WAIT)
        .expect("a browser-level call still works");
    assert_eq!(v["product"], "FakeChrome/1.0");
}

// ------------------------------------------------------------------------------ frames

#[test]
fn ten_thousand_frames_are_capped_and_the_supervisor_keeps_serving() {
    let _serial = serial();
    let fake = FakeBrowser::start().unwrap();
    let (_reg, sup) = start(&fake, Config::default());
    let page = fake.page_target_id();
    let frames_max = Limits::default().frames_max;
    assert_eq!(frames_max, 10_000);
    // Watch every snapshot we get to see while the flood is digested.
    let max_seen = Arc::new(AtomicUsize::new(0));
    let rss_before = rss_kib();
    let t = Instant::now();
    for i in 0..10_000 {
        let id = format!("F{i}");
        fake.emit_on_page(
            "Page.frameAttached",
            json!({"frameId": id, "parentFrameId": page}),
        );
        fake.emit_on_page(
            "Page.frameNavigated",
            json!({"frame": {"id": id, "parentId": page, "loaderId": format!("L{i}"),
                             "url": format!("https://f{i}.example/"),
                             "securityOrigin": format!("https://f{i}.example"),
                             "mimeType": "text/html"},
                   "type": "Navigation"}),
        );
        if i % 1000 == 0 {
            let n = sup.snapshot().frames.len();
            max_seen.fetch_max(n, Ordering::Relaxed);
        }
    }
    let emitted = t.elapsed();
    let s = {
        let max_seen = Arc::clone(&max_seen);
        let text = "barrier frames";
        fake.emit_on_page("Runtime.consoleAPICalled", console_error(text));
        wait(
            &sup,
            "the frame flood to be digested",
            FLOOD_WAIT,
            move |s| {
                max_seen.fetch_max(s.frames.len(), Ordering::Relaxed);
                s.console_errors.last().is_some_and(|c| c.text == text)
            },
        )
    };
    let digested = t.elapsed();
    let rss_after = rss_kib();
    eprintln!(
        "20,000 frame events: emitted in {emitted:?}, digested in {digested:?} ({:.0} events/s); \
         frames map {} (max seen {}), children {}, truncated {}; RSS {} KiB -> {} KiB (+{} KiB)",
        20_000.0 / digested.as_secs_f64(),
        s.frames.len(),
        max_seen.load(Ordering::Relaxed),
        s.frame_tree.children.len(),
        s.frame_tree.truncated,
        rss_before,
        rss_after,
        rss_after.saturating_sub(rss_before)
    );
    assert_eq!(s.frame_tree.children.len(), 30);
    assert!(s.frame_tree.truncated);
    assert_eq!(
        s.frame_tree.children[0].frame_id, "F0",
        "attach order is kept"
    );
    assert!(
        s.frames.len() <= frames_max,
        "frames map exceeds its cap: {}",
        s.frames.len()
    );
    assert!(
        max_seen.load(Ordering::Relaxed) <= frames_max,
        "a published frames map exceeded the cap: {}",
        max_seen.load(Ordering::Relaxed)
    );
    assert_eq!(
        s.frames.len(),
        frames_max,
        "main frame + 9,999 children fill the map; the rest is ignored"
    );
    assert!(s.is_active());
    dialog_round_trip(&fake, &sup, "after 10,000 frames");
    browser_call_works(&sup);
    // 10,000 frame records are a few MiB; anything near this bound means copies pile up.
    let growth_mib = rss_kib().saturating_sub(rss_before) / 1024;
    assert!(growth_mib < 256, "RSS grew by {growth_mib} MiB");
}

// ------------------------------------------------------------------------------ console

#[test]
fn hundred_thousand_console_errors_keep_the_newest_fifty() {
    let _serial = serial();
    let fake = FakeBrowser::start().unwrap();
    let (_reg, sup) = start(&fake, Config::default());
    let rss_before = rss_kib();
    let t = Instant::now();
    for i in 0..100_000 {
        fake.emit_on_page(
            "Runtime.consoleAPICalled",
            console_error(&format!("err {i}")),
        );
    }
    let emitted = t.elapsed();
    let s = wait(&sup, "the last console error", FLOOD_WAIT, |s| {
        s.console_errors
            .last()
            .is_some_and(|c| c.text == "err 99999")
    });
    let digested = t.elapsed();
    let rss_after = rss_kib();
    eprintln!(
        "100,000 console errors: emitted in {emitted:?}, digested in {digested:?} ({:.0} events/s); \
         RSS {rss_before} KiB -> {rss_after} KiB",
        100_000.0 / digested.as_secs_f64()
    );
    assert_eq!(s.console_errors.len(), 50);
    assert_eq!(s.console_errors[0].text, "err 99950", "oldest kept");
    assert_eq!(s.console_errors[49].text, "err 99999", "newest last");
    assert!(s.console_errors.iter().all(|c| c.level == "error"));
    assert!(s.is_active());
    browser_call_works(&sup);
    dialog_round_trip(&fake, &sup, "after 100,000 console errors");
    let growth_mib = rss_kib().saturating_sub(rss_before) / 1024;
    assert!(growth_mib < 256, "RSS grew by {growth_mib} MiB");
}

// ------------------------------------------------------------------------------ oversize frames

const SMALL: usize = 64 * 1024;

fn small_limit(reconnect_attempts: u32) -> Config {
    Config::default()
        .with_reconnect_attempts(reconnect_attempts)
        .unwrap()
        .with_limits(Limits::default().with_max_message_bytes(SMALL))
        .unwrap()
}

/// A valid CDP event of exactly `size` bytes.
fn padded_event(size: usize) -> String {
    let head = r#"{"method":"Test.padding","params":{"pad":""#;
    let tail = r#""}}"#;
    let pad = size - head.len() - tail.len();
    let s = format!("{head}{}{tail}", "p".repeat(pad));
    assert_eq!(s.len(), size);
    s
}

fn mentions_size(reason: &str) -> bool {
    let r = reason.to_ascii_lowercase();
    [
        "too long",
        "too big",
        "too large",
        "capacity",
        "limit",
        "size",
    ]
    .iter()
    .any(|w| r.contains(w))
}

#[test]
fn a_frame_at_the_limit_is_fine() {
    let _serial = serial();
    let fake = FakeBrowser::start().unwrap();
    let (_reg, sup) = start(&fake, small_limit(3));
    for size in [SMALL - 1, SMALL] {
        fake.send_raw_text(padded_event(size));
        // The reply comes after the frame on the same connection: it was read first.
        browser_call_works(&sup);
    }
    let s = sup.snapshot();
    assert!(s.is_active(), "{:?}", s.disconnect_reason);
    assert!(s.disconnect_reason.is_none(), "{:?}", s.disconnect_reason);
    assert_eq!(fake.accepted_count(), 1, "no reconnect was needed");
}

#[test]
fn a_frame_above_max_message_bytes_closes_with_a_reason_then_reconnects() {
    let _serial = serial();
    let fake = FakeBrowser::start().unwrap();
    let (_reg, sup) = start(&fake, small_limit(3));
    fake.send_raw_text("x".repeat(100_000));
    let down = wait(&sup, "the connection to be refused", WAIT, |s| {
        !s.is_active()
    });
    let reason = down.disconnect_reason.clone().unwrap_or_default();
    eprintln!("oversize text frame (100,000 > {SMALL}): {reason}");
    assert!(
        mentions_size(&reason),
        "the reason names the size: {reason:?}"
    );
    assert!(sup.is_alive(), "reconnecting, not dead");
    let up = wait(&sup, "the reconnect", WAIT, |s| {
        s.is_active() && s.frame_tree.top.is_some()
    });
    assert_eq!(fake.accepted_count(), 2);
    assert!(up.disconnect_reason.is_none());
    browser_call_works(&sup);
    dialog_round_trip(&fake, &sup, "after an oversize frame");
    // Binary frames count against the same limit.
    fake.send_raw_binary(vec![7u8; 100_000]);
    let down = wait(&sup, "the binary frame to be refused", WAIT, |s| {
        !s.is_active()
    });
    let reason = down.disconnect_reason.clone().unwrap_or_default();
    eprintln!("oversize binary frame: {reason}");
    assert!(mentions_size(&reason), "{reason:?}");
    wait(&sup, "the second reconnect", WAIT, |s| {
        s.is_active() && s.frame_tree.top.is_some()
    });
    browser_call_works(&sup);
}

#[test]
fn a_frame_above_max_message_bytes_without_a_reconnect_budget_ends_the_supervisor() {
    let _serial = serial();
    let fake = FakeBrowser::start().unwrap();
    let (reg, sup) = start(&fake, small_limit(0));
    fake.send_raw_text("x".repeat(100_000));
    wait(&sup, "the end", WAIT, |s| !s.is_active());
    let dead = sup.wait_for(WAIT, |_| !sup.is_alive());
    assert!(
        dead.is_some() && !sup.is_alive(),
        "no budget: the supervisor is dead"
    );
    // The dead supervisor's last snapshot must still say why it died: nobody called stop.
    let last = sup.snapshot();
    assert!(!last.is_active());
    let r = sup.call("Browser.getVersion", json!({}), Route::Browser, WAIT);
    assert!(matches!(r, Err(Error::NotActive(_))), "{r:?}");
    // The registry replaces a dead supervisor.
    let again = reg.get_or_start("task", &fake.ws_url()).unwrap();
    assert!(!Arc::ptr_eq(&again, &sup) && again.is_alive());
    browser_call_works(&again);
    assert!(
        mentions_size(last.disconnect_reason.as_deref().unwrap_or("")),
        "the final snapshot of a supervisor killed by an oversize frame says {:?}",
        last.disconnect_reason
    );
}

// ------------------------------------------------------------------------------ hostile frames

/// A complete unmasked server-to-client WebSocket frame (payload < 126 bytes).
fn raw_frame(first_byte: u8, payload: &[u8]) -> Vec<u8> {
    assert!(payload.len() < 126);
    let mut f = vec![first_byte, payload.len() as u8];
    f.extend_from_slice(payload);
    f
}

#[test]
fn binary_frames_are_ignored_and_the_supervisor_keeps_serving() {
    let _serial = serial();
    let fake = FakeBrowser::start().unwrap();
    let (_reg, sup) = start(&fake, small_limit(3));
    fake.send_raw_binary(vec![0u8, 159, 146, 150]);
    fake.send_raw_binary(br#"{"method":"Page.javascriptDialogOpening"}"#.to_vec());
    fake.send_raw_binary(vec![0xAB; SMALL]);
    browser_call_works(&sup);
    let s = sup.snapshot();
    assert!(s.is_active() && s.pending_dialogs.is_empty());
    assert_eq!(
        fake.accepted_count(),
        1,
        "binary frames do not cost the connection"
    );
}

#[test]
fn truncated_and_non_object_json_is_ignored_and_the_supervisor_keeps_serving() {
    let _serial = serial();
    let fake = FakeBrowser::start().unwrap();
    let (_reg, sup) = start(&fake, small_limit(3));
    for raw in [
        "{\"id\": 1, \"result\": {",
        "{\"method\":\"Page.javascriptDialogOpening\",\"sessionId\":\"",
        "{\"method\":\"Page.frameAttached\",\"params\":{\"frameId\":\"X\",\"parentFrameId\"",
        "",
        "null",
        "\"just a string\"",
        "1e999999",
        &"[".repeat(10_000),
        &"{\"a\":".repeat(10_000),
    ] {
        fake.send_raw_text(raw);
    }
    browser_call_works(&sup);
    let s = sup.snapshot();
    assert!(s.is_active());
    assert!(s.pending_dialogs.is_empty());
    assert!(!s.frames.contains_key("X"));
    assert_eq!(fake.accepted_count(), 1);
    dialog_round_trip(&fake, &sup, "after truncated JSON");
}

#[test]
fn invalid_utf8_in_a_text_frame_closes_the_connection_with_a_reason_then_reconnects() {
    let _serial = serial();
    let fake = FakeBrowser::start().unwrap();
    let (_reg, sup) = start(&fake, small_limit(3));
    // FIN + text opcode, unmasked (a server frame), payload with bytes that are never UTF-8.
    let mut payload = br#"{"method":"Runtime.consoleAPICalled","params":{"type":"error","args":[{"type":"string","value":""#.to_vec();
    payload.extend_from_slice(&[0xFF, 0xFE, 0xC3]);
    payload.extend_from_slice(br#""}]}}"#);
    fake.send_raw_bytes(&raw_frame(0x81, &payload));
    // RFC 6455 §8.1: invalid UTF-8 in a text message fails the connection. Observed: the
    // supervisor does exactly that, records why, and reconnects.
    let down = wait(&sup, "the connection to be failed", WAIT, |s| {
        !s.is_active()
    });
    let reason = down.disconnect_reason.clone().unwrap_or_default();
    eprintln!("invalid UTF-8 text frame: {reason}");
    assert!(
        reason.to_ascii_lowercase().contains("utf-8")
            || reason.to_ascii_lowercase().contains("utf8"),
        "{reason:?}"
    );
    wait(&sup, "the reconnect", WAIT, |s| {
        s.is_active() && s.frame_tree.top.is_some()
    });
    assert_eq!(fake.accepted_count(), 2);
    assert!(
        sup.snapshot().console_errors.is_empty(),
        "nothing of the invalid frame was applied"
    );
    browser_call_works(&sup);
    dialog_round_trip(&fake, &sup, "after invalid UTF-8");
}

#[test]
fn websocket_protocol_violations_close_the_connection_with_a_reason_then_reconnect() {
    let _serial = serial();
    let fake = FakeBrowser::start().unwrap();
    let (_reg, sup) = start(&fake, small_limit(5));
    let cases: [(&str, Vec<u8>); 4] = [
        ("reserved opcode 0x3", raw_frame(0x83, b"??")),
        ("RSV1 set without an extension", raw_frame(0xC1, b"{}")),
        (
            "continuation frame with nothing to continue",
            raw_frame(0x80, b"{}"),
        ),
        // A server must not mask: mask bit set, key 0, payload "{}".
        (
            "masked server frame",
            vec![0x81, 0x82, 0, 0, 0, 0, b'{', b'}'],
        ),
    ];
    let mut accepted = 1;
    for (label, bytes) in cases {
        fake.send_raw_bytes(&bytes);
        let down = wait(&sup, label, WAIT, |s| !s.is_active());
        let reason = down.disconnect_reason.clone().unwrap_or_default();
        eprintln!("{label}: {reason}");
        assert!(!reason.is_empty(), "{label}: a reason is recorded");
        wait(&sup, "the reconnect", WAIT, |s| {
            s.is_active() && s.frame_tree.top.is_some()
        });
        accepted += 1;
        assert_eq!(fake.accepted_count(), accepted, "{label}");
        browser_call_works(&sup);
    }
    dialog_round_trip(&fake, &sup, "after protocol violations");
}

// ------------------------------------------------------------------------------ registry

#[test]
fn failed_starts_leave_no_registry_slots_behind() {
    let _serial = serial();
    // A port nobody listens on: every start fails fast with "connection refused".
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dead = format!("ws://127.0.0.1:{port}/devtools/browser/x");
    let reg = SupervisorRegistry::new(Config::default());
    let t = Instant::now();
    for i in 0..1_000 {
        let r = reg.get_or_start(&format!("task-{i}"), &dead);
        assert!(matches!(r, Err(Error::Connect { .. })), "{r:?}");
    }
    eprintln!("1,000 refused starts in {:?}", t.elapsed());
    assert!(reg.get("task-0").is_none());
    let left = reg.tasks();
    assert!(
        left.is_empty(),
        "{} task slots (\"live or starting\") remain after only failed starts, e.g. {:?}",
        left.len(),
        left.iter().take(3).collect::<Vec<_>>()
    );
}

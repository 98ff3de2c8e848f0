//! Faults a real browser cannot be made to show on demand: drops, reconnects, black holes, a peer
//! that stops reading, a page target that goes away (SPEC §3, issue "reliability").

use std::sync::Arc;
use std::time::{Duration, Instant};

use cdp_supervisor::fake::{FakeBrowser, Rule};
use cdp_supervisor::{
    ClosedBy, Config, DialogAction, Error, Route, Supervisor, SupervisorRegistry,
};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(10);

fn config(reconnect_attempts: u32) -> Config {
    Config::default()
        .with_reconnect_attempts(reconnect_attempts)
        .unwrap()
}

fn start(fake: &FakeBrowser, cfg: Config) -> (SupervisorRegistry, Arc<Supervisor>) {
    let reg = SupervisorRegistry::new(cfg);
    let sup = reg.get_or_start("task", &fake.ws_url()).expect("attach");
    (reg, sup)
}

#[test]
fn drop_shows_inactive_at_once_then_reconnects_and_rebuilds_state() {
    let fake = FakeBrowser::start().unwrap();
    let (_reg, sup) = start(&fake, config(5));
    fake.open_dialog("alert", "before the drop", "");
    sup.wait_for_dialog(WAIT).unwrap();
    sup.respond_to_dialog(DialogAction::Accept, None, None)
        .unwrap();
    let page = sup.snapshot().page_target_id.clone().unwrap();

    let dropped = Instant::now();
    fake.drop_connections();
    let down = sup
        .wait_for(WAIT, |s| !s.is_active())
        .expect("inactive after the drop");
    let noticed = dropped.elapsed();
    eprintln!("inactive {noticed:?} after the drop");
    assert!(noticed < Duration::from_millis(500), "took {noticed:?}");
    assert!(down.disconnect_reason.is_some());
    assert!(sup.is_alive(), "reconnecting, not dead");
    let r = sup.call("Browser.getVersion", json!({}), Route::Browser, WAIT);
    assert!(
        matches!(r, Err(Error::ConnectionLost(_))),
        "calls fail at once while down: {r:?}"
    );

    let up = sup
        .wait_for(WAIT, |s| s.is_active() && s.frame_tree.top.is_some())
        .expect("reconnected and re-attached");
    eprintln!("back up {:?} after the drop", dropped.elapsed());
    assert_eq!(
        up.page_target_id.as_deref(),
        Some(page.as_str()),
        "same page again"
    );
    assert_eq!(fake.accepted_count(), 2);
    assert_eq!(up.recent_dialogs.len(), 1, "history survives the reconnect");
    // The new connection works end to end, and dialog ids keep counting.
    fake.open_dialog("prompt", "after the reconnect", "x");
    let d = sup
        .wait_for_dialog(WAIT)
        .expect("detected on the new connection");
    assert_eq!(d.id, "d-2");
    sup.respond_to_dialog(DialogAction::Accept, Some("ok"), None)
        .unwrap();
    let s = sup
        .wait_for(WAIT, |s| s.closed_dialog("d-2").is_some())
        .unwrap();
    assert_eq!(s.closed_dialog("d-2").unwrap().closed_by, ClosedBy::Agent);
}

#[test]
fn spent_reconnect_budget_makes_the_supervisor_dead_and_replaceable() {
    let fake = FakeBrowser::start().unwrap();
    let (reg, sup) = start(&fake, config(2));
    let url = fake.ws_url();
    let t = Instant::now();
    drop(fake); // nobody listens any more: every reconnect attempt is refused
    let s = sup.wait_for(WAIT, |_| !sup.is_alive()).expect("gives up");
    let took = t.elapsed();
    eprintln!("dead after {took:?} (2 attempts: 250 ms + 500 ms back-off)");
    assert!(
        took >= Duration::from_millis(700),
        "backed off too little: {took:?}"
    );
    assert!(!s.is_active());
    assert!(!sup.is_alive());
    // get_or_start replaces a dead supervisor; here the endpoint is gone, so it reports that.
    let err = reg.get_or_start("task", &url).unwrap_err();
    assert!(matches!(err, Error::Connect { .. }), "{err}");
    let fresh = FakeBrowser::start().unwrap();
    let again = reg.get_or_start("task", &fresh.ws_url()).unwrap();
    assert!(again.is_alive() && !Arc::ptr_eq(&again, &sup));
}

#[test]
fn stop_interrupts_a_reconnect_back_off() {
    let fake = FakeBrowser::start().unwrap();
    let (reg, sup) = start(&fake, config(5));
    drop(fake);
    sup.wait_for(WAIT, |s| !s.is_active()).unwrap();
    let t = Instant::now();
    assert!(reg.stop("task"));
    let took = t.elapsed();
    eprintln!("stop during reconnect took {took:?}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert!(!sup.is_alive());
}

#[test]
fn black_hole_peer_fails_start_within_its_bound_and_stop_is_quick() {
    let fake = FakeBrowser::start().unwrap();
    fake.set_silent(true);
    let reg = SupervisorRegistry::new(
        Config::default()
            .with_start_timeout(Duration::from_millis(800))
            .unwrap(),
    );
    let t = Instant::now();
    let err = reg.get_or_start("task", &fake.ws_url()).unwrap_err();
    let took = t.elapsed();
    eprintln!("start against a black hole failed after {took:?}: {err}");
    assert!(took < Duration::from_millis(2500), "{took:?}");
    assert!(reg.get("task").is_none());
    assert!(
        fake.wait_for_connections(0, WAIT),
        "the failed start closed its socket"
    );
}

#[test]
fn peer_that_stops_reading_blocks_neither_snapshots_nor_other_tasks() {
    let stuck = FakeBrowser::start().unwrap();
    let healthy = FakeBrowser::start().unwrap();
    // Two fakes name their pages alike (`PAGE-1`), which two real browsers never do: without
    // security.isolate_tasks the second task may take its browser's first page too.
    let reg = Arc::new(SupervisorRegistry::new(
        config(0)
            .with_security(cdp_supervisor::Security::default().with_isolate_tasks(false))
            .unwrap(),
    ));
    let a = reg.get_or_start("stuck", &stuck.ws_url()).unwrap();
    let b = reg.get_or_start("healthy", &healthy.ws_url()).unwrap();
    stuck.set_stop_reading(true);
    // A caller keeps writing 1 MB commands until its write blocks on the full TCP buffer.
    let writer = {
        let a = Arc::clone(&a);
        std::thread::spawn(move || {
            let big = "x".repeat(1 << 20);
            for _ in 0..64 {
                let r = a.call(
                    "Runtime.evaluate",
                    json!({"expression": big}),
                    Route::Browser,
                    Duration::from_millis(20),
                );
                if matches!(r, Err(Error::ConnectionLost(_)) | Err(Error::NotActive(_))) {
                    return;
                }
            }
        })
    };
    // Give the writer time to fill the buffers; meanwhile everything else must stay responsive.
    let t = Instant::now();
    let mut reads = 0u64;
    while t.elapsed() < Duration::from_millis(500) {
        let s = reg.snapshot("stuck").unwrap();
        std::hint::black_box(s.pending_dialogs.len());
        reads += 1;
    }
    assert!(
        reads > 1000,
        "snapshot reads were blocked: {reads} in 500 ms"
    );
    healthy.open_dialog("alert", "other task", "");
    b.wait_for_dialog(WAIT).expect("the other task still works");
    b.respond_to_dialog(DialogAction::Accept, None, None)
        .unwrap();
    let t = Instant::now();
    assert!(reg.stop("stuck"));
    let took = t.elapsed();
    eprintln!("{reads} snapshot reads in 500 ms while stuck; stop took {took:?}");
    assert!(took < Duration::from_millis(1500), "{took:?}");
    writer.join().unwrap();
    stuck.set_stop_reading(false);
}

#[test]
fn page_target_going_away_ends_the_supervisor_without_reconnecting() {
    let fake = FakeBrowser::start().unwrap();
    let (_reg, sup) = start(&fake, config(5));
    let session = sup.snapshot().page_session_id.clone().unwrap();
    fake.emit(
        None,
        "Target.detachedFromTarget",
        json!({"sessionId": session, "targetId": fake.page_target_id()}),
    );
    sup.wait_for(WAIT, |_| !sup.is_alive()).expect("dead");
    let s = sup.snapshot();
    assert!(!s.is_active());
    assert!(
        s.disconnect_reason
            .as_deref()
            .unwrap_or("")
            .contains("page target"),
        "{:?}",
        s.disconnect_reason
    );
    assert_eq!(fake.accepted_count(), 1, "no reconnect for a closed page");
}

#[test]
fn replies_and_events_that_make_no_sense_are_passed_over() {
    let fake = FakeBrowser::start().unwrap();
    let (_reg, sup) = start(&fake, config(0));
    for raw in [
        "not json",
        "{\"id\": 999999, \"result\": {}}",
        "{\"id\": \"seven\"}",
        "{\"method\": \"Page.javascriptDialogOpening\", \"sessionId\": \"NOPE\", \"params\": {\"message\": 5}}",
        "{\"method\": \"Page.javascriptDialogClosed\", \"params\": {}}",
        "{\"method\": \"Target.detachedFromTarget\", \"params\": {\"sessionId\": \"UNKNOWN\"}}",
        "{\"method\": \"Page.frameDetached\", \"params\": {\"frameId\": \"UNKNOWN\"}}",
        "{\"method\": \"Some.futureEvent\", \"params\": {\"x\": [1, 2, {\"y\": null}]}}",
        "[1, 2, 3]",
        "{\"id\": 1",
    ] {
        fake.send_raw_text(raw);
    }
    fake.send_raw_binary(vec![0u8, 159, 146, 150]);
    fake.set_rule("Browser.getVersion", Rule::Default);
    let v = sup
        .call("Browser.getVersion", json!({}), Route::Browser, WAIT)
        .unwrap();
    assert_eq!(v["product"], "FakeChrome/1.0");
    assert!(sup.snapshot().is_active());
    assert!(
        sup.snapshot().pending_dialogs.is_empty(),
        "a dialog event with a wrong type must not create a dialog"
    );
}

//! Starting a supervisor with a cancel token (`StartRequest::with_cancel`,
//! issue 20 item 12) and the task-id checks every start makes (item 4), on the fake browser.
//!
//! A cancelled start returns `Error::StartCancelled` at once wherever it is (attaching, waiting
//! for its own `Target.createTarget`, waiting for another caller's start, connecting) and
//! leaves nothing: no slot in the registry, no connection, no thread named after its task, no
//! page it created. The thread counts of the whole process are checked in
//! `tests/solo/start_cancel.rs`.
//!
//! A stop of the task or the registry's close, from another thread, cuts a start short the same
//! way without any token of the caller's (issue 28 item 12), and a closed registry refuses new
//! starts (`Error::RegistryClosed`).

use cdp_supervisor::StartRequest;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cdp_supervisor::fake::{FakeBrowser, Rule};
use cdp_supervisor::{
    CancelToken, Config, Error, StartOptions, Supervisor, SupervisorRegistry, tools,
};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(5);

/// Threads of this process whose name starts with `prefix` (Linux cuts names to 15 bytes).
fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                .filter(|n| n.trim().starts_with(prefix))
                .count()
        })
        .unwrap_or(0)
}

/// The scheduler state (`R`, `S`, ...) of this process's thread named `name` (as Linux keeps
/// it: 15 bytes).
fn thread_state(name: &str) -> Option<char> {
    std::fs::read_dir("/proc/self/task")
        .ok()?
        .flatten()
        .find_map(|t| {
            let comm = std::fs::read_to_string(t.path().join("comm")).ok()?;
            if comm.trim() != name {
                return None;
            }
            let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
            stat[stat.rfind(')')? + 1..].trim_start().chars().next()
        })
}

/// A registry whose starts would wait 15 s for an attach that never comes.
fn registry() -> SupervisorRegistry {
    SupervisorRegistry::new(
        Config::default()
            .with_start_timeout(Duration::from_secs(15))
            .unwrap(),
    )
}

/// Starts `task` on `fake` with `options` and `cancel` on a thread of the scope; returns when
/// the start's result is in, with the instant it came back.
type Started = (Result<Arc<Supervisor>, Error>, Instant);

fn assert_cancelled(result: &Result<Arc<Supervisor>, Error>, during: &str) {
    match result {
        Err(e @ Error::StartCancelled { .. }) => {
            let m = e.to_string();
            assert!(m.contains("was cancelled") && m.contains(during), "{m}");
        }
        other => panic!("not a cancelled start: {other:?}"),
    }
}

#[test]
fn a_cancel_while_attaching_returns_at_once_and_closes_the_page_it_created() {
    let fake = FakeBrowser::start().unwrap();
    fake.set_rule("Target.attachToTarget", Rule::Ignore);
    let reg = registry();
    let cancel = CancelToken::new();
    let options = StartOptions::default().with_new_page(true);
    let (result, took) = std::thread::scope(|s| {
        let start = s.spawn(|| -> Started {
            let r = reg.start(
                StartRequest::new("qa1-attach", &fake.ws_url())
                    .with_options(options)
                    .with_cancel(&cancel),
            );
            (r, Instant::now())
        });
        fake.wait_for_command(|c| c["method"] == "Target.attachToTarget", WAIT)
            .expect("the start is attaching");
        assert_eq!(reg.tasks(), ["qa1-attach"]);
        assert_eq!(
            fake.page_target_ids().len(),
            2,
            "the start created its page"
        );
        assert_eq!(threads_named("cdp-reader-qa1-"), 1);
        let t = Instant::now();
        cancel.cancel();
        let (result, returned) = start.join().unwrap();
        (result, returned - t)
    });
    eprintln!("cancel while attaching -> returned after {took:?} (start_timeout 15 s)");
    assert_cancelled(&result, "attaching");
    assert!(took < Duration::from_millis(500), "took {took:?}");
    assert!(reg.tasks().is_empty() && reg.get("qa1-attach").is_none());
    assert_eq!(
        fake.page_target_ids(),
        ["PAGE-1"],
        "the page the start created is closed"
    );
    assert!(
        fake.wait_for_connections(0, WAIT),
        "its connection is closed"
    );
    assert_eq!(
        threads_named("cdp-reader-qa1-"),
        0,
        "its threads are joined"
    );
    assert_eq!(threads_named("cdp-watchdog-qa"), 0);
    // The task starts normally afterwards.
    fake.clear_rule("Target.attachToTarget");
    let sup = reg
        .start(StartRequest::new("qa1-attach", &fake.ws_url()).with_cancel(&CancelToken::new()))
        .unwrap();
    assert!(sup.is_active());
}

#[test]
fn a_cancel_while_the_new_page_is_being_created_still_closes_that_page() {
    let fake = FakeBrowser::start().unwrap();
    // The page is created 300 ms after it is asked for; the cancel comes before.
    fake.set_rule(
        "Target.createTarget",
        Rule::Delay(Duration::from_millis(300), Box::new(Rule::Default)),
    );
    let reg = registry();
    let cancel = CancelToken::new();
    let options = StartOptions::default().with_new_page(true);
    let (result, took) = std::thread::scope(|s| {
        let start = s.spawn(|| -> Started {
            let r = reg.start(
                StartRequest::new("cancel-create", &fake.ws_url())
                    .with_options(options)
                    .with_cancel(&cancel),
            );
            (r, Instant::now())
        });
        fake.wait_for_command(|c| c["method"] == "Target.createTarget", WAIT)
            .expect("the start is creating its page");
        let t = Instant::now();
        cancel.cancel();
        let (result, returned) = start.join().unwrap();
        (result, returned - t)
    });
    eprintln!("cancel while Target.createTarget is in flight -> returned after {took:?}");
    assert_cancelled(&result, "attaching");
    assert!(took < Duration::from_secs(2), "took {took:?}");
    let closed = fake
        .received()
        .iter()
        .any(|c| c["method"] == "Target.closeTarget" && c["params"]["targetId"] == "PAGE-2");
    assert!(closed, "the late page was closed");
    assert_eq!(fake.page_target_ids(), ["PAGE-1"]);
    assert!(reg.tasks().is_empty());
    assert!(fake.wait_for_connections(0, WAIT));
}

#[test]
fn a_start_that_times_out_closes_the_page_it_created() {
    let fake = FakeBrowser::start().unwrap();
    fake.set_rule("Target.attachToTarget", Rule::Ignore);
    let reg = SupervisorRegistry::new(
        Config::default()
            .with_start_timeout(Duration::from_millis(500))
            .unwrap(),
    );
    let options = StartOptions::default().with_new_page(true);
    let r = reg.start(StartRequest::new("timeout-page", &fake.ws_url()).with_options(options));
    assert!(matches!(r, Err(Error::StartTimeout(..))), "{r:?}");
    assert_eq!(fake.page_target_ids(), ["PAGE-1"], "no tab left behind");
    assert!(reg.tasks().is_empty());
}

#[test]
fn a_cancel_while_waiting_for_another_callers_start_returns_at_once() {
    let fake = FakeBrowser::start().unwrap();
    fake.set_rule("Target.attachToTarget", Rule::Ignore);
    // The first start would time out after 1 s.
    let reg = SupervisorRegistry::new(
        Config::default()
            .with_start_timeout(Duration::from_secs(1))
            .unwrap(),
    );
    let cancel = CancelToken::new();
    std::thread::scope(|s| {
        let first = s.spawn(|| reg.get_or_start("cancel-wait", &fake.ws_url()));
        fake.wait_for_command(|c| c["method"] == "Target.attachToTarget", WAIT)
            .expect("the first start is attaching");
        let second = std::thread::Builder::new()
            .name("qa-start-waiter".into())
            .spawn_scoped(s, || -> Started {
                let r = reg
                    .start(StartRequest::new("cancel-wait", &fake.ws_url()).with_cancel(&cancel));
                (r, Instant::now())
            })
            .unwrap();
        // The second caller's first wait is for the first start: once its thread sleeps, it
        // is there (nothing before that wait blocks: the registry's lock is free).
        let waiting = crate::common::wait_until(WAIT, || {
            (thread_state("qa-start-waiter") == Some('S')).then_some(())
        });
        assert!(waiting.is_some(), "the second caller never waited");
        let t = Instant::now();
        cancel.cancel();
        let (result, returned) = second.join().unwrap();
        let took = returned - t;
        eprintln!("cancel while waiting for another start -> returned after {took:?}");
        assert_cancelled(&result, "waiting for another caller's start");
        assert!(took < Duration::from_millis(500), "took {took:?}");
        assert_eq!(
            fake.accepted_count(),
            1,
            "the second caller made no connection"
        );
        // The first start is unaffected by the second caller's cancel; stop it.
        assert_eq!(reg.tasks(), ["cancel-wait"]);
        assert!(reg.stop("cancel-wait"));
        assert!(first.join().unwrap().is_err());
    });
    assert!(reg.tasks().is_empty());
}

#[test]
fn a_cancel_while_connecting_returns_at_once_and_the_connection_is_closed() {
    // A peer that accepts TCP and never answers the WebSocket upgrade.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "ws://127.0.0.1:{}/devtools/browser/x",
        listener.local_addr().unwrap().port()
    );
    let reg = SupervisorRegistry::new(
        Config::default()
            .with_start_timeout(Duration::from_secs(2))
            .unwrap(),
    );
    let cancel = CancelToken::new();
    std::thread::scope(|s| {
        let start = s.spawn(|| -> Started {
            let r = reg.start(StartRequest::new("cancel-connect", &url).with_cancel(&cancel));
            (r, Instant::now())
        });
        let (mut peer, _) = listener.accept().unwrap();
        let t = Instant::now();
        cancel.cancel();
        let (result, returned) = start.join().unwrap();
        let took = returned - t;
        eprintln!("cancel while connecting -> returned after {took:?} (start_timeout 2 s)");
        assert_cancelled(&result, "connecting");
        assert!(took < Duration::from_millis(500), "took {took:?}");
        assert!(reg.tasks().is_empty());
        // The abandoned connect ends by its own deadline and closes its socket.
        peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let t = Instant::now();
        let mut buf = [0u8; 4096];
        loop {
            match std::io::Read::read(&mut peer, &mut buf) {
                Ok(0) => break,
                Ok(_) => {} // the upgrade request
                Err(e) => panic!("the abandoned connection was not closed: {e}"),
            }
        }
        eprintln!(
            "the abandoned connect closed its socket {:?} after the cancel",
            t.elapsed() + took
        );
    });
}

#[test]
fn a_token_cancelled_before_the_start_makes_no_connection() {
    let fake = FakeBrowser::start().unwrap();
    let reg = registry();
    let cancel = CancelToken::new();
    cancel.cancel();
    let r = reg.start(StartRequest::new("early", &fake.ws_url()).with_cancel(&cancel));
    assert_cancelled(&r, "waiting to start");
    assert_eq!(fake.accepted_count(), 0);
    assert!(reg.tasks().is_empty());
}

#[test]
fn invalid_task_ids_are_refused_everywhere_and_never_panic() {
    let fake = FakeBrowser::start().unwrap();
    let reg = registry();
    let long = "x".repeat(129);
    let bad = [
        "",
        "t\u{0}",
        "\u{0}",
        "a\nb",
        "\u{1b}[31m",
        "a\u{7f}",
        "a\u{9b}",
        "a\u{202E}b",
        "a\u{2066}b",
        "a\u{200B}b",
        "\u{FEFF}",
        "a\u{E0041}",
        "a\u{2028}",
        " a",
        "a ",
        long.as_str(),
    ];
    for id in bad {
        let invalid = |r: Result<Arc<Supervisor>, Error>| match r {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("task_id"), "{id:?}: {m}"),
            other => panic!("{id:?}: {other:?}"),
        };
        invalid(reg.get_or_start(id, &fake.ws_url()));
        invalid(reg.start(StartRequest::new(id, &fake.ws_url())));
        invalid(reg.start(StartRequest::new(id, &fake.ws_url()).with_cancel(&CancelToken::new())));
        invalid(Supervisor::start(
            StartRequest::new(id, &fake.ws_url()),
            &Config::default(),
        ));
        assert!(SupervisorRegistry::check_task_id(id).is_err());
        assert!(reg.get(id).is_none() && reg.snapshot(id).is_none() && !reg.stop(id));
        for out in [
            tools::browser_snapshot(&reg, id, &json!({})),
            tools::browser_dialog(&reg, id, &json!({"action": "accept"})),
            tools::browser_cdp(&reg, id, &json!({"method": "Runtime.evaluate"})),
            cdp_supervisor::unversioned::tools::call(
                &reg,
                "browser_cdp",
                &json!({"method": "Runtime.evaluate", "task_id": id}),
                Some(&CancelToken::new()),
            ),
        ] {
            assert_eq!(out["success"], false, "{id:?}: {out}");
            assert!(
                out["error"].as_str().is_some_and(|e| e.contains("task_id")),
                "{id:?}: {out}"
            );
        }
    }
    assert_eq!(
        fake.accepted_count(),
        0,
        "no start got as far as connecting"
    );
    assert!(reg.tasks().is_empty());
}

#[test]
fn thread_names_carry_only_safe_ascii_of_the_task_id() {
    let fake = FakeBrowser::start().unwrap();
    let reg = registry();
    // Valid, but mostly not thread-name material.
    let sup = reg.get_or_start("nm/é 任 x.y-z", &fake.ws_url()).unwrap();
    assert_eq!(sup.task_id(), "nm/é 任 x.y-z");
    assert_eq!(threads_named("cdp-reader-nmx."), 1, "cdp-reader-nmx.y-z");
    let v: Value = tools::browser_snapshot(&reg, "nm/é 任 x.y-z", &json!({}));
    assert!(v["frame_tree"].is_object(), "{v}");
    reg.stop("nm/é 任 x.y-z");
    assert_eq!(threads_named("cdp-reader-nmx."), 0);
}

// A stop or a close from another thread cuts a start short (issue 28 item 12): the start has
// no token of its caller's; the registry cancels the one it runs with.

/// A peer that accepts TCP and never answers the WebSocket upgrade (a black hole to a start),
/// and its `ws://` URL.
fn silent_peer() -> (TcpListener, String) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "ws://127.0.0.1:{}/devtools/browser/x",
        listener.local_addr().unwrap().port()
    );
    (listener, url)
}

fn assert_stopped(result: &Result<Arc<Supervisor>, Error>, during: &str, by: &str) {
    assert_cancelled(result, during);
    let m = result.as_ref().err().map(ToString::to_string);
    assert!(m.as_deref().is_some_and(|m| m.contains(by)), "{m:?}");
}

#[test]
fn a_stop_from_another_thread_cuts_a_start_to_a_black_hole_short() {
    let (listener, url) = silent_peer();
    let reg = registry(); // 15 s start_timeout
    let (result, took) = std::thread::scope(|s| {
        let start = s.spawn(|| -> Started {
            let r = reg.get_or_start("stop-connect", &url);
            (r, Instant::now())
        });
        let _peer = listener.accept().unwrap();
        assert_eq!(reg.tasks(), ["stop-connect"]);
        let t = Instant::now();
        assert!(reg.stop("stop-connect"), "a start in progress counts");
        let (result, returned) = start.join().unwrap();
        (result, returned - t)
    });
    eprintln!("stop while connecting to a silent peer -> the start returned after {took:?}");
    assert_stopped(&result, "connecting", "the task was stopped");
    assert!(took < Duration::from_millis(500), "took {took:?}");
    assert!(reg.tasks().is_empty() && reg.get("stop-connect").is_none());
}

#[test]
fn a_stop_cuts_short_the_start_and_every_caller_waiting_for_it_but_not_the_callers_token() {
    let fake = FakeBrowser::start().unwrap();
    fake.set_rule("Target.attachToTarget", Rule::Ignore);
    let reg = registry(); // 15 s start_timeout
    let own = CancelToken::new();
    let (first, second, took) = std::thread::scope(|s| {
        let first = s.spawn(|| -> Started {
            let r = reg.start(StartRequest::new("stop-many", &fake.ws_url()).with_cancel(&own));
            (r, Instant::now())
        });
        fake.wait_for_command(|c| c["method"] == "Target.attachToTarget", WAIT)
            .expect("the first start is attaching");
        let second = std::thread::Builder::new()
            .name("qa-stop-waiter".into())
            .spawn_scoped(s, || -> Started {
                let r = reg.get_or_start("stop-many", &fake.ws_url());
                (r, Instant::now())
            })
            .unwrap();
        let waiting = crate::common::wait_until(WAIT, || {
            (thread_state("qa-stop-waiter") == Some('S')).then_some(())
        });
        assert!(waiting.is_some(), "the second caller never waited");
        let t = Instant::now();
        assert!(reg.stop("stop-many"));
        let (a, at) = first.join().unwrap();
        let (b, bt) = second.join().unwrap();
        (a, b, at.max(bt) - t)
    });
    eprintln!("stop with a start and a caller waiting for it -> both returned after {took:?}");
    assert_stopped(&first, "attaching", "the task was stopped");
    assert_stopped(
        &second,
        "waiting for another caller's start",
        "the task was stopped",
    );
    assert!(took < Duration::from_millis(500), "took {took:?}");
    assert!(
        !own.is_cancelled(),
        "the stop cancels the start, not the caller's token"
    );
    assert_eq!(fake.accepted_count(), 1, "the waiter did not start again");
    assert!(
        fake.wait_for_connections(0, WAIT),
        "the start's connection is closed"
    );
    assert!(reg.tasks().is_empty());
    assert_eq!(threads_named("cdp-reader-stop"), 0);
}

#[test]
fn a_closed_registry_cuts_its_starts_short_stops_its_tasks_and_refuses_new_starts() {
    let fake = FakeBrowser::start().unwrap();
    let reg = registry(); // 15 s start_timeout
    let live = reg.get_or_start("close-live", &fake.ws_url()).unwrap();
    fake.set_rule("Target.attachToTarget", Rule::Ignore);
    let (result, took) = std::thread::scope(|s| {
        let start = s.spawn(|| -> Started {
            let options = StartOptions::default().with_new_page(true);
            let r = reg
                .start(StartRequest::new("close-starting", &fake.ws_url()).with_options(options));
            (r, Instant::now())
        });
        // (The live task attached to PAGE-1 before.)
        fake.wait_for_command(
            |c| c["method"] == "Target.attachToTarget" && c["params"]["targetId"] == "PAGE-2",
            WAIT,
        )
        .expect("the start is attaching to the page it created");
        assert!(!reg.is_closed());
        let t = Instant::now();
        reg.close();
        let (result, returned) = start.join().unwrap();
        (result, returned.saturating_duration_since(t))
    });
    eprintln!("close with a start in progress -> the start returned after {took:?}");
    assert_stopped(&result, "attaching", "the registry was closed");
    assert!(took < Duration::from_secs(1), "took {took:?}");
    assert!(reg.is_closed());
    assert!(!live.is_alive(), "the live task was stopped");
    assert!(reg.tasks().is_empty() && reg.get("close-live").is_none());
    fake.clear_rule("Target.attachToTarget");
    let accepted = fake.accepted_count();
    let refused = [
        reg.get_or_start("close-live", &fake.ws_url()),
        reg.start(StartRequest::new("new", &fake.ws_url())),
        reg.start(StartRequest::new("new", &fake.ws_url()).with_timeout(Duration::from_secs(1))),
        reg.start(StartRequest::new("new", &fake.ws_url()).with_cancel(&CancelToken::new())),
    ];
    for r in refused {
        match r {
            Err(e @ Error::RegistryClosed(_)) => {
                let m = e.to_string();
                assert!(
                    m.contains("closed") && m.contains("make a new registry"),
                    "{m}"
                );
            }
            other => panic!("a closed registry started a task: {other:?}"),
        }
    }
    assert_eq!(
        fake.accepted_count(),
        accepted,
        "no connection after the close"
    );
    assert!(!reg.stop("new") && reg.tasks().is_empty());
    reg.close(); // idempotent
    assert!(fake.wait_for_connections(0, WAIT));
    assert_eq!(
        fake.page_target_ids(),
        ["PAGE-1"],
        "the start's page was closed"
    );
}

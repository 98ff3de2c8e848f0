//! The registry's start/stop bookkeeping on the fake browser.

use super::*;
use crate::fake::{FakeBrowser, Rule};
use crate::{StartOptions, StartRequest};
use std::time::Instant;

const WAIT: Duration = Duration::from_secs(5);

/// A start whose attach is held back by the fake, and `stop` called meanwhile: the stop cuts
/// the start short (it returns at once, cancelled, whether or not the attach would have come).
fn stop_during_start(answer_late: bool) {
    let fake = FakeBrowser::start().unwrap();
    let rule = if answer_late {
        Rule::Delay(Duration::from_millis(300), Box::new(Rule::Default))
    } else {
        Rule::Ignore
    };
    fake.set_rule("Target.getTargets", rule);
    let reg = SupervisorRegistry::new(
        Config::default()
            .with_start_timeout(Duration::from_secs(10))
            .unwrap(),
    );
    std::thread::scope(|s| {
        let start = s.spawn(|| {
            let r = reg.get_or_start("t", &fake.ws_url());
            (r, Instant::now())
        });
        fake.wait_for_command(|c| c["method"] == "Target.getTargets", WAIT)
            .expect("the start is attaching");
        assert_eq!(reg.tasks(), ["t"], "a starting task has a slot");
        let stopped_at = Instant::now();
        assert!(reg.stop("t"), "a start in progress counts as a supervisor");
        assert!(reg.tasks().is_empty());
        let (result, returned) = start.join().unwrap();
        let took = returned - stopped_at;
        match &result {
            Err(e @ Error::StartCancelled { task_id, during }) => {
                assert_eq!(task_id, "t");
                assert!(during.contains("the task was stopped"), "{e}");
            }
            _ => panic!("the stop must win: {result:?}"),
        }
        assert!(took < Duration::from_millis(500), "took {took:?}");
    });
    assert!(reg.get("t").is_none(), "no zombie published");
    assert!(reg.snapshot("t").is_none());
    assert!(reg.tasks().is_empty());
    assert!(
        fake.wait_for_connections(0, WAIT),
        "the lost start stopped its own supervisor"
    );
    // The task starts again normally.
    fake.clear_rule("Target.getTargets");
    let sup = reg.get_or_start("t", &fake.ws_url()).unwrap();
    assert!(sup.is_active());
    assert!(Arc::ptr_eq(&reg.get("t").unwrap(), &sup));
}

#[test]
fn a_stop_during_a_start_that_would_succeed_cuts_it_short_and_publishes_nothing() {
    stop_during_start(true);
}

#[test]
fn a_stop_during_a_start_that_would_fail_cuts_it_short_and_leaves_no_slot() {
    stop_during_start(false);
}

#[test]
fn a_stop_between_attach_and_publish_publishes_nothing() {
    let fake = FakeBrowser::start().unwrap();
    let reg = SupervisorRegistry::new(Config::default());
    let sup =
        Supervisor::start(StartRequest::new("t", &fake.ws_url()), &Config::default()).unwrap();
    // A slot as a start makes it, then the stop, then the publish.
    let (done_tx, done_rx) = bounded::<()>(0);
    let cancel = CancelToken::new();
    let ticket = {
        let mut slots = reg.lock();
        let ticket = slots.next_ticket;
        slots.next_ticket += 1;
        slots.tasks.insert(
            "t".into(),
            Slot {
                current: None,
                starting: Some(Starting {
                    ticket,
                    done: done_rx,
                    cancel: cancel.clone(),
                    stopped: Arc::default(),
                    claim: None,
                }),
            },
        );
        ticket
    };
    let guard = StartGuard {
        registry: &reg,
        task_id: "t",
        ticket,
        cancel: cancel.clone(),
        _done: done_tx,
    };
    assert!(reg.stop("t"));
    assert!(
        cancel.is_cancelled(),
        "the stop cancelled the start's token"
    );
    match guard.publish(Arc::clone(&sup), true) {
        Err(Error::StartCancelled { during, .. }) => {
            assert_eq!(during, "finishing (the task was stopped)")
        }
        other => panic!("{other:?}"),
    }
    assert!(
        !sup.is_alive(),
        "the start that lost stopped its supervisor"
    );
    assert!(reg.get("t").is_none() && reg.tasks().is_empty());
}

#[test]
fn a_failed_start_leaves_no_slot() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let reg = SupervisorRegistry::new(Config::default());
    let refused = reg.get_or_start("t", &format!("ws://127.0.0.1:{port}/devtools/browser/x"));
    assert!(matches!(refused, Err(Error::Connect { .. })), "{refused:?}");
    assert!(reg.tasks().is_empty() && reg.get("t").is_none());
}

#[test]
fn a_start_within_a_shorter_timeout_fails_at_that_timeout() {
    let fake = FakeBrowser::start().unwrap();
    fake.set_rule("Target.getTargets", Rule::Ignore);
    let reg = SupervisorRegistry::new(Config::default());
    let started = Instant::now();
    let r =
        reg.start(StartRequest::new("t", &fake.ws_url()).with_timeout(Duration::from_millis(300)));
    assert!(
        matches!(r, Err(Error::StartTimeout(d, _)) if d == Duration::from_millis(300)),
        "{r:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(reg.tasks().is_empty());
    let zero = reg.start(StartRequest::new("t", &fake.ws_url()).with_timeout(Duration::ZERO));
    assert!(matches!(zero, Err(Error::Config { .. })), "{zero:?}");
    fake.clear_rule("Target.getTargets");
    let sup = reg
        .start(StartRequest::new("t", &fake.ws_url()).with_timeout(WAIT))
        .unwrap();
    assert_eq!(sup.config().start_timeout(), WAIT);
    let again = reg.get_or_start("t", &fake.ws_url()).unwrap();
    assert!(
        Arc::ptr_eq(&sup, &again),
        "the live supervisor is returned as it is"
    );
}

#[test]
fn callers_wait_for_a_start_in_progress_and_share_its_supervisor() {
    let fake = FakeBrowser::start().unwrap();
    fake.set_rule(
        "Target.getTargets",
        Rule::Delay(Duration::from_millis(200), Box::new(Rule::Default)),
    );
    let reg = SupervisorRegistry::new(Config::default());
    let sups: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| s.spawn(|| reg.get_or_start("t", &fake.ws_url()).unwrap()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(sups.iter().all(|s| Arc::ptr_eq(s, &sups[0])));
    assert_eq!(fake.accepted_count(), 1, "one start, one connection");
}

/// `Duration::MAX` is "no bound" wherever a wait takes a duration: no `Instant` overflow, and
/// the waits end when what they wait for happens.
#[test]
fn waits_without_a_bound_end_when_what_they_wait_for_happens() {
    let fake = FakeBrowser::start().unwrap();
    fake.set_rule(
        "Target.getTargets",
        Rule::Delay(Duration::from_millis(200), Box::new(Rule::Default)),
    );
    let reg = SupervisorRegistry::new(Config::default());
    // Two callers start the task without a bound: one starts it, the other waits for that
    // start (its wait is bounded by twice the start timeout, here none).
    let (a, b) = std::thread::scope(|s| {
        let start = || {
            reg.start(StartRequest::new("t", &fake.ws_url()).with_timeout(Duration::MAX))
                .unwrap()
        };
        let a = s.spawn(start);
        let b = s.spawn(start);
        (a.join().unwrap(), b.join().unwrap())
    });
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(a.config().start_timeout(), Duration::MAX);
    let sup = a;
    let waited = std::thread::scope(|s| {
        let waiter =
            s.spawn(|| sup.wait_for(Duration::MAX, |snap| !snap.pending_dialogs.is_empty()));
        fake.open_dialog("alert", "now", "");
        waiter.join().unwrap()
    });
    let snap = waited.expect("the wait ends with the dialog");
    assert_eq!(snap.pending_dialogs[0].message, "now");
    assert!(sup.wait_for_dialog(Duration::MAX).is_some());
    // And ends at once, unmatched, once the supervisor has ended.
    reg.stop("t");
    assert!(sup.wait_for(Duration::MAX, |_| false).is_none());
    // The fake's waits too.
    assert!(fake.wait_for_connections(0, Duration::MAX));
    assert!(
        fake.wait_for_command(
            |c| c["method"] == "Page.handleJavaScriptDialog",
            Duration::MAX
        )
        .is_some(),
        "the stop dismissed the pending dialog"
    );
}

#[test]
fn a_task_dialog_timeout_out_of_bounds_is_refused_before_starting() {
    let fake = FakeBrowser::start().unwrap();
    let reg = SupervisorRegistry::new(Config::default());
    for t in [Duration::ZERO, Duration::MAX] {
        let options = StartOptions::default().with_dialog_timeout(t);
        let r = reg.start(StartRequest::new("t", &fake.ws_url()).with_options(options));
        assert!(
            matches!(&r, Err(Error::Config { key, .. }) if key == "dialog_timeout_s"),
            "{r:?}"
        );
    }
    assert_eq!(fake.accepted_count(), 0, "nothing was started");
    assert!(reg.tasks().is_empty());
}

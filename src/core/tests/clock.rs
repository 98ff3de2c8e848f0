//! Time in the core: timestamps and purges come from the time passed in.

use super::*;

// --- time in the core

/// Console entries carry the time of the message that logged them.
#[test]
fn console_entries_are_stamped_with_the_time_passed_in() {
    let mut sim = Sim::must_respond();
    sim.advance(1234);
    sim.event(
        Some(S1),
        "Runtime.consoleAPICalled",
        json!({"type": "error", "args": [{"type": "string", "value": "boom"}]}),
    );
    let snap = sim.snap();
    assert_eq!(snap.console_errors.len(), 1);
    assert_eq!(snap.console_errors[0].ts, sim.now.epoch);
    assert_eq!(snap.console_errors[0].text, "boom");
}

/// Once the call table is large, a registration purges the calls whose callers gave up: by the
/// time passed in, not the wall clock.
#[test]
fn abandoned_calls_are_purged_by_the_time_passed_in() {
    let mut sim = Sim::must_respond();
    let expires = Deadline::from_start(sim.now.instant, Duration::from_secs(1));
    let mut first = None;
    // Calls nobody waits on (the page's isolate probe) are never purged.
    let kept = sim.core.calls.len();
    // The table already holds the attach calls; fill it to a power of two past PURGE_EVERY.
    while sim.core.calls.len() < PURGE_EVERY {
        let (tx, rx) = bounded(1);
        sim.register_call(PendingCall {
            method: "Runtime.evaluate".into(),
            session_id: Some(S1.into()),
            kind: CallKind::Plain,
            reply: Some(tx),
            expires,
        });
        first.get_or_insert(rx);
    }
    let first = first.unwrap();
    // Just before the deadline: nothing is purged.
    sim.advance(999);
    sim.register("Browser.getVersion", None, CallKind::Plain);
    assert_eq!(sim.core.calls.len(), PURGE_EVERY + 1);
    nothing_yet(&first);
    // Grow to the next power of two, then reach the deadline: those callers have given up.
    while !sim.core.calls.len().is_power_of_two() {
        sim.register("Browser.getVersion", None, CallKind::Plain);
    }
    assert_eq!(sim.core.calls.len(), 2 * PURGE_EVERY);
    sim.advance(1);
    sim.register("Browser.getVersion", None, CallKind::Plain);
    assert_eq!(sim.core.calls.len(), PURGE_EVERY + 1 + kept);
    assert!(matches!(first.try_recv(), Err(TryRecvError::Disconnected)));
}

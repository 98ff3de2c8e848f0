//! The registry's per-thread read cache never serves the wrong supervisor: a task stopped and
//! started again, two registries with the same task id on one thread, a read nested inside
//! `with_snapshot`, and another thread that filled its cache before the change.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use cdp_supervisor::fake::FakeBrowser;
use cdp_supervisor::{Config, SupervisorRegistry};

const WAIT: Duration = Duration::from_secs(5);

/// A fake browser with one alert open on its page, and one without.
fn fakes() -> (FakeBrowser, FakeBrowser) {
    let with_dialog = FakeBrowser::start().unwrap();
    let without = FakeBrowser::start().unwrap();
    (with_dialog, without)
}

fn pending(reg: &SupervisorRegistry, task: &str) -> Option<usize> {
    reg.snapshot(task).map(|s| s.pending_dialogs.len())
}

#[test]
fn a_task_started_again_reads_the_new_supervisor() {
    let (a, b) = fakes();
    let reg = SupervisorRegistry::new(Config::default());
    let sup = reg.get_or_start("t", &a.ws_url()).unwrap();
    a.open_dialog("alert", "on a", "");
    sup.wait_for_dialog(WAIT).unwrap();
    assert_eq!(pending(&reg, "t"), Some(1));
    assert_eq!(reg.with_snapshot("t", |s| s.pending_dialogs.len()), Some(1));

    assert!(reg.stop("t"));
    assert_eq!(pending(&reg, "t"), None, "a stopped task has no snapshot");
    assert!(reg.with_snapshot("t", |_| ()).is_none());

    let sup_b = reg.get_or_start("t", &b.ws_url()).unwrap();
    let snap = reg.snapshot("t").unwrap();
    assert_eq!(
        snap.pending_dialogs.len(),
        0,
        "the old supervisor's state was served"
    );
    assert_eq!(snap.cdp_url, b.ws_url());
    assert_eq!(snap.version, sup_b.snapshot().version);
    // And it follows the new supervisor's publishes.
    b.open_dialog("alert", "on b", "");
    sup_b.wait_for_dialog(WAIT).unwrap();
    assert_eq!(pending(&reg, "t"), Some(1));
    reg.stop_all();
}

#[test]
fn two_registries_with_the_same_task_id_on_one_thread_stay_apart() {
    let (a, b) = fakes();
    let reg_a = SupervisorRegistry::new(Config::default());
    let reg_b = SupervisorRegistry::new(Config::default());
    let sup_a = reg_a.get_or_start("same", &a.ws_url()).unwrap();
    reg_b.get_or_start("same", &b.ws_url()).unwrap();
    a.open_dialog("alert", "only on a", "");
    sup_a.wait_for_dialog(WAIT).unwrap();
    for _ in 0..1000 {
        assert_eq!(pending(&reg_a, "same"), Some(1));
        assert_eq!(pending(&reg_b, "same"), Some(0));
        assert_eq!(
            reg_b.with_snapshot("same", |s| s.cdp_url.clone()),
            Some(b.ws_url())
        );
    }
    reg_a.stop_all();
    reg_b.stop_all();
}

#[test]
fn reads_nested_inside_with_snapshot_work() {
    let (a, b) = fakes();
    let reg = SupervisorRegistry::new(Config::default());
    reg.get_or_start("outer", &a.ws_url()).unwrap();
    reg.get_or_start("inner", &b.ws_url()).unwrap();
    let got = reg.with_snapshot("outer", |outer| {
        let inner = reg.snapshot("inner").unwrap();
        let inner_url = reg.with_snapshot("inner", |s| s.cdp_url.clone()).unwrap();
        let again = reg.snapshot("outer").unwrap();
        (
            outer.cdp_url.clone(),
            inner.cdp_url.clone(),
            inner_url,
            again.cdp_url.clone(),
        )
    });
    assert_eq!(got, Some((a.ws_url(), b.ws_url(), b.ws_url(), a.ws_url())));
    // The outer read's cache entry is still usable afterwards.
    assert_eq!(reg.snapshot("outer").unwrap().cdp_url, a.ws_url());
    reg.stop_all();
}

#[test]
fn another_thread_with_a_filled_cache_sees_the_replacement() {
    let (a, b) = fakes();
    let reg = Arc::new(SupervisorRegistry::new(Config::default()));
    reg.get_or_start("t", &a.ws_url()).unwrap();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (seen_tx, seen_rx) = mpsc::channel::<Option<String>>();
    let reader = {
        let reg = Arc::clone(&reg);
        std::thread::spawn(move || {
            for _ in 0..100 {
                // Twice: the second read in a row of the same task fills the cache entry.
                let _ = reg.snapshot("t");
                seen_tx
                    .send(reg.snapshot("t").map(|s| s.cdp_url.clone()))
                    .unwrap();
                if go_rx.recv_timeout(WAIT).is_err() {
                    return;
                }
            }
        })
    };
    // The reader's cache now names the supervisor on `a`.
    assert_eq!(seen_rx.recv_timeout(WAIT).unwrap(), Some(a.ws_url()));
    // Stopped: the reader's next read must not find it.
    reg.stop("t");
    go_tx.send(()).unwrap();
    assert_eq!(seen_rx.recv_timeout(WAIT).unwrap(), None);
    // Started again elsewhere: the reader's next read finds the new one.
    reg.get_or_start("t", &b.ws_url()).unwrap();
    go_tx.send(()).unwrap();
    assert_eq!(seen_rx.recv_timeout(WAIT).unwrap(), Some(b.ws_url()));
    drop(go_tx);
    reader.join().unwrap();
    reg.stop_all();
}

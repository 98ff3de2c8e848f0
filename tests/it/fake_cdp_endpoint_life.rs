//! The task's CDP endpoint through a dropped connection, a reconnect and the task's end, on the
//! fake browser (issue 30 point 7): calls in flight fail, each lost session is detached (children
//! first), the clients get new browser sessions with their discovery and auto-attach replayed,
//! and a stop or a death closes them with 1001 and the reason, leaving no thread and no socket.

use std::time::{Duration, Instant};

use cdp_supervisor::fake::{FakeBrowser, Rule};
use cdp_supervisor::{Config, SupervisorRegistry, SupervisorState};
use serde_json::{Value, json};

use crate::common::{self, RawCdp};

const WAIT: Duration = Duration::from_secs(10);

/// Threads of this process whose name starts with `prefix`.
pub fn threads_named(prefix: &str) -> usize {
    threads_where(|name| name.starts_with(prefix))
}

/// This process's threads whose name (as Linux keeps it: 15 bytes) passes `pred`.
fn threads_where(pred: impl Fn(&str) -> bool) -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                .filter(|n| pred(n.trim()))
                .count()
        })
        .unwrap_or(0)
}

/// The endpoint's threads serving connections and writing to clients (named after its port).
pub fn client_threads(port: u16) -> usize {
    let names = [format!("cdp-in-{port}"), format!("cdp-out-{port}")];
    threads_where(|name| names.iter().any(|want| name == want))
}

/// This process's TCP sockets on local `port` that are not listening (the endpoint's ends of
/// its clients' connections).
pub fn sockets_on(port: u16) -> usize {
    let inodes: std::collections::HashSet<String> = std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter_map(|l| {
                    let l = l.to_string_lossy().to_string();
                    Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
                })
                .collect()
        })
        .unwrap_or_default();
    let mut n = 0;
    for file in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state), Some(inode)) = (f.get(1), f.get(3), f.get(9)) else {
                continue;
            };
            let lport = local
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            if lport == Some(port) && *state != "0A" && inodes.contains(*inode) {
                n += 1;
            }
        }
    }
    n
}

/// The port of a `ws://IP:PORT/...` URL.
pub fn port_of(ws_url: &str) -> u16 {
    let rest = ws_url.strip_prefix("ws://").expect("a ws URL");
    let authority = rest.split('/').next().unwrap();
    authority.rsplit(':').next().unwrap().parse().unwrap()
}

/// The messages `c` gets until one satisfies `last` (included), at most [`WAIT`].
pub fn until(c: &mut RawCdp, what: &str, mut last: impl FnMut(&Value) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + WAIT;
    let mut got = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match c.next_message(left) {
            Ok(Some(m)) => {
                let done = last(&m);
                got.push(m);
                if done {
                    return got;
                }
            }
            other => panic!("{what}: {other:?} after {got:#?}"),
        }
    }
}

/// Awaits `threads` client threads and `sockets` sockets on the endpoint's `port`. Awaited, not
/// read once: the listener's port is an ephemeral one another test's browser or client may have
/// used before, and a late connection of theirs is served (and ended) by a thread of ours.
pub fn settled(port: u16, threads: usize, sockets: usize) {
    let mut last = (0, 0);
    common::wait_until(WAIT, || {
        last = (client_threads(port), sockets_on(port));
        (last == (threads, sockets)).then_some(())
    })
    .unwrap_or_else(|| {
        panic!(
            "{} client threads and {} sockets on port {port}, not {threads} and {sockets}",
            last.0, last.1
        )
    });
}

/// How a client's connection ended: waits for its close.
pub fn closed(c: &mut RawCdp) -> String {
    common::wait_until(WAIT, || c.next_message(Duration::from_millis(200)).err())
        .expect("the client's connection closed")
}

/// `method@session` of each message that is an event (`-`: browser level).
fn events(msgs: &[Value]) -> Vec<String> {
    msgs.iter()
        .filter_map(|m| {
            let method = m["method"].as_str()?;
            let at = m["sessionId"].as_str().unwrap_or("-");
            let of = m["params"]["sessionId"].as_str().map(|s| format!("({s})"));
            Some(format!("{method}{}@{at}", of.unwrap_or_default()))
        })
        .collect()
}

fn config(attempts: u32, backoff: Duration) -> Config {
    Config::default()
        .with_reconnect_attempts(attempts)
        .unwrap()
        .with_reconnect_backoff(backoff)
}

#[test]
fn clients_survive_a_dropped_connection_and_a_stop_leaves_no_thread_or_socket() {
    let fake = FakeBrowser::start().unwrap();
    // A command the fake never answers: in flight when the connection drops.
    fake.set_rule("DOM.getDocument", Rule::Ignore);
    let reg = SupervisorRegistry::new(config(5, Duration::from_millis(300)));
    let sup = reg.get_or_start("lf-drop", &fake.ws_url()).expect("start");
    let page = sup.snapshot().page_target_id.clone().expect("its page");
    let ep = reg.cdp_endpoint("lf-drop").expect("the endpoint");
    let port = port_of(&ep.ws_url);
    settled(port, 0, 0);

    // A discovers and auto-attaches; B attaches by hand, and a child comes under its session.
    let mut a = RawCdp::connect(&ep.ws_url).expect("client A");
    let mut b = RawCdp::connect(&ep.ws_url).expect("client B");
    let discover = json!({"discover": true});
    let auto = json!({"autoAttach": true, "waitForDebuggerOnStart": false, "flatten": true});
    a.call("Target.setDiscoverTargets", discover.clone(), None, WAIT)
        .expect("discover");
    a.call("Target.setAutoAttach", auto.clone(), None, WAIT)
        .expect("auto-attach");
    let att = a
        .wait_event("Target.attachedToTarget", None, WAIT)
        .expect("A is attached to the task's page");
    assert_eq!(att["params"]["targetInfo"]["targetId"], page.as_str());
    let sa = att["params"]["sessionId"].as_str().unwrap().to_string();
    let sb = b.attach(&page).expect("B attaches");
    let child = json!({
        "sessionId": "CHILD-1",
        "targetInfo": {"targetId": "FRAME-1", "type": "iframe", "title": "", "url": "about:blank",
                       "attached": true, "canAccessOpener": false},
        "waitingForDebugger": false,
    });
    fake.emit(Some(&sb), "Target.attachedToTarget", child);
    b.wait_event("Target.attachedToTarget", Some(&sb), WAIT)
        .expect("the child under B's session");
    let in_flight = b
        .send_command("DOM.getDocument", json!({}), Some(&sb))
        .unwrap();
    fake.wait_for_command(|c| c["method"] == "DOM.getDocument", WAIT)
        .expect("the call went upstream");
    a.clear_events();
    b.clear_events();
    // A reader and a writer per client.
    settled(port, 4, 2);

    // The connection drops.
    let t = Instant::now();
    fake.drop_connections();
    let got = until(&mut b, "B's detach", |m| {
        m["method"] == "Target.detachedFromTarget" && m["params"]["sessionId"] == sb.as_str()
    });
    let failed = got
        .iter()
        .find(|m| m["id"] == in_flight)
        .expect("the call in flight got a reply");
    let failed_in = t.elapsed();
    let err = failed["error"]["message"].as_str().unwrap();
    assert!(err.contains("connection to the browser ended"), "{err}");
    assert_eq!(failed["sessionId"], sb.as_str(), "{failed}");
    assert_eq!(
        events(&got),
        [
            "Inspector.detached@CHILD-1".to_string(),
            format!("Target.detachedFromTarget(CHILD-1)@{sb}"),
            format!("Inspector.detached@{sb}"),
            format!("Target.detachedFromTarget({sb})@-"),
        ],
        "children first, each detach on its parent's session: {got:#?}"
    );
    assert_eq!(got[0]["id"], in_flight, "the reply before the detaches");
    let got = until(&mut a, "A's detach", |m| {
        m["method"] == "Target.detachedFromTarget"
    });
    assert_eq!(
        events(&got),
        [
            format!("Inspector.detached@{sa}"),
            format!("Target.detachedFromTarget({sa})@-")
        ]
    );
    eprintln!("the call in flight failed {failed_in:?} after the drop");

    // While the task reconnects: browser-level commands fail saying so; old sessions are gone.
    let err = b
        .call("Target.getTargets", json!({}), None, WAIT)
        .expect_err("no browser session yet");
    assert!(err.contains("being made again"), "{err}");
    let err = b
        .call(
            "Runtime.evaluate",
            json!({"expression": "1"}),
            Some(&sb),
            WAIT,
        )
        .expect_err("the old session is gone");
    assert!(err.contains("Session with given id not found"), "{err}");

    // Back: A is attached again by its replayed auto-attach and hears of the page again; B
    // attaches again.
    sup.wait_for(WAIT, |s| s.state == SupervisorState::Active)
        .expect("active again");
    let again = a
        .wait_event("Target.attachedToTarget", None, WAIT)
        .expect("A is attached again");
    assert_eq!(again["params"]["targetInfo"]["targetId"], page.as_str());
    let sa2 = again["params"]["sessionId"].as_str().unwrap().to_string();
    assert_ne!(sa2, sa);
    let back_in = t.elapsed();
    let v = a
        .call(
            "Runtime.evaluate",
            json!({"expression": "1"}),
            Some(&sa2),
            WAIT,
        )
        .expect("A evaluates on its new session");
    assert_eq!(v["result"]["value"], "fake");
    let created = a
        .wait_event("Target.targetCreated", None, WAIT)
        .expect("A's discovery, replayed");
    assert_eq!(created["params"]["targetInfo"]["targetId"], page.as_str());
    let replayed: Vec<Value> = fake
        .received()
        .into_iter()
        .filter(|c| c["sessionId"].is_string() && (c["params"] == discover || c["params"] == auto))
        .collect();
    assert_eq!(
        replayed.len(),
        4,
        "twice each, on A's two browser sessions: {replayed:#?}"
    );
    assert_eq!(replayed[2]["params"], discover);
    assert_eq!(replayed[3]["params"], auto);
    assert_ne!(replayed[0]["sessionId"], replayed[2]["sessionId"]);
    let sb2 = common::wait_until(WAIT, || b.attach(&page).ok()).expect("B attaches again");
    let v = b
        .call(
            "Runtime.evaluate",
            json!({"expression": "1"}),
            Some(&sb2),
            WAIT,
        )
        .expect("B evaluates on its new session");
    assert_eq!(v["result"]["value"], "fake");
    eprintln!("A was attached again {back_in:?} after the drop");

    // The stop: a close frame with the reason, and nothing left.
    reg.stop("lf-drop");
    for (name, c) in [("A", &mut a), ("B", &mut b)] {
        let end = closed(c);
        assert!(
            end.contains("Away") && end.contains("the task stopped"),
            "{name}: {end}"
        );
    }
    settled(port, 0, 0);
}

#[test]
fn clients_are_closed_with_the_reason_when_the_task_dies() {
    let fake = FakeBrowser::start().unwrap();
    // No reconnect: a drop ends the task.
    let reg = SupervisorRegistry::new(config(0, Duration::from_millis(50)));
    let sup = reg.get_or_start("lf-dies", &fake.ws_url()).expect("start");
    let page = sup.snapshot().page_target_id.clone().expect("its page");
    let ep = reg.cdp_endpoint("lf-dies").expect("the endpoint");
    let port = port_of(&ep.ws_url);
    let mut a = RawCdp::connect(&ep.ws_url).expect("client A");
    let mut b = RawCdp::connect(&ep.ws_url).expect("client B");
    let sa = a.attach(&page).expect("A attaches");
    a.clear_events();
    settled(port, 4, 2); // a reader and a writer per client

    fake.drop_connections();
    let got = until(&mut a, "A's detach", |m| {
        m["method"] == "Target.detachedFromTarget"
    });
    assert_eq!(
        events(&got),
        [
            format!("Inspector.detached@{sa}"),
            format!("Target.detachedFromTarget({sa})@-")
        ]
    );
    let dead = sup
        .wait_for(WAIT, |s| matches!(s.state, SupervisorState::Dead { .. }))
        .expect("the task died");
    let SupervisorState::Dead { reason } = &dead.state else {
        unreachable!()
    };
    for (name, c) in [("A", &mut a), ("B", &mut b)] {
        let end = closed(c);
        assert!(
            end.contains("Away") && end.contains("the task ended"),
            "{name}: {end} (the task: {reason})"
        );
    }
    settled(port, 0, 0);
}

/// Issue 30 point 5 through a reconnect: the pages a client created (`Target.createTarget`)
/// join its task and are followed like popups; after the task's connection drops and is made
/// again, those that still exist are followed again (a dialog in one is pending in the task's
/// snapshot, with its target), and one closed meanwhile is tried once and then forgotten.
#[test]
fn pages_a_client_created_are_followed_again_after_a_reconnect() {
    let fake = FakeBrowser::start().unwrap();
    let reg = SupervisorRegistry::new(config(5, Duration::from_millis(100)));
    let sup = reg
        .get_or_start("lf-created", &fake.ws_url())
        .expect("start");
    let ep = reg.cdp_endpoint("lf-created").expect("the endpoint");
    let mut a = RawCdp::connect(&ep.ws_url).expect("client A");
    let mut create = |url: &str| {
        a.call("Target.createTarget", json!({ "url": url }), None, WAIT)
            .expect("createTarget")["targetId"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let kept = create("http://kept.test/");
    let closed = create("http://closed.test/");
    let follows = |s: &cdp_supervisor::Snapshot, t: &str| s.pages.iter().any(|p| p.target_id == t);
    sup.wait_for(WAIT, |s| follows(s, &kept) && follows(s, &closed))
        .expect("the task follows both");
    // Closed behind the task's back (the fake says nothing of it).
    a.call(
        "Target.closeTarget",
        json!({ "targetId": closed }),
        None,
        WAIT,
    )
    .expect("closeTarget");
    let attaches = |t: &str| {
        (fake.received().iter())
            .filter(|c| c["method"] == "Target.attachToTarget" && c["params"]["targetId"] == t)
            .count()
    };
    assert_eq!((attaches(&kept), attaches(&closed)), (1, 1));

    let drop_and_return = || {
        fake.drop_connections();
        sup.wait_for(WAIT, |s| s.state != SupervisorState::Active)
            .expect("the drop is seen");
        sup.wait_for(WAIT, |s| s.state == SupervisorState::Active)
            .expect("active again");
    };
    drop_and_return();
    let s = sup
        .wait_for(WAIT, |s| follows(s, &kept))
        .expect("the page still there is followed again");
    assert!(!follows(&s, &closed), "the closed page is not");
    let sessions = fake.sessions_on(&kept);
    assert_eq!(
        sessions.len(),
        1,
        "the task's one session on it: {sessions:?}"
    );
    let dialog = json!({
        "url": "http://kept.test/",
        "frameId": kept,
        "message": "after the reconnect",
        "type": "alert",
        "hasBrowserHandler": false,
        "defaultPrompt": "",
    });
    fake.emit(Some(&sessions[0]), "Page.javascriptDialogOpening", dialog);
    let s = sup
        .wait_for(WAIT, |s| !s.pending_dialogs.is_empty())
        .expect("the dialog is caught");
    assert_eq!(s.pending_dialogs[0].message, "after the reconnect");
    assert_eq!(s.pending_dialogs[0].target_id, kept);
    fake.emit(
        Some(&sessions[0]),
        "Page.javascriptDialogClosed",
        json!({"result": true, "userInput": ""}),
    );
    sup.wait_for(WAIT, |s| s.pending_dialogs.is_empty())
        .expect("closed");
    // Every reply before this one has been read: the failed attach of the closed page too.
    sup.call(
        "Browser.getVersion",
        json!({}),
        cdp_supervisor::Route::Browser,
        WAIT,
    )
    .expect("a round trip");
    assert_eq!(
        (attaches(&kept), attaches(&closed)),
        (2, 2),
        "each tried again"
    );

    drop_and_return();
    sup.wait_for(WAIT, |s| follows(s, &kept))
        .expect("followed again after a second reconnect");
    assert_eq!(
        (attaches(&kept), attaches(&closed)),
        (3, 2),
        "the closed page was forgotten after its attach failed"
    );
    reg.stop("lf-created");
}

/// A client whose browser session was being opened when the task's connection dropped is told
/// at once, not at its attach's 10 s limit: the reader fails the calls written on the old
/// connection before it makes the new one (they were still in its registration channel, on a
/// connection where nothing else came).
#[test]
fn a_client_opening_its_session_when_the_connection_drops_is_closed_at_once() {
    let fake = FakeBrowser::start().unwrap();
    let reg = SupervisorRegistry::new(config(5, Duration::from_millis(100)));
    let sup = reg
        .get_or_start("lf-opening", &fake.ws_url())
        .expect("start");
    let ep = reg.cdp_endpoint("lf-opening").expect("the endpoint");
    fake.set_rule("Target.attachToBrowserTarget", Rule::Ignore);
    let mut a = RawCdp::connect(&ep.ws_url).expect("client A (upgraded; its session opening)");
    fake.wait_for_command(|m| m["method"] == "Target.attachToBrowserTarget", WAIT)
        .expect("the client's session is being opened");
    let t0 = Instant::now();
    fake.drop_connections();
    let r = a.call("Browser.getVersion", json!({}), None, WAIT);
    let took = t0.elapsed();
    assert!(r.is_err(), "{r:?}");
    assert!(
        took < Duration::from_secs(3),
        "closed {took:?} after the drop (the attach's limit is 10 s): {r:?}"
    );
    sup.wait_for(WAIT, |s| s.state == SupervisorState::Active)
        .expect("the task is back");
    reg.stop("lf-opening");
}

//! Page connections through the task's CDP endpoint (`src/cdp_endpoint/mux/page.rs`) on the
//! scripted fake browser: `/json/list` names each page's WebSocket; a client there is carried on
//! a session of its own on the page (under a browser session it is never shown), its commands
//! without `sessionId` go to the page and come back without one, the page's events too; the
//! Target domain on that root is screened to the task; the dialog rule holds; the client is
//! closed when its page's session goes, and its sessions are detached upstream when it leaves.

use std::sync::Arc;
use std::time::Instant;

use cdp_supervisor::fake::FakeBrowser;
use cdp_supervisor::unversioned::registry_without_popup_watcher;
use cdp_supervisor::{
    BridgeMode, Config, DialogPolicy, StartOptions, StartRequest, Supervisor, SupervisorRegistry,
    SupervisorState,
};
use serde_json::{Value, json};

use crate::common::RawCdp;
use crate::common::fakes::{WAIT, wait_pending};
use crate::e2e_cdp_endpoint::get;

/// The fake's default page (the task's).
const PAGE: &str = "PAGE-1";

struct Setup {
    fake: FakeBrowser,
    _reg: SupervisorRegistry,
    sup: Arc<Supervisor>,
    http: String,
}

fn setup() -> Setup {
    let fake = FakeBrowser::start().expect("fake browser");
    let reg = registry_without_popup_watcher(Config::default());
    let options = StartOptions::default()
        .with_dialog_bridge(BridgeMode::Off)
        .with_dialog_policy(DialogPolicy::MustRespond);
    let sup = reg
        .start(StartRequest::new("task", &fake.ws_url()).with_options(options))
        .expect("attach to the fake browser");
    let http = reg
        .cdp_endpoint("task")
        .expect("the task's endpoint")
        .http_url;
    Setup {
        fake,
        _reg: reg,
        sup,
        http,
    }
}

/// `/json/list`'s entries.
fn list(http: &str) -> Vec<Value> {
    let (status, body) = get(http, "/json/list", &[]);
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).expect("a JSON list")
}

/// The upstream session a page client's commands without `sessionId` went on: that of the
/// first upstream `method` whose `params.expression` is `marker`.
fn upstream_session(fake: &FakeBrowser, marker: &str) -> String {
    fake.wait_for_command(|c| c["params"]["expression"] == marker, WAIT)
        .and_then(|c| c["sessionId"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("{marker} never went upstream on a session"))
}

/// The page client's hidden browser session: the one its page was attached under.
fn browser_session_of_page_attach(fake: &FakeBrowser) -> String {
    fake.wait_for_command(
        |c| {
            c["method"] == "Target.attachToTarget"
                && c["params"]["targetId"] == PAGE
                && c["sessionId"].is_string()
        },
        WAIT,
    )
    .and_then(|c| c["sessionId"].as_str().map(str::to_string))
    .expect("the page attached under a browser session")
}

#[test]
fn a_page_client_talks_to_its_page_without_sessions_and_is_closed_when_the_page_goes() {
    let s = setup();
    let (fake, sup) = (&s.fake, &s.sup);

    // Discovery: the task's page, with the WebSocket of its page connection here.
    let entries = list(&s.http);
    let page = entries
        .iter()
        .find(|e| e["id"] == PAGE)
        .unwrap_or_else(|| panic!("the task's page is listed: {entries:?}"));
    let ws = page["webSocketDebuggerUrl"].as_str().expect("a page URL");
    let base = s.http.replacen("http://", "ws://", 1);
    assert_eq!(ws, format!("{base}/devtools/page/{PAGE}"));
    assert!(page.get("devtoolsFrontendUrl").is_none(), "{page}");
    let (_, body) = get(&s.http, "/json", &[]);
    assert!(body.contains(ws), "/json lists the same: {body}");

    // Unknown ids, and a page of the browser that is not the task's, are refused as Chromium
    // refuses an unknown id.
    let mut direct = RawCdp::connect(&fake.ws_url()).expect("straight to the fake");
    let other = direct.new_page("http://other.test/").expect("another page");
    assert!(!list(&s.http).iter().any(|e| e["id"] == other.as_str()));
    let upgrade = [
        ("Upgrade", "websocket"),
        ("Connection", "Upgrade"),
        ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ("Sec-WebSocket-Version", "13"),
    ];
    for id in ["NOPE", other.as_str(), ""] {
        let (status, body) = get(&s.http, &format!("/devtools/page/{id}"), &upgrade);
        assert_eq!(status, 500, "{id}: {body}");
        assert_eq!(body, format!("No such target id: {id}"));
    }
    // The Origin rule holds here too.
    let mut evil = upgrade.to_vec();
    evil.push(("Origin", "http://evil.example"));
    assert_eq!(
        get(&s.http, &format!("/devtools/page/{PAGE}"), &evil).0,
        403
    );

    // A page client: its commands without sessionId go on its own session on the page.
    let mut p = RawCdp::connect(ws).expect("a page client");
    let b = browser_session_of_page_attach(fake);
    let v = p
        .call(
            "Runtime.evaluate",
            json!({"expression": "'m1'"}),
            None,
            WAIT,
        )
        .expect("evaluate in the page");
    assert_eq!(v["result"]["value"], "fake");
    let root = upstream_session(fake, "'m1'");
    assert_ne!(root, b, "the page's session, not the browser's");
    assert_ne!(
        root,
        crate::common::fakes::page_session(sup),
        "not the supervisor's"
    );
    // Its reply came without sessionId (RawCdp::call matched it by id); its events too.
    fake.emit(
        Some(&root),
        "Runtime.consoleAPICalled",
        json!({"type": "log", "args": [{"type": "string", "value": "to p"}]}),
    );
    let e = p
        .wait_event("Runtime.consoleAPICalled", None, WAIT)
        .expect("the page's event, without sessionId");
    assert_eq!(e["params"]["args"][0]["value"], "to p");
    // Its hidden browser session is not its to use.
    let err = p
        .call("Target.getTargets", json!({}), Some(&b), WAIT)
        .expect_err("not its session");
    assert!(err.contains("Session with given id not found"), "{err}");

    // The Target domain on the root: getTargets narrowed to the task; a flat session it
    // attaches is its own, announced without sessionId; targetCreated screened to the task.
    let targets = p.call("Target.getTargets", json!({}), None, WAIT).unwrap();
    let ids = targets.to_string();
    assert!(ids.contains(PAGE) && !ids.contains(&other), "{ids}");
    let child = p.attach(PAGE).expect("attach from the page connection");
    let att = p
        .wait_event("Target.attachedToTarget", None, WAIT)
        .expect("attachedToTarget without sessionId");
    assert_eq!(att["params"]["sessionId"], child.as_str());
    let v = p
        .call(
            "Runtime.evaluate",
            json!({"expression": "'m2'"}),
            Some(&child),
            WAIT,
        )
        .unwrap();
    assert_eq!(v["result"]["value"], "fake");
    let err = p
        .call(
            "Target.attachToTarget",
            json!({"targetId": other}),
            None,
            WAIT,
        )
        .expect_err("another task's page");
    assert!(err.contains("isolate_tasks"), "{err}");
    for (id, url) in [
        (other.as_str(), "http://other.test/"),
        (PAGE, "http://fake.test/"),
    ] {
        let info = json!({"targetInfo": {"targetId": id, "type": "page", "title": "",
                          "url": url, "attached": false, "browserContextId": "CTX-1"}});
        fake.emit(Some(&root), "Target.targetCreated", info);
    }
    let created = p
        .wait_event("Target.targetCreated", None, WAIT)
        .expect("the task's page");
    assert_eq!(created["params"]["targetInfo"]["targetId"], PAGE);
    p.call(
        "Runtime.evaluate",
        json!({"expression": "'m3'"}),
        None,
        WAIT,
    )
    .unwrap();
    let seen = serde_json::to_string(&p.clear_events()).unwrap();
    assert!(!seen.contains(&other), "another task's page shown: {seen}");

    // A dialog: a later call into the page fails at once naming it; answering it passes.
    p.call("Page.enable", json!({}), None, WAIT).unwrap();
    fake.open_dialog("alert", "page says hi", "");
    wait_pending(sup, 1);
    let t = Instant::now();
    let err = p
        .call("Runtime.evaluate", json!({"expression": "1"}), None, WAIT)
        .expect_err("blocked by the dialog");
    assert!(err.contains("page says hi"), "{err}");
    assert!(t.elapsed() < WAIT / 5, "{:?}", t.elapsed());
    p.call(
        "Page.handleJavaScriptDialog",
        json!({"accept": true}),
        None,
        WAIT,
    )
    .expect("answering passes");
    let answered = fake
        .received()
        .into_iter()
        .find(|c| c["method"] == "Page.handleJavaScriptDialog")
        .expect("sent upstream");
    assert_eq!(
        answered["sessionId"],
        root.as_str(),
        "on the page client's session"
    );
    // Chromium tells every session of the page that it closed (the fake, the answering one).
    fake.emit(
        Some(&crate::common::fakes::page_session(sup)),
        "Page.javascriptDialogClosed",
        json!({"result": true, "userInput": ""}),
    );
    wait_pending(sup, 0);

    // A second page client leaves: its page session and its browser session are detached.
    let before = fake.received().len();
    let mut q = RawCdp::connect(ws).expect("a second page client");
    q.call(
        "Runtime.evaluate",
        json!({"expression": "'q1'"}),
        None,
        WAIT,
    )
    .unwrap();
    let q_root = upstream_session(fake, "'q1'");
    let q_browser = fake.received()[before..]
        .iter()
        .find(|c| c["method"] == "Target.attachToTarget")
        .and_then(|c| c["sessionId"].as_str().map(str::to_string))
        .expect("q's browser session");
    drop(q);
    for sid in [&q_root, &q_browser] {
        fake.wait_for_command(
            |c| {
                c["method"] == "Target.detachFromTarget" && c["params"]["sessionId"] == sid.as_str()
            },
            WAIT,
        )
        .unwrap_or_else(|| panic!("{sid} was not detached upstream"));
    }

    // The page goes (its session detached from the browser session): Chromium's
    // Inspector.detached, then the close.
    fake.emit(
        Some(&b),
        "Target.detachedFromTarget",
        json!({"sessionId": root, "targetId": PAGE}),
    );
    let detached = p
        .wait_event("Inspector.detached", None, WAIT)
        .expect("Inspector.detached");
    assert_eq!(detached["params"]["reason"], "target_closed");
    let end = crate::common::wait_until(WAIT, || p.next_message(WAIT / 10).err())
        .expect("the page client is closed");
    assert!(end.contains("page closed"), "{end}");
    fake.wait_for_command(
        |c| c["method"] == "Target.detachFromTarget" && c["params"]["sessionId"] == b.as_str(),
        WAIT,
    )
    .expect("its browser session detached");
    assert!(sup.is_alive(), "the task goes on");
}

#[test]
fn a_page_client_is_closed_when_the_tasks_connection_drops_and_a_browser_client_goes_on() {
    let s = setup();
    let (fake, sup) = (&s.fake, &s.sup);
    let ws = list(&s.http)
        .iter()
        .find(|e| e["id"] == PAGE)
        .and_then(|e| e["webSocketDebuggerUrl"].as_str().map(str::to_string))
        .expect("the page's URL");
    let mut p = RawCdp::connect(&ws).expect("a page client");
    let browser_ws = s.http.replacen("http://", "ws://", 1);
    let browser_ws = format!("{browser_ws}/devtools/browser/{}", list_version_id(&s.http));
    let mut b = RawCdp::connect(&browser_ws).expect("a browser client");
    p.call("Runtime.evaluate", json!({"expression": "1"}), None, WAIT)
        .unwrap();
    b.call("Target.getTargets", json!({}), None, WAIT)
        .expect("the browser client is in");

    fake.drop_connections();
    let detached = p
        .wait_event("Inspector.detached", None, WAIT)
        .expect("Inspector.detached");
    let reason = detached["params"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("connection to the browser ended"),
        "{reason}"
    );
    let end = crate::common::wait_until(WAIT, || p.next_message(WAIT / 10).err())
        .expect("the page client is closed");
    assert!(end.contains("connection to the browser ended"), "{end}");

    // The browser client is carried through the reconnect, as before.
    sup.wait_for(WAIT, |s| s.state == SupervisorState::Active)
        .expect("active again");
    let back = crate::common::wait_until(WAIT, || {
        b.call("Target.getTargets", json!({}), None, WAIT / 5).ok()
    });
    let last = b.call("Target.getTargets", json!({}), None, WAIT);
    assert!(back.is_some(), "the browser client works again: {last:?}");
}

/// The `<id>` of the task's `/devtools/browser/<id>`, from `/json/version`.
fn list_version_id(http: &str) -> String {
    let (_, body) = get(http, "/json/version", &[]);
    let v: Value = serde_json::from_str(&body).expect("JSON");
    let url = v["webSocketDebuggerUrl"].as_str().expect("a browser URL");
    url.rsplit('/').next().unwrap().to_string()
}

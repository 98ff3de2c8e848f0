//! The `[security]` policy of raw CDP calls (SPEC §14): URLs that read local files (in every
//! spelling Chromium normalises: 12,000 generated ones), methods that hand local files to the
//! page, handing the protocol to the page, commands nested in `Target.sendMessageToTarget`,
//! denied and allowed method patterns. A refused call never reaches the browser and is a tool
//! error naming the option. `e2e_security` checks the same on Chromium.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::common::fakes::{WAIT, barrier};
use crate::common::url_spellings::{self, CLASSES, Class};
use cdp_supervisor::fake::FakeBrowser;
use cdp_supervisor::{Config, Error, Route, Security, Supervisor, SupervisorRegistry, tools};
use proptest::prelude::*;
use serde_json::{Value, json};

fn setup(toml: &str) -> (FakeBrowser, SupervisorRegistry, Arc<Supervisor>) {
    let fake = FakeBrowser::start().expect("fake browser");
    let reg = SupervisorRegistry::new(Config::from_toml(toml).expect("valid configuration"));
    let sup = reg
        .get_or_start("task", &fake.ws_url())
        .expect("attach to the fake browser");
    (fake, reg, sup)
}

fn cdp(reg: &SupervisorRegistry, args: Value) -> Value {
    tools::browser_cdp(reg, "task", &args)
}

fn reached(fake: &FakeBrowser, sup: &Supervisor, method: &str) -> bool {
    barrier(sup);
    fake.received().iter().any(|c| c["method"] == method)
}

/// How many `method` commands the fake received. The supervisor sends some of the methods a
/// raw call is refused (its own `Browser.setDownloadBehavior` and
/// `Page.setInterceptFileChooserDialog`, issue 31): a refusal is then "no more than before".
fn sent(fake: &FakeBrowser, sup: &Supervisor, method: &str) -> usize {
    barrier(sup);
    fake.received()
        .iter()
        .filter(|c| c["method"] == method)
        .count()
}

/// Like [`reached`], with a barrier of page calls (for policies that refuse `Browser.*`).
fn reached_page(fake: &FakeBrowser, sup: &Supervisor, method: &str) -> bool {
    for _ in 0..2 {
        sup.call(
            "Runtime.evaluate",
            json!({"expression": "1"}),
            Route::Page,
            WAIT,
        )
        .expect("page call");
    }
    fake.received().iter().any(|c| c["method"] == method)
}

#[test]
fn file_urls_and_download_paths_are_refused_by_default() {
    let (fake, reg, sup) = setup("");
    let mut cases = vec![
        ("Page.navigate", json!({"url": "file:///etc/passwd"})),
        ("Page.navigate", json!({"url": "  FILE:///etc/passwd"})),
        (
            "Page.navigate",
            json!({"url": "view-source:file:///etc/passwd"}),
        ),
        (
            "Page.navigate",
            json!({"url": "file:///etc/passwd", "frameId": "F"}),
        ),
        ("Target.createTarget", json!({"url": "file:///etc/shadow"})),
        (
            "Network.loadNetworkResource",
            json!({"frameId": "F", "url": "file:///etc/passwd", "options": {}}),
        ),
        (
            "Fetch.continueRequest",
            json!({"requestId": "R", "url": "file:///etc/passwd"}),
        ),
        (
            "PWA.install",
            json!({"manifestId": "isolated-app://x/", "installUrlOrBundleUrl": "file:///x.swbn"}),
        ),
        (
            "Browser.setDownloadBehavior",
            json!({"behavior": "allow", "downloadPath": "/root/.ssh"}),
        ),
        (
            "Page.setDownloadBehavior",
            json!({"behavior": "allow", "downloadPath": "/tmp/x"}),
        ),
    ];
    // The spellings the issue reported loading the file on Chromium, in both methods.
    for s in url_spellings::reported("/etc/passwd") {
        cases.push(("Page.navigate", json!({"url": s.text})));
        cases.push(("Target.createTarget", json!({"url": s.text})));
    }
    for (method, params) in cases {
        let before = sent(&fake, &sup, method);
        let out = cdp(&reg, json!({"method": method, "params": params}));
        assert_eq!(out["success"], false, "{method}: {out}");
        assert_eq!(out["refused_by"], "security.allow_file_urls", "{out}");
        let err = out["error"].as_str().unwrap_or_default();
        assert!(err.contains("security.allow_file_urls = true"), "{err}");
        assert_eq!(
            sent(&fake, &sup, method),
            before,
            "{method} reached the browser"
        );
    }
    // Web URLs pass.
    let out = cdp(
        &reg,
        json!({"method": "Page.navigate", "params": {"url": "http://fake.test/next"}}),
    );
    assert_eq!(out["success"], true, "{out}");
    // The typed API refuses too.
    let r = sup.call(
        "Page.navigate",
        json!({"url": "file:///"}),
        Route::Page,
        WAIT,
    );
    assert!(
        matches!(&r, Err(Error::Refused { option, .. }) if option == "security.allow_file_urls"),
        "{r:?}"
    );
}

#[test]
fn allow_file_urls_lets_them_through() {
    let (fake, reg, sup) = setup("[security]\nallow_file_urls = true\n");
    let out = cdp(
        &reg,
        json!({"method": "Page.navigate", "params": {"url": "file:///tmp/"}}),
    );
    assert_eq!(out["success"], true, "{out}");
    assert!(reached(&fake, &sup, "Page.navigate"));
}

#[test]
fn denied_patterns_are_refused_and_an_allow_list_admits_only_its_patterns() {
    let (fake, reg, sup) =
        setup("[security]\ncdp_deny = [\"Browser.*\", \"Storage.clearDataForOrigin\"]\n");
    let out = cdp(&reg, json!({"method": "Browser.close"}));
    assert_eq!(out["refused_by"], "security.cdp_deny", "{out}");
    assert!(
        out["error"]
            .as_str()
            .unwrap_or_default()
            .contains("Browser.*")
    );
    assert!(!reached_page(&fake, &sup, "Browser.close"));
    let out = cdp(&reg, json!({"method": "Storage.clearDataForOrigin"}));
    assert_eq!(out["refused_by"], "security.cdp_deny", "{out}");
    // `Browser.*` does not match `BrowserX.y`, nor the bare domain.
    assert!(!cdp_supervisor::Security::pattern_matches(
        "Browser.*",
        "BrowserX.y"
    ));
    let out = cdp(&reg, json!({"method": "Target.getTargets"}));
    assert_eq!(out["success"], true, "{out}");

    let (fake, reg, sup) = setup("[security]\ncdp_allow = [\"Runtime.*\", \"Page.navigate\"]\n");
    let out = cdp(&reg, json!({"method": "Target.getTargets"}));
    assert_eq!(out["refused_by"], "security.cdp_allow", "{out}");
    let before = fake
        .received()
        .iter()
        .filter(|c| c["method"] == "Target.getTargets")
        .count();
    reached_page(&fake, &sup, "Target.getTargets");
    let after = fake
        .received()
        .iter()
        .filter(|c| c["method"] == "Target.getTargets")
        .count();
    assert_eq!(before, after, "a refused call reached the browser");
    let out = cdp(
        &reg,
        json!({"method": "Page.navigate", "params": {"url": "http://fake.test/"}}),
    );
    assert_eq!(out["success"], true, "{out}");
}

#[test]
fn bad_patterns_are_configuration_errors_naming_the_key() {
    for bad in [
        "[security]\ncdp_deny = [\"Browser\"]\n",
        "[security]\ncdp_allow = [\"*.close\"]\n",
        "[security]\ncdp_deny = \"Browser.*\"\nallow_file_urls = \"maybe\"\n",
        "[security]\nallow_file_access = \"maybe\"\n",
        "[security]\nallow_page_protocol = 1\n",
    ] {
        let e = Config::from_toml(bad).expect_err(bad).to_string();
        assert!(e.contains("security."), "{e}");
    }
}

/// Under the default policy every generated spelling is refused or allowed as its class says,
/// in both methods that navigate; the options lift exactly their refusals.
#[test]
fn twelve_thousand_generated_spellings_are_judged_as_chromium_reads_them() {
    const CASES: u32 = 12_000;
    let spellings = url_spellings::any_spelling("/etc/passwd", "http://127.0.0.1:8000/");
    let default = Security::default();
    let mut files_allowed = Security::default();
    files_allowed.allow_file_urls = true;
    let mut all_allowed = files_allowed.clone();
    all_allowed.allow_page_protocol = true;
    let per_class: Vec<AtomicUsize> = CLASSES.iter().map(|_| AtomicUsize::new(0)).collect();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: CASES,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(&spellings, |s| {
            let class = CLASSES.iter().position(|c| *c == s.class).unwrap();
            per_class[class].fetch_add(1, Ordering::Relaxed);
            for method in ["Page.navigate", "Target.createTarget"] {
                let params = json!({"url": s.text});
                let refused = |sec: &Security| sec.check(method, &params).err().map(|(o, _)| o);
                prop_assert_eq!(refused(&default), s.class.refused_by(), "{:?}", s);
                let lifted = match s.class {
                    Class::Privileged => Some("security.allow_page_protocol"),
                    _ => None,
                };
                prop_assert_eq!(refused(&files_allowed), lifted, "{:?}", s);
                prop_assert_eq!(refused(&all_allowed), None, "{:?}", s);
            }
            Ok(())
        })
        .unwrap();
    let counts: Vec<usize> = per_class
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .collect();
    assert_eq!(counts.iter().sum::<usize>(), CASES as usize);
    for (class, n) in CLASSES.iter().zip(&counts) {
        assert!(*n >= 1_000, "{class:?}: only {n} of {CASES} spellings");
    }
}

#[test]
fn methods_that_hand_local_files_to_the_page_are_refused_unless_allowed() {
    let calls = [
        (
            "DOM.setFileInputFiles",
            json!({"files": ["/etc/passwd"], "nodeId": 1}),
        ),
        (
            "Input.dispatchDragEvent",
            json!({"type": "drop", "x": 1, "y": 1,
                   "data": {"items": [], "files": ["/etc/passwd"], "dragOperationsMask": 1}}),
        ),
        (
            "Page.setInterceptFileChooserDialog",
            json!({"enabled": true}),
        ),
        (
            "Page.handleFileChooser",
            json!({"action": "accept", "files": ["/etc/passwd"]}),
        ),
        (
            "PWA.launchFilesInApp",
            json!({"manifestId": "https://a.test/", "files": ["/etc/passwd"]}),
        ),
        ("Extensions.loadUnpacked", json!({"path": "/home/me"})),
    ];
    let (fake, reg, sup) = setup("");
    for (method, params) in &calls {
        let before = sent(&fake, &sup, method);
        let out = cdp(&reg, json!({"method": method, "params": params}));
        assert_eq!(out["success"], false, "{method}: {out}");
        assert_eq!(out["refused_by"], "security.allow_file_access", "{out}");
        let err = out["error"].as_str().unwrap_or_default();
        assert!(err.contains("security.allow_file_access = true"), "{err}");
        assert_eq!(
            sent(&fake, &sup, method),
            before,
            "{method} reached the browser"
        );
    }
    // An empty list hands nothing over.
    let out = cdp(
        &reg,
        json!({"method": "DOM.setFileInputFiles", "params": {"files": [], "nodeId": 1}}),
    );
    assert!(out.get("refused_by").is_none(), "{out}");
    assert!(reached(&fake, &sup, "DOM.setFileInputFiles"));

    let (fake, reg, sup) = setup("[security]\nallow_file_access = true\n");
    for (method, params) in &calls {
        let before = sent(&fake, &sup, method);
        let out = cdp(&reg, json!({"method": method, "params": params}));
        assert!(out.get("refused_by").is_none(), "{method}: {out}");
        assert!(
            sent(&fake, &sup, method) > before,
            "{method} did not reach the browser"
        );
    }
}

#[test]
fn handing_the_protocol_to_the_page_is_refused_unless_allowed() {
    let (fake, reg, sup) = setup("");
    // The task's own page (a target of another task's would be refused by
    // security.isolate_tasks instead: `fake_isolation`).
    let page = fake.page_target_id();
    let calls = [
        (
            "Target.exposeDevToolsProtocol",
            json!({"targetId": page, "bindingName": "cdp"}),
        ),
        ("Target.openDevTools", json!({"targetId": page})),
        (
            "Page.navigate",
            json!({"url": "devtools://devtools/bundled/devtools_app.html"}),
        ),
        ("Target.createTarget", json!({"url": "chrome://inspect"})),
        (
            "Page.navigate",
            json!({"url": " view-source:\tCHROME://inspect"}),
        ),
    ];
    for (method, params) in &calls {
        let out = cdp(&reg, json!({"method": method, "params": params}));
        assert_eq!(out["refused_by"], "security.allow_page_protocol", "{out}");
        let err = out["error"].as_str().unwrap_or_default();
        assert!(err.contains("security.allow_page_protocol = true"), "{err}");
        assert!(
            !reached(&fake, &sup, method),
            "{method} reached the browser"
        );
    }
    let (fake, reg, sup) = setup("[security]\nallow_page_protocol = true\n");
    for (method, params) in &calls[..2] {
        let out = cdp(&reg, json!({"method": method, "params": params}));
        assert!(out.get("refused_by").is_none(), "{method}: {out}");
        assert!(
            reached(&fake, &sup, method),
            "{method} did not reach the browser"
        );
    }
}

#[test]
fn a_command_nested_in_send_message_to_target_is_checked_like_any_other() {
    let (fake, reg, sup) = setup("[security]\ncdp_deny = [\"Browser.close\"]\n");
    let send = |inner: Value| {
        cdp(
            &reg,
            json!({"method": "Target.sendMessageToTarget",
                   "params": {"sessionId": "S", "message": inner.to_string()}}),
        )
    };
    for (inner, option) in [
        (
            json!({"id": 1, "method": "Page.navigate", "params": {"url": "fi\nle:///etc/passwd"}}),
            "security.allow_file_urls",
        ),
        (
            json!({"id": 2, "method": "Target.exposeDevToolsProtocol",
                   "params": {"targetId": "T"}}),
            "security.allow_page_protocol",
        ),
        (
            json!({"id": 3, "method": "DOM.setFileInputFiles",
                   "params": {"files": ["/etc/passwd"], "nodeId": 1}}),
            "security.allow_file_access",
        ),
        (
            json!({"id": 4, "method": "Browser.close"}),
            "security.cdp_deny",
        ),
        // Nested twice.
        (
            json!({"id": 5, "method": "Target.sendMessageToTarget", "params": {"sessionId": "S",
                   "message": json!({"id": 6, "method": "Target.createTarget",
                                     "params": {"url": "view-source: file:///etc/passwd"}})
                              .to_string()}}),
            "security.allow_file_urls",
        ),
    ] {
        let out = send(inner);
        assert_eq!(out["refused_by"], option, "{out}");
        assert!(
            out["error"]
                .as_str()
                .unwrap_or_default()
                .contains("its nested "),
            "{out}"
        );
        assert!(!reached(&fake, &sup, "Target.sendMessageToTarget"));
    }
    // A duplicate key (Chromium keeps the last: this navigates to the file) is refused.
    let out = cdp(
        &reg,
        json!({"method": "Target.sendMessageToTarget", "params": {"sessionId": "S", "message":
            r#"{"id":7,"method":"Page.navigate","params":{"url":"http://a.test/","url":"file:///etc/passwd"}}"#}}),
    );
    assert_eq!(out["refused_by"], "security.allow_file_urls", "{out}");
    assert!(
        out["error"]
            .as_str()
            .unwrap_or_default()
            .contains("duplicate key"),
        "{out}"
    );
    assert!(!reached(&fake, &sup, "Target.sendMessageToTarget"));
    // An ordinary nested command could still run on any target of the browser (a DevTools
    // window, a file: tab): refused unless allow_page_protocol.
    let eval = json!({"id": 8, "method": "Runtime.evaluate", "params": {"expression": "1"}});
    let out = send(eval.clone());
    assert_eq!(out["refused_by"], "security.allow_page_protocol", "{out}");
    assert!(!reached(&fake, &sup, "Target.sendMessageToTarget"));

    // With allow_page_protocol it goes through, and what it carries is still checked.
    let (fake, reg, sup) = setup("[security]\nallow_page_protocol = true\n");
    let send = |inner: Value| {
        cdp(
            &reg,
            json!({"method": "Target.sendMessageToTarget",
                   "params": {"sessionId": "S", "message": inner.to_string()}}),
        )
    };
    let out = send(json!({"id": 9, "method": "Page.navigate",
                          "params": {"url": "view-source:file:///etc/passwd"}}));
    assert_eq!(out["refused_by"], "security.allow_file_urls", "{out}");
    assert!(!reached(&fake, &sup, "Target.sendMessageToTarget"));
    let out = send(eval);
    assert!(out.get("refused_by").is_none(), "{out}");
    assert!(reached(&fake, &sup, "Target.sendMessageToTarget"));
}

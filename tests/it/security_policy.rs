//! The `[security]` policy of raw CDP calls (SPEC §14): file URLs, denied and allowed method
//! patterns. A refused call never reaches the browser and is a tool error naming the option.

use std::sync::Arc;

use crate::common::fakes::{WAIT, barrier};
use cdp_supervisor::fake::FakeBrowser;
use cdp_supervisor::{Config, Error, Route, Supervisor, SupervisorRegistry, tools};
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
    for (method, params) in [
        ("Page.navigate", json!({"url": "file:///etc/passwd"})),
        ("Page.navigate", json!({"url": "  FILE:///etc/passwd"})),
        (
            "Page.navigate",
            json!({"url": "view-source:file:///etc/passwd"}),
        ),
        ("Target.createTarget", json!({"url": "file:///etc/shadow"})),
        (
            "Browser.setDownloadBehavior",
            json!({"behavior": "allow", "downloadPath": "/root/.ssh"}),
        ),
        (
            "Page.setDownloadBehavior",
            json!({"behavior": "allow", "downloadPath": "/tmp/x"}),
        ),
    ] {
        let out = cdp(&reg, json!({"method": method, "params": params}));
        assert_eq!(out["success"], false, "{method}: {out}");
        assert_eq!(out["refused_by"], "security.allow_file_urls", "{out}");
        let err = out["error"].as_str().unwrap_or_default();
        assert!(err.contains("security.allow_file_urls = true"), "{err}");
        assert!(
            !reached(&fake, &sup, method),
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
    ] {
        let e = Config::from_toml(bad).expect_err(bad).to_string();
        assert!(e.contains("security."), "{e}");
    }
}

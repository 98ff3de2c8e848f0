//! Tasks that cannot reach each other (`security.isolate_tasks`, issue 28 item 4), on the fake
//! browser: a start naming another task's page is refused (and one taking the first page skips
//! it); raw `Target.*` calls list the task's own targets only and refuse the rest on every
//! route, never reaching the browser; what a task creates is its own; `isolate_tasks = false`
//! gives the whole browser back. `e2e_isolation` runs the attack of the issue on Chromium.

use cdp_supervisor::StartRequest;
use std::sync::{Arc, Barrier};

use crate::common::fakes::barrier;
use cdp_supervisor::fake::{FakeBrowser, Rule};
use cdp_supervisor::{
    Config, Error, Security, StartOptions, Supervisor, SupervisorRegistry, tools,
};
use serde_json::{Value, json};

const ISOLATE: &str = "security.isolate_tasks";

fn config(isolate: bool) -> Config {
    Config::default()
        .with_security(Security::default().with_isolate_tasks(isolate))
        .unwrap()
}

/// Task `task` on a new page of its own; returns the supervisor and its page.
fn own_page(reg: &SupervisorRegistry, fake: &FakeBrowser, task: &str) -> (Arc<Supervisor>, String) {
    let sup = reg
        .start(
            StartRequest::new(task, &fake.ws_url())
                .with_options(StartOptions::default().with_new_page(true)),
        )
        .expect("start on a page of its own");
    let page = sup.snapshot().page_target_id.clone().expect("its page");
    (sup, page)
}

fn cdp(reg: &SupervisorRegistry, task: &str, args: Value) -> Value {
    tools::browser_cdp(reg, task, &args)
}

/// The commands of `method` the fake received that name `target`.
fn sent(fake: &FakeBrowser, method: &str, target: &str) -> usize {
    fake.received()
        .iter()
        .filter(|c| c["method"] == method && c["params"]["targetId"] == target)
        .count()
}

fn listed(out: &Value) -> Vec<String> {
    out["result"]["targetInfos"]
        .as_array()
        .unwrap_or_else(|| panic!("a target list: {out}"))
        .iter()
        .filter_map(|t| t["targetId"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn a_page_another_task_owns_cannot_be_taken_at_start_unless_isolation_is_off() {
    let fake = FakeBrowser::start().expect("fake browser");
    let reg = SupervisorRegistry::new(config(true));
    let (_a, a_page) = own_page(&reg, &fake, "iso-a");
    let attaches = sent(&fake, "Target.attachToTarget", &a_page);
    let refused = reg.start(
        StartRequest::new("iso-b", &fake.ws_url())
            .with_options(StartOptions::default().with_target_id(a_page.clone())),
    );
    match refused {
        Err(Error::Refused { option, detail, .. }) => {
            assert_eq!(option, ISOLATE);
            assert!(
                detail.contains(&format!(
                    "target_id \"{a_page}\" is a page (or frame) of another task"
                )),
                "{detail}"
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(reg.get("iso-b").is_none(), "no task left behind");
    assert_eq!(
        sent(&fake, "Target.attachToTarget", &a_page),
        attaches,
        "refused before anything was sent"
    );
    let open = SupervisorRegistry::new(config(false));
    let (_c, c_page) = own_page(&open, &fake, "open-c");
    let d = open
        .start(
            StartRequest::new("open-d", &fake.ws_url())
                .with_options(StartOptions::default().with_target_id(c_page.clone())),
        )
        .expect("isolate_tasks = false: a trusted client may share a page");
    assert_eq!(
        d.snapshot().page_target_id.as_deref(),
        Some(c_page.as_str())
    );
}

#[test]
fn a_start_on_the_first_page_skips_the_pages_other_tasks_own() {
    let fake = FakeBrowser::start().expect("fake browser");
    let reg = SupervisorRegistry::new(config(true));
    let a = reg.get_or_start("first-a", &fake.ws_url()).expect("A");
    assert_eq!(
        a.snapshot().page_target_id.as_deref(),
        Some(fake.page_target_id().as_str())
    );
    let b = reg.get_or_start("first-b", &fake.ws_url()).expect("B");
    let b_page = b.snapshot().page_target_id.clone().expect("B's page");
    assert_ne!(b_page, fake.page_target_id(), "not A's page");
    assert!(fake.page_target_ids().contains(&b_page), "a new page");
    let open = SupervisorRegistry::new(config(false));
    let c = open.get_or_start("first-c", &fake.ws_url()).expect("C");
    assert_eq!(
        c.snapshot().page_target_id.as_deref(),
        Some(fake.page_target_id().as_str()),
        "without isolation the first page is anyone's"
    );
}

#[test]
fn starts_racing_for_one_page_leave_it_to_exactly_one_task() {
    let fake = FakeBrowser::start().expect("fake browser");
    let reg = SupervisorRegistry::new(config(true));
    let page = fake.page_target_id();
    let n = 8;
    let gate = Barrier::new(n);
    let results: Vec<Result<Arc<Supervisor>, Error>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let (reg, gate, page, url) = (&reg, &gate, page.clone(), fake.ws_url());
                s.spawn(move || {
                    gate.wait();
                    reg.start(
                        StartRequest::new(&format!("race-{i}"), &url)
                            .with_options(StartOptions::default().with_target_id(page)),
                    )
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("no panic"))
            .collect()
    });
    let won = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(won, 1, "{results:?}");
    for r in &results {
        if let Err(e) = r {
            assert!(
                matches!(e, Error::Refused { option, .. } if option == ISOLATE),
                "{e:?}"
            );
        }
    }
    assert_eq!(reg.tasks().len(), 1, "{:?}", reg.tasks());
}

/// The methods that name a target, tried with another task's.
const METHODS: [&str; 7] = [
    "Target.attachToTarget",
    "Target.activateTarget",
    "Target.closeTarget",
    "Target.getTargetInfo",
    "Target.autoAttachRelated",
    "Target.detachFromTarget",
    "Browser.getWindowForTarget",
];

#[test]
fn target_calls_reach_only_the_tasks_own_targets_on_every_route() {
    let fake = FakeBrowser::start().expect("fake browser");
    fake.set_rule(
        "Target.createBrowserContext",
        Rule::Reply(json!({"browserContextId": "CTX-B"})),
    );
    let reg = SupervisorRegistry::new(config(true));
    let (_a, a_page) = own_page(&reg, &fake, "reach-a");
    let (b, b_page) = own_page(&reg, &fake, "reach-b");
    // The browser's pages: the fake's own, A's and B's; B lists its own only.
    let all = fake.page_target_ids();
    assert!(all.contains(&a_page) && all.contains(&fake.page_target_id()));
    let list = cdp(&reg, "reach-b", json!({"method": "Target.getTargets"}));
    assert_eq!(listed(&list), [b_page.as_str()], "{list}");
    // From its own page's session too (Chromium serves Target.* there as well).
    let list = cdp(
        &reg,
        "reach-b",
        json!({"method": "Target.getTargets", "target_id": b_page}),
    );
    assert_eq!(listed(&list), [b_page.as_str()], "{list}");
    let before: Vec<usize> = METHODS.iter().map(|m| sent(&fake, m, &a_page)).collect();
    for (method, before) in METHODS.iter().zip(before) {
        for route in [json!(null), json!(b_page)] {
            let out = cdp(
                &reg,
                "reach-b",
                json!({"method": method, "params": {"targetId": a_page}, "target_id": route}),
            );
            assert_eq!(out["success"], false, "{method}: {out}");
            assert_eq!(out["refused_by"], ISOLATE, "{method}: {out}");
            let error = out["error"].as_str().unwrap_or_default();
            assert!(
                error.contains(&format!(
                    "targetId \"{a_page}\" is not a target of this task"
                )),
                "{error}"
            );
        }
        barrier(&b);
        assert_eq!(
            sent(&fake, method, &a_page),
            before,
            "{method} never reached the browser"
        );
    }
    let out = cdp(
        &reg,
        "reach-b",
        json!({"method": "Target.attachToBrowserTarget"}),
    );
    assert_eq!(out["refused_by"], ISOLATE, "{out}");
    assert!(
        fake.page_target_ids().contains(&a_page),
        "A's page is still there"
    );

    // What B creates is B's: listed, and closable.
    let created = cdp(
        &reg,
        "reach-b",
        json!({"method": "Target.createTarget", "params": {"url": "about:blank"}}),
    );
    let c_page = created["result"]["targetId"]
        .as_str()
        .expect("a new page")
        .to_string();
    let list = cdp(&reg, "reach-b", json!({"method": "Target.getTargets"}));
    assert_eq!(listed(&list), [b_page.clone(), c_page.clone()], "{list}");
    let closed = cdp(
        &reg,
        "reach-b",
        json!({"method": "Target.closeTarget", "params": {"targetId": c_page}}),
    );
    assert_eq!(closed["success"], true, "{closed}");
    assert!(!fake.page_target_ids().contains(&c_page));
    // So are the browser contexts it creates; only they may be named.
    cdp(
        &reg,
        "reach-b",
        json!({"method": "Target.createBrowserContext"}),
    );
    let in_context = cdp(
        &reg,
        "reach-b",
        json!({"method": "Target.createTarget", "params": {"url": "about:blank", "browserContextId": "CTX-B"}}),
    );
    assert_eq!(in_context["success"], true, "{in_context}");
    let foreign = cdp(
        &reg,
        "reach-b",
        json!({"method": "Target.createTarget", "params": {"url": "about:blank", "browserContextId": "CTX-A"}}),
    );
    assert_eq!(foreign["refused_by"], ISOLATE, "{foreign}");
    // A, meanwhile, still cannot see B's pages.
    let list = cdp(&reg, "reach-a", json!({"method": "Target.getTargets"}));
    assert_eq!(listed(&list), [a_page.as_str()], "{list}");
}

#[test]
fn with_isolation_off_a_task_sees_and_reaches_the_whole_browser() {
    let fake = FakeBrowser::start().expect("fake browser");
    let reg = SupervisorRegistry::new(config(false));
    let (_a, a_page) = own_page(&reg, &fake, "whole-a");
    let (_b, _) = own_page(&reg, &fake, "whole-b");
    let list = cdp(&reg, "whole-b", json!({"method": "Target.getTargets"}));
    let mut ids = listed(&list);
    ids.sort();
    let mut all = fake.page_target_ids();
    all.sort();
    assert_eq!(ids, all, "{list}");
    let closed = cdp(
        &reg,
        "whole-b",
        json!({"method": "Target.closeTarget", "params": {"targetId": a_page}}),
    );
    assert_eq!(closed["success"], true, "{closed}");
}

//! Measurement (issue 32, SPEC §19): which detection checks a CDP client flips, per client, on
//! the detection page (`common/detect.js`) in a private headless Chromium: the top page and a
//! cross-site iframe (an OOPIF) each report their checks before a client attaches (round 0)
//! and after (round 1).
//!
//! `raw_domains` attaches a plain client to the page and its OOPIF (`Target.attachToTarget`
//! on each, nothing else) and sends one domain's command per row: what each command alone
//! reveals. `log_domain_delivers` measures what `Log.enable` hands a client of console
//! messages and exceptions (could the console ring do without `Runtime.enable`?).
//! `main_world_ways` measures the ways to reach a same-process iframe's main world without
//! `Runtime.enable`.
//!
//! Run: `cargo test --test it measure_stealth:: -- --ignored --nocapture --test-threads 1`.

use std::any::Any;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::detect::{Lab, Measured, raw_client};
use crate::common::{self, Browser, RawCdp, Response};

const T: Duration = Duration::from_secs(15);

trait EvaluateIn {
    fn evaluate_in(&mut self, sid: &str, ctx: i64, expression: &str) -> Result<Value, String>;
}

impl EvaluateIn for RawCdp {
    fn evaluate_in(&mut self, sid: &str, ctx: i64, expression: &str) -> Result<Value, String> {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "contextId": ctx, "returnByValue": true}),
            Some(sid),
            T,
        )?;
        Ok(r["result"]["value"].clone())
    }
}

fn print_row(name: &str, m: &Measured) {
    let show = |v: &[String]| {
        if v.is_empty() {
            "-".to_string()
        } else {
            v.join(", ")
        }
    };
    println!(
        "{name:<44} top: {:<40} same: {:<40} oopif: {}",
        show(&m.flips.top),
        show(&m.flips.same),
        show(&m.flips.oopif),
    );
}

/// What each domain's command alone reveals to the page.
#[test]
#[ignore = "measurement: run with --ignored --nocapture"]
fn raw_domains() {
    let Some(mut lab) = Lab::new(&[]) else { return };
    println!("{}", lab.product());
    let rows: Vec<(&str, Vec<(&str, Value)>)> = vec![
        ("attach only", vec![]),
        ("Runtime.enable", vec![("Runtime.enable", json!({}))]),
        (
            "Runtime.enable + Runtime.disable",
            vec![
                ("Runtime.enable", json!({})),
                ("Runtime.disable", json!({})),
            ],
        ),
        ("Page.enable", vec![("Page.enable", json!({}))]),
        ("Page.getFrameTree", vec![("Page.getFrameTree", json!({}))]),
        ("Log.enable", vec![("Log.enable", json!({}))]),
        (
            "Runtime.getIsolateId",
            vec![("Runtime.getIsolateId", json!({}))],
        ),
        (
            "Target.setAutoAttach (paused, flat)",
            vec![(
                "Target.setAutoAttach",
                json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
            )],
        ),
        ("Inspector.enable", vec![("Inspector.enable", json!({}))]),
        ("Network.enable", vec![("Network.enable", json!({}))]),
        ("DOM.enable", vec![("DOM.enable", json!({}))]),
        (
            "CSS.enable (after DOM)",
            vec![("DOM.enable", json!({})), ("CSS.enable", json!({}))],
        ),
        ("Debugger.enable", vec![("Debugger.enable", json!({}))]),
        ("Audits.enable", vec![("Audits.enable", json!({}))]),
        (
            "Page.setLifecycleEventsEnabled",
            vec![("Page.setLifecycleEventsEnabled", json!({"enabled": true}))],
        ),
        (
            "Page.createIsolatedWorld",
            vec![(
                "Page.createIsolatedWorld",
                json!({"frameId": "", "worldName": "w"}),
            )],
        ),
        (
            "Runtime.addBinding",
            vec![("Runtime.addBinding", json!({"name": "__detectBinding"}))],
        ),
        (
            "Emulation.setFocusEmulationEnabled",
            vec![(
                "Emulation.setFocusEmulationEnabled",
                json!({"enabled": true}),
            )],
        ),
        (
            "Fetch.enable (bridge pattern)",
            vec![(
                "Fetch.enable",
                json!({"patterns": [{"urlPattern": "http://cdp-dialog-bridge.invalid/*"}]}),
            )],
        ),
        (
            "bridge script (addScriptToEvaluateOnNewDocument)",
            vec![(
                "Page.addScriptToEvaluateOnNewDocument",
                json!({"source": cdp_supervisor::unversioned::bridge::SCRIPT, "runImmediately": true}),
            )],
        ),
    ];
    for (name, commands) in rows {
        // Page.createIsolatedWorld needs the frame id: the main frame's id is its target id.
        let m = lab.measure(|ws, target| {
            let commands: Vec<(&str, Value)> = commands
                .iter()
                .map(|(m, p)| {
                    let mut p = p.clone();
                    if *m == "Page.createIsolatedWorld" {
                        p["frameId"] = json!(target);
                    }
                    (*m, p)
                })
                .collect();
            if commands
                .iter()
                .any(|(m, _)| *m == "Page.createIsolatedWorld")
            {
                // Only on the page: the OOPIF's frame id differs.
                let mut cdp = RawCdp::connect(ws).map_err(|e| e.to_string())?;
                let sid = cdp.attach(target)?;
                for (m, p) in &commands {
                    cdp.call(m, p.clone(), Some(&sid), T)?;
                }
                return Ok(Box::new(cdp) as Box<dyn Any>);
            }
            raw_client(ws, target, &commands)
        });
        match m {
            Ok(m) => {
                print_row(name, &m);
                if !m.flips.none() {
                    print!("{}", m.flips.describe(&m.before, &m.after));
                }
            }
            // Debugger.enable stops the page at the check's `debugger` statement until the
            // client resumes it: the round never comes.
            Err(e) if name == "Debugger.enable" => {
                println!("{name:<44} the page stopped at `debugger` ({e})")
            }
            Err(e) => println!("{name:<44} ERROR {e}"),
        }
    }
}

/// What `Log.enable` (and, for comparison, `Runtime.enable`) delivers of console calls and
/// exceptions, on a page that logs and throws after the client attached.
#[test]
#[ignore = "measurement: run with --ignored --nocapture"]
fn log_domain_delivers() {
    let Some(_) = common::shared_browser() else {
        return;
    };
    let browser = Browser::launch().expect("launch");
    let server = common::HttpServer::start(|req| match req.path.as_str() {
        "/" => Response::html(
            "<!doctype html><meta http-equiv=\"Content-Security-Policy\" content=\"img-src 'self'\">\
             <script>window.go = () => {\
               console.error('console-error-text', {a: 1});\
               console.warn('console-warn-text');\
               console.assert(false, 'console-assert-text');\
               console.log('console-log-text');\
               setTimeout(() => { throw new Error('uncaught-error-text'); }, 0);\
               setTimeout(() => { Promise.reject(new Error('unhandled-rejection-text')); }, 0);\
               setTimeout(() => { fetch('/missing-404'); }, 0);\
               setTimeout(() => { const i = new Image(); i.src = 'http://localhost:1/csp-blocked.png'; }, 0);\
               setTimeout(() => { document.write; eval('1'); }, 0);\
             };</script><p>log</p>",
        ),
        _ => Response::not_found(),
    });
    for (name, enable) in [
        ("Log.enable", vec!["Log.enable"]),
        ("Runtime.enable", vec!["Runtime.enable"]),
        ("Audits.enable", vec!["Audits.enable"]),
    ] {
        let mut cdp = RawCdp::connect(&browser.ws_url).unwrap();
        let (target, sid) = cdp.open_page(&server.url("127.0.0.1", "/"), T).unwrap();
        for m in &enable {
            cdp.call(m, json!({}), Some(&sid), T).unwrap();
        }
        cdp.clear_events();
        // Raise them from a second client, so this one's evaluate adds nothing.
        let mut other = RawCdp::connect(&browser.ws_url).unwrap();
        let osid = other.attach(&target).unwrap();
        other.evaluate(&osid, "go(); 1", T).unwrap();
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut seen = Vec::new();
        while let Ok(Some(msg)) =
            cdp.next_message(deadline.saturating_duration_since(Instant::now()))
        {
            let method = msg["method"].as_str().unwrap_or_default().to_string();
            if method.starts_with("Page.") || method.starts_with("Target.") {
                continue;
            }
            let p = &msg["params"];
            let what = match method.as_str() {
                "Log.entryAdded" => format!(
                    "{} {} {}",
                    p["entry"]["source"], p["entry"]["level"], p["entry"]["text"]
                ),
                "Runtime.consoleAPICalled" => format!("{} {}", p["type"], p["args"][0]["value"]),
                "Runtime.exceptionThrown" => p["exceptionDetails"]["exception"]["description"]
                    .as_str()
                    .unwrap_or_default()
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .to_string(),
                "Audits.issueAdded" => format!("{}", p["issue"]["code"]),
                _ => String::new(),
            };
            seen.push(format!("{method}: {what}"));
        }
        println!("== {name}");
        for s in seen {
            println!("   {s}");
        }
        let _ = cdp.close_page(&target);
    }
}

/// The DOM route into a same-process iframe's main world (`DOM.getFrameOwner`,
/// `DOM.describeNode`, `DOM.resolveNode`, then `Runtime.callFunctionOn` on that node): what it
/// returns, whether the function runs in the main world, how the context id can be learnt, and
/// how long each step takes. Then the same on the detection page: does the page see it?
#[test]
#[ignore = "measurement: run with --ignored --nocapture"]
fn main_world_ways() {
    let Some(_) = common::shared_browser() else {
        return;
    };
    let browser = Browser::launch().expect("launch");
    let server = common::HttpServer::start(|req| match req.path.as_str() {
        "/" => Response::html(
            "<!doctype html><script>window.marker = 'top-main';</script>\
             <iframe id=\"c\" src=\"/child\"></iframe>",
        ),
        "/child" => Response::html(
            "<!doctype html><script>window.marker = 'child-main';</script>\
             <iframe id=\"g\" src=\"/grand\"></iframe>",
        ),
        "/grand" => Response::html("<!doctype html><script>window.marker = 'grand-main';</script>"),
        _ => Response::not_found(),
    });
    let mut opener = RawCdp::connect(&browser.ws_url).unwrap();
    let (target, _) = opener.open_page(&server.url("127.0.0.1", "/"), T).unwrap();
    let mut cdp = RawCdp::connect(&browser.ws_url).unwrap();
    let sid = cdp.attach(&target).unwrap();
    let tree = cdp
        .call("Page.getFrameTree", json!({}), Some(&sid), T)
        .unwrap();
    let child = tree["frameTree"]["childFrames"][0]["frame"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let grand = tree["frameTree"]["childFrames"][0]["childFrames"][0]["frame"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let timed = |name: &str, cdp: &mut RawCdp, m: &str, p: Value| -> Value {
        let t = Instant::now();
        let r = cdp.call(m, p, Some(&sid), T);
        println!(
            "  {name:<28} {:>7.3} ms  {}",
            t.elapsed().as_secs_f64() * 1e3,
            match &r {
                Ok(v) => {
                    let s = v.to_string();
                    s.chars().take(220).collect::<String>()
                }
                Err(e) => format!("ERROR {e}"),
            }
        );
        r.unwrap_or(Value::Null)
    };
    for (name, frame) in [("child", &child), ("grandchild", &grand)] {
        println!("== {name} frame {frame}");
        let owner = timed(
            "DOM.getFrameOwner",
            &mut cdp,
            "DOM.getFrameOwner",
            json!({"frameId": frame}),
        );
        let desc = timed(
            "DOM.describeNode",
            &mut cdp,
            "DOM.describeNode",
            json!({"backendNodeId": owner["backendNodeId"]}),
        );
        let doc = desc["node"]["contentDocument"]["backendNodeId"].clone();
        let obj = timed(
            "DOM.resolveNode",
            &mut cdp,
            "DOM.resolveNode",
            json!({"backendNodeId": doc, "objectGroup": "route"}),
        );
        let oid = obj["object"]["objectId"].clone();
        timed(
            "callFunctionOn (marker)",
            &mut cdp,
            "Runtime.callFunctionOn",
            json!({"objectId": oid, "functionDeclaration": "function() { return window.marker; }", "returnByValue": true}),
        );
        let thrown = timed(
            "callFunctionOn (throw 0)",
            &mut cdp,
            "Runtime.callFunctionOn",
            json!({"objectId": oid, "functionDeclaration": "function() { throw 0; }", "silent": true}),
        );
        let ctx = thrown["exceptionDetails"]["executionContextId"].clone();
        println!("  context id from exceptionDetails: {ctx}; objectId {oid}");
        timed(
            "evaluate in that context",
            &mut cdp,
            "Runtime.evaluate",
            json!({"expression": "window.marker", "contextId": ctx, "returnByValue": true}),
        );
        timed(
            "releaseObjectGroup",
            &mut cdp,
            "Runtime.releaseObjectGroup",
            json!({"objectGroup": "route"}),
        );
    }
    // What Runtime.enable would have said (a second client), for comparison.
    let mut other = RawCdp::connect(&browser.ws_url).unwrap();
    let osid = other.attach(&target).unwrap();
    other
        .call("Runtime.enable", json!({}), Some(&osid), T)
        .unwrap();
    while let Some(ev) = other.wait_event(
        "Runtime.executionContextCreated",
        Some(&osid),
        Duration::from_millis(300),
    ) {
        let c = &ev["params"]["context"];
        println!(
            "  Runtime.enable: context {} frame {} default {}",
            c["id"], c["auxData"]["frameId"], c["auxData"]["isDefault"]
        );
    }
    // Twenty cold lookups (no cache): the chain's cost per call.
    let t = Instant::now();
    for _ in 0..20 {
        let owner = cdp
            .call(
                "DOM.getFrameOwner",
                json!({"frameId": child}),
                Some(&sid),
                T,
            )
            .unwrap();
        let desc = cdp
            .call(
                "DOM.describeNode",
                json!({"backendNodeId": owner["backendNodeId"]}),
                Some(&sid),
                T,
            )
            .unwrap();
        let obj = cdp
            .call("DOM.resolveNode", json!({"backendNodeId": desc["node"]["contentDocument"]["backendNodeId"], "objectGroup": "route"}), Some(&sid), T)
            .unwrap();
        cdp.call("Runtime.callFunctionOn", json!({"objectId": obj["object"]["objectId"], "functionDeclaration": "function() { throw 0; }", "silent": true}), Some(&sid), T)
            .unwrap();
        cdp.call(
            "Runtime.releaseObjectGroup",
            json!({"objectGroup": "route"}),
            Some(&sid),
            T,
        )
        .unwrap();
    }
    println!(
        "chain of 5 (4 awaited + release) cold: {:.3} ms per lookup",
        t.elapsed().as_secs_f64() * 1e3 / 20.0
    );
    let t = Instant::now();
    for _ in 0..20 {
        cdp.call(
            "Runtime.evaluate",
            json!({"expression": "1", "contextId": 1}),
            Some(&sid),
            T,
        )
        .ok();
    }
    println!(
        "one evaluate round trip: {:.3} ms",
        t.elapsed().as_secs_f64() * 1e3 / 20.0
    );
}

/// The supervisor's way into a same-process iframe's main world, run on the detection page's
/// same-origin iframe: `DOM.getFrameOwner`, `DOM.describeNode`, `DOM.resolveNode`, then an empty
/// `Runtime.callFunctionOn` in the context the object id names, with the node as argument (it
/// must belong to that context), then `Runtime.evaluate` there and `Runtime.releaseObjectGroup`.
#[test]
#[ignore = "measurement: run with --ignored --nocapture"]
fn dom_route_is_invisible() {
    let Some(mut lab) = Lab::new(&[]) else { return };
    let m = lab
        .measure(|ws, target| {
            let mut cdp = RawCdp::connect(ws).map_err(|e| e.to_string())?;
            let sid = cdp.attach(target)?;
            let tree = cdp.call("Page.getFrameTree", json!({}), Some(&sid), T)?;
            let same = tree["frameTree"]["childFrames"]
                .as_array()
                .and_then(|c| {
                    c.iter()
                        .find(|f| f["frame"]["url"].as_str().is_some_and(|u| u.contains("role=same")))
                })
                .and_then(|f| f["frame"]["id"].as_str())
                .ok_or("no same-origin frame")?
                .to_string();
            let owner = cdp.call("DOM.getFrameOwner", json!({"frameId": same}), Some(&sid), T)?;
            let desc = cdp.call("DOM.describeNode", json!({"backendNodeId": owner["backendNodeId"]}), Some(&sid), T)?;
            let obj = cdp.call(
                "DOM.resolveNode",
                json!({"backendNodeId": desc["node"]["contentDocument"]["backendNodeId"], "objectGroup": "route"}),
                Some(&sid),
                T,
            )?;
            let oid = obj["object"]["objectId"].as_str().unwrap_or_default().to_string();
            let ctx: i64 = oid.split('.').nth(1).and_then(|c| c.parse().ok()).ok_or("objectId")?;
            cdp.call(
                "Runtime.callFunctionOn",
                json!({"executionContextId": ctx, "functionDeclaration": "function() {}", "arguments": [{"objectId": oid}]}),
                Some(&sid),
                T,
            )?;
            let v = cdp.evaluate_in(&sid, ctx, "document.getElementById('role').textContent")?;
            println!("  evaluate in context {ctx}: {v}");
            cdp.call("Runtime.releaseObjectGroup", json!({"objectGroup": "route"}), Some(&sid), T)?;
            Ok(Box::new(cdp) as Box<dyn Any>)
        })
        .expect("measured");
    print_row("DOM route + evaluate in the same-origin iframe", &m);
    print!("{}", m.flips.describe(&m.before, &m.after));
}

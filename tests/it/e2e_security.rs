//! The `[security]` policy against a real headless Chromium (SPEC §14): what Chromium would load
//! as a local file is refused, and so is every way of handing local files or the protocol to the
//! page, unless the option allowing it is set.
//!
//! Each URL test sends the same spelling twice: *raw* to Chromium (a client of its own, past the
//! policy) to learn what Chromium does with it, and through `browser_cdp` to learn what the
//! policy does; whenever Chromium lands on a `file:` document (its text holds the marker of a
//! temporary file) the policy must have refused it. Pages come from a loopback server; one
//! Chromium per test binary.
//!
//! Tests skip (printing `SKIPPED: no Chromium`) when no Chromium is installed, unless
//! `CDP_SUPERVISOR_E2E=require`.

use crate::common;

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::pages::attach_to_page;
use crate::common::url_spellings::{self, CLASSES, Class, Spelling};
use crate::common::{HttpServer, RawCdp, wait_until};
use cdp_supervisor::{Config, StartOptions, Supervisor, SupervisorRegistry, tools};
use serde_json::{Value, json};

/// Deadline of every wait in these tests.
const T: Duration = Duration::from_secs(10);
/// What the temporary file says.
const MARKER: &str = "cdp-supervisor-e2e-secret-4711";
/// Spellings of each generated class sent to Chromium.
const PER_CLASS: usize = 4;
/// How long a target created with a reported spelling may take to show its file (each loads
/// within 0.1 s here; a spelling Chromium stops loading costs this long).
const CREATED: Duration = Duration::from_secs(3);

/// A page with a file input and a drop zone whose handlers read what they are given and report
/// it (`/report?["input:NAME:TEXT", …]`).
const PAGE: &str = r#"<!doctype html><html><head><meta charset="utf-8"><title>security</title>
<style>body{margin:0} #d{position:absolute;left:0;top:50px;width:300px;height:200px}</style></head>
<body><input type="file" id="f"><div id="d">drop here</div><script>
async function report(kind, files) {
  const got = [];
  for (const f of files) got.push(kind + ':' + f.name + ':' + (await f.text()).trim());
  fetch('/report?' + encodeURIComponent(JSON.stringify(got)));
}
document.getElementById('f').addEventListener('change', e => report('input', e.target.files));
const d = document.getElementById('d');
window.dragged = 0;
d.addEventListener('dragenter', () => window.dragged++);
d.addEventListener('dragover', e => e.preventDefault());
d.addEventListener('drop', e => { e.preventDefault(); report('drop', e.dataTransfer.files); });
</script></body></html>"#;

/// A temporary directory with `secret.txt` holding [`MARKER`], removed on drop.
struct Secret {
    dir: PathBuf,
    path: String,
}

impl Secret {
    fn new(test: &str) -> Secret {
        // A fixed-width name: the generated sample depends on the path's length.
        let dir = std::env::temp_dir().join(format!("cdp-sec-{test}-{:010}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the temporary directory");
        let file = dir.join("secret.txt");
        std::fs::File::create(&file)
            .and_then(|mut f| f.write_all(MARKER.as_bytes()))
            .expect("write the secret file");
        let path = file.to_str().expect("a UTF-8 temporary path").to_string();
        Secret { dir, path }
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A page of the loopback server for a supervisor under `config`, and a raw client.
struct Fixture {
    server: HttpServer,
    cdp: RawCdp,
    reg: SupervisorRegistry,
    task: String,
    page: String,
    pages: Vec<String>,
}

impl Fixture {
    fn open(browser: &common::Browser, task: &str, toml: &str) -> (Fixture, Arc<Supervisor>) {
        let server = HttpServer::static_pages(&[("/", PAGE)]);
        let mut cdp = RawCdp::connect(&browser.ws_url).expect("connect a raw CDP client");
        let (page, _) = cdp
            .open_page(&server.url("127.0.0.1", "/"), T)
            .expect("open the test page");
        let config = Config::from_toml(toml).expect("a valid configuration");
        let reg = SupervisorRegistry::new(config);
        let sup = attach_to_page(&reg, task, &browser.ws_url, &page, StartOptions::default());
        let fx = Fixture {
            server,
            cdp,
            reg,
            task: task.to_string(),
            page: page.clone(),
            pages: vec![page],
        };
        (fx, sup)
    }

    fn web(&self) -> String {
        self.server.url("127.0.0.1", "/")
    }

    /// `browser_cdp` for this task.
    fn call(&self, method: &str, params: Value) -> Value {
        tools::browser_cdp(
            &self.reg,
            &self.task,
            &json!({"method": method, "params": params}),
        )
    }

    /// `browser_cdp` that must succeed; its `result`.
    fn ok(&self, method: &str, params: Value) -> Value {
        let out = self.call(method, params);
        assert_eq!(out["success"], true, "{method}: {out}");
        out["result"].clone()
    }

    fn eval(&self, expression: &str) -> Value {
        let r = self.ok(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true}),
        );
        r["result"]["value"].clone()
    }

    /// The page's URL as the browser has it.
    fn url_of(&mut self, target: &str) -> String {
        let info = self
            .cdp
            .call("Target.getTargetInfo", json!({"targetId": target}), None, T)
            .expect("Target.getTargetInfo");
        info["targetInfo"]["url"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// The file input's node id.
    fn file_input(&self) -> i64 {
        let root = self.ok("DOM.getDocument", json!({}))["root"]["nodeId"].clone();
        let node = self.ok(
            "DOM.querySelector",
            json!({"nodeId": root, "selector": "#f"}),
        );
        node["nodeId"].as_i64().expect("the file input's nodeId")
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.reg.stop_all();
        for p in std::mem::take(&mut self.pages) {
            let _ = self.cdp.close_page(&p);
        }
    }
}

/// What a raw `Page.navigate` made of a spelling.
#[derive(Debug, PartialEq)]
enum Landed {
    /// A `file:` document (its URL, and whether the marker was readable).
    File(String, bool),
    /// The DevTools frontend or a browser page.
    Privileged(String),
    /// Anything else (a web page, `about:blank`, an error page), or no navigation at all.
    Elsewhere(String),
}

/// Navigates `session` (lifecycle events on) to `url`, raw, waits until the new document (or
/// the error page of a failed navigation, which commits later and would cancel the next one)
/// is parsed, and says where it landed.
fn land(cdp: &mut RawCdp, session: &str, url: &str) -> Landed {
    let nav = match cdp.call("Page.navigate", json!({"url": url}), Some(session), T) {
        Ok(nav) => nav,
        Err(e) => return Landed::Elsewhere(format!("refused by Chromium: {e}")),
    };
    let error = nav.get("errorText").and_then(Value::as_str);
    let Some(loader) = nav.get("loaderId").cloned() else {
        return Landed::Elsewhere(format!("no new document ({error:?})"));
    };
    // An aborted navigation (an external protocol such as `c:`) commits nothing.
    if error == Some("net::ERR_ABORTED") {
        return Landed::Elsewhere("aborted".into());
    }
    let parsed = cdp.wait_event_where(T, |ev| {
        ev["method"] == "Page.lifecycleEvent"
            && ev["sessionId"] == session
            && ev["params"]["name"] == "DOMContentLoaded"
            && ev["params"]["loaderId"] == loader
    });
    cdp.clear_events();
    assert!(parsed.is_some(), "{url:?}: not parsed within {T:?} ({nav})");
    if let Some(e) = error {
        return Landed::Elsewhere(format!("failed: {e}"));
    }
    let probe = cdp
        .evaluate(
            session,
            &format!(
                "[location.href, !!document.documentElement && \
                 document.documentElement.innerText.includes({})]",
                common::js(MARKER)
            ),
            T,
        )
        .unwrap_or_else(|e| panic!("{url:?}: probing the document failed: {e}"));
    let href = probe[0].as_str().unwrap_or_default().to_string();
    let marker = probe[1] == true;
    if href.starts_with("file:") || marker {
        Landed::File(href, marker)
    } else if ["devtools:", "chrome:"].iter().any(|s| href.starts_with(s)) {
        Landed::Privileged(href)
    } else {
        Landed::Elsewhere(href)
    }
}

/// A deterministic sample of every class of generated spelling, and the spellings the issue
/// reported, each sent raw to Chromium and through the policy: every one Chromium loads as a
/// local file (or as a privileged page) is refused, and the task's page never leaves the web.
#[test]
fn every_sampled_spelling_chromium_loads_as_a_local_file_is_refused() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let started = Instant::now();
    let secret = Secret::new("spellings");
    let (mut fx, sup) = Fixture::open(browser, "e2e-sec-spellings", "");
    let web = fx.web();
    let mut spellings = url_spellings::reported(&secret.path);
    spellings.extend(url_spellings::sample(PER_CLASS, &secret.path, &web));
    for class in CLASSES {
        assert!(spellings.iter().any(|s| s.class == class), "{class:?}");
    }
    let (mut raw_page, mut raw_session) = fx.cdp.open_page(&web, T).expect("open the raw page");

    let mut loaded_as_file: Vec<&Spelling> = Vec::new();
    let mut marker_read = 0;
    let mut privileged = 0;
    let mut refused = 0;
    for s in &spellings {
        let landed = land(&mut fx.cdp, &raw_session, &s.text);
        if matches!(landed, Landed::Privileged(_)) {
            // The DevTools frontend, running with its host bindings, may navigate its page
            // itself and cancel the next spelling's navigation: go on in a fresh page.
            let _ = fx.cdp.close_page(&raw_page);
            (raw_page, raw_session) = fx.cdp.open_page(&web, T).expect("open the raw page");
        }
        // The policy's verdict; a refused call also goes through the tool, which must refuse it
        // the same way (an allowed one would navigate the task's page, so it does not).
        let params = json!({"url": s.text});
        let refused_by = sup
            .config()
            .security()
            .check("Page.navigate", &params)
            .err();
        let refused_by = refused_by.map(|(option, _)| option);
        let ours = match refused_by {
            Some(_) => fx.call("Page.navigate", params),
            None => json!({"allowed": true}),
        };
        if let Some(option) = refused_by {
            refused += 1;
            assert_eq!(ours["refused_by"], option, "{ours}");
        }
        match &landed {
            Landed::File(href, marker) => {
                loaded_as_file.push(s);
                marker_read += usize::from(*marker);
                assert_eq!(
                    refused_by,
                    Some("security.allow_file_urls"),
                    "Chromium loads {:?} as {href}, but the policy let it through: {ours}",
                    s.text
                );
            }
            Landed::Privileged(href) => {
                privileged += 1;
                assert_eq!(
                    refused_by,
                    Some("security.allow_page_protocol"),
                    "Chromium opens {:?} as {href}, but the policy let it through: {ours}",
                    s.text
                );
            }
            Landed::Elsewhere(_) => {}
        }
        // The policy also does what the class says (the generated test checks 12,000 of them).
        assert_eq!(refused_by, s.class.refused_by(), "{s:?}: {ours}");
    }
    let _ = fx.cdp.close_page(&raw_page);
    // The file was really read through some spellings of every local class Chromium accepts.
    for class in [Class::File, Class::ViewSource] {
        assert!(
            loaded_as_file
                .iter()
                .any(|s| s.class == class && s.text.contains(&secret.path)),
            "Chromium loaded no {class:?} spelling as a file: the probe is broken"
        );
    }
    // The reported spellings also load through Target.createTarget, and are refused there too.
    let mut created = 0;
    for s in url_spellings::reported(&secret.path) {
        let target = fx
            .cdp
            .new_page(&s.text)
            .expect("Chromium creates the target");
        fx.pages.push(target.clone());
        // The target's URL is the file's, or `view-source:` of it.
        let url = wait_until(CREATED, || {
            let url = fx.url_of(&target);
            let shown = url.strip_prefix("view-source:").unwrap_or(&url);
            shown.starts_with("file:").then_some(url)
        });
        if url.is_some() {
            created += 1;
            let ours = fx.call("Target.createTarget", json!({"url": s.text}));
            assert_eq!(ours["refused_by"], "security.allow_file_urls", "{ours}");
        }
    }
    let page = fx.page.clone();
    assert_eq!(fx.url_of(&page), web, "the task's page was navigated");
    let _ = writeln!(
        std::io::stderr(),
        "e2e_security: {} spellings ({} reported, {PER_CLASS} per generated class): Chromium \
         loaded {} as a local file (its text read in {}), {privileged} as a privileged page; the \
         policy refused {refused}; {created}/8 reported spellings open a file through \
         Target.createTarget; {:.1} s",
        spellings.len(),
        url_spellings::reported("").len(),
        loaded_as_file.len(),
        marker_read,
        started.elapsed().as_secs_f64()
    );
}

/// `DOM.setFileInputFiles`, a drop with files and the file-chooser interception are refused
/// by default (the page gets nothing); with `allow_file_access` the page's input and drop zone
/// read the file's name and content.
#[test]
fn files_reach_the_page_only_with_allow_file_access() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let secret = Secret::new("files");
    let drop_files = |files: &[&str]| {
        json!({"type": "drop", "x": 100, "y": 100,
               "data": {"items": [], "files": files, "dragOperationsMask": 1}})
    };

    let (fx, _sup) = Fixture::open(browser, "e2e-sec-files-default", "");
    let node = fx.file_input();
    let mut enter = drop_files(&[&secret.path]);
    enter["type"] = json!("dragEnter");
    for (method, params) in [
        (
            "DOM.setFileInputFiles",
            json!({"nodeId": node, "files": [secret.path]}),
        ),
        ("Input.dispatchDragEvent", enter),
        ("Input.dispatchDragEvent", drop_files(&[&secret.path])),
        (
            "Page.setInterceptFileChooserDialog",
            json!({"enabled": true}),
        ),
    ] {
        let out = fx.call(method, params);
        assert_eq!(out["refused_by"], "security.allow_file_access", "{out}");
    }
    assert_eq!(
        fx.eval("[document.getElementById('f').files.length, window.dragged]"),
        json!([0, 0]),
        "the page was handed a file"
    );

    let (fx, _sup) = Fixture::open(
        browser,
        "e2e-sec-files-allowed",
        "[security]\nallow_file_access = true\n",
    );
    let node = fx.file_input();
    fx.ok(
        "DOM.setFileInputFiles",
        json!({"nodeId": node, "files": [secret.path]}),
    );
    assert_eq!(
        fx.server.wait_report_json(T),
        json!([format!("input:secret.txt:{MARKER}")])
    );
    for kind in ["dragEnter", "dragOver"] {
        let mut p = drop_files(&[&secret.path]);
        p["type"] = json!(kind);
        fx.ok("Input.dispatchDragEvent", p);
    }
    fx.ok("Input.dispatchDragEvent", drop_files(&[&secret.path]));
    assert_eq!(
        fx.server.wait_report_json(T),
        json!([format!("drop:secret.txt:{MARKER}")])
    );
    assert_eq!(fx.eval("window.dragged"), json!(1));
    fx.ok(
        "Page.setInterceptFileChooserDialog",
        json!({"enabled": false}),
    );
}

/// `Target.exposeDevToolsProtocol`, `Target.openDevTools` and the DevTools frontend are refused
/// by default (the page gets no binding, no DevTools window opens); `allow_page_protocol` lets
/// the binding through.
#[test]
fn the_protocol_reaches_the_page_only_with_allow_page_protocol() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let (mut fx, _sup) = Fixture::open(browser, "e2e-sec-protocol-default", "");
    let page = fx.page.clone();
    for (method, params) in [
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
    ] {
        let out = fx.call(method, params);
        assert_eq!(out["refused_by"], "security.allow_page_protocol", "{out}");
    }
    assert_eq!(fx.eval("typeof window.cdp"), json!("undefined"));
    let devtools = fx.call("Target.getDevToolsTarget", json!({"targetId": page}));
    assert!(
        devtools["result"]["targetId"].is_null(),
        "a DevTools window is open: {devtools}"
    );
    assert!(fx.url_of(&page).starts_with("http://127.0.0.1:"));

    let (fx, _sup) = Fixture::open(
        browser,
        "e2e-sec-protocol-allowed",
        "[security]\nallow_page_protocol = true\n",
    );
    fx.ok(
        "Target.exposeDevToolsProtocol",
        json!({"targetId": fx.page, "bindingName": "cdp"}),
    );
    assert_eq!(fx.eval("typeof window.cdp"), json!("object"));
}

/// A command inside `Target.sendMessageToTarget` runs on the target (shown raw: it loads the
/// file), so the policy checks it like any other: the nested navigation is refused; a nested
/// evaluate is refused by default (the session may be on any target) and goes through with
/// `allow_page_protocol`, which still refuses the navigation.
#[test]
fn a_command_nested_in_send_message_to_target_is_refused_like_a_direct_one() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let secret = Secret::new("nested");
    let (mut fx, _sup) = Fixture::open(
        browser,
        "e2e-sec-nested",
        "[security]\nallow_page_protocol = true\n",
    );
    let navigate = json!({"id": 1, "method": "Page.navigate",
                          "params": {"url": format!("file://{}", secret.path)}})
    .to_string();

    // Raw, past the policy: Chromium runs the nested command.
    let (raw_page, _) = fx.cdp.open_page(&fx.web(), T).expect("open the raw page");
    fx.pages.push(raw_page.clone());
    let raw_session = fx
        .cdp
        .call(
            "Target.attachToTarget",
            json!({"targetId": raw_page, "flatten": false}),
            None,
            T,
        )
        .expect("attach without flattening")["sessionId"]
        .as_str()
        .expect("sessionId")
        .to_string();
    fx.cdp
        .call(
            "Target.sendMessageToTarget",
            json!({"sessionId": raw_session, "message": navigate}),
            None,
            T,
        )
        .expect("Chromium takes the nested command");
    let loaded = wait_until(T, || {
        Some(fx.url_of(&raw_page)).filter(|u| u.starts_with("file:"))
    });
    assert!(
        loaded.is_some(),
        "the nested navigation did not load the file"
    );

    // Through the policy.
    // Through the policy. (The supervisor lets go of sessions it did not open, so Chromium may
    // no longer know this one when the nested command arrives: what matters is whether the
    // policy sends it.)
    let session = fx.ok(
        "Target.attachToTarget",
        json!({"targetId": fx.page, "flatten": false}),
    )["sessionId"]
        .clone();
    let out = fx.call(
        "Target.sendMessageToTarget",
        json!({"sessionId": session, "message": navigate}),
    );
    assert_eq!(out["refused_by"], "security.allow_file_urls", "{out}");
    let eval = json!({"id": 2, "method": "Runtime.evaluate", "params": {"expression": "1"}});
    let config = Config::default();
    let default = config.security();
    let params = json!({"sessionId": session, "message": eval.to_string()});
    assert_eq!(
        default
            .check("Target.sendMessageToTarget", &params)
            .err()
            .map(|(option, _)| option),
        Some("security.allow_page_protocol")
    );
    let out = fx.call(
        "Target.sendMessageToTarget",
        json!({"sessionId": session, "message": eval.to_string()}),
    );
    assert!(out.get("refused_by").is_none(), "{out}");
    assert!(
        out["success"] == true || out["cdp_error"]["message"] == "No session with given id",
        "the nested evaluate did not reach Chromium: {out}"
    );
    let page = fx.page.clone();
    assert!(fx.url_of(&page).starts_with("http://127.0.0.1:"));
}

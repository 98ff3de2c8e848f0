//! `cdp-supervisor demo`: the main job, narrated.
//!
//! Launches headless Chromium, serves a page from `127.0.0.1` holding a cross-site iframe from
//! `localhost` (a real out-of-process iframe), attaches a supervisor, and walks through: alert,
//! confirm, prompt (the page's own JS reports what it got back), the frame tree, an evaluation
//! inside the OOPIF, a dialog raised inside the OOPIF, an agent call a dialog blocks, and a popup
//! the page opens whose confirm() on load is caught (issue 14). Without Chromium it says how to install
//! one and runs the dialog steps against the built-in fake CDP browser.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cdp_supervisor::fake::FakeBrowser;
use cdp_supervisor::unversioned::find_browser;
use cdp_supervisor::{Config, DialogAction, DialogKind, Route, Supervisor, SupervisorRegistry};
use serde_json::json;

use crate::Cleanup;
use crate::http::Server;

const WAIT: Duration = Duration::from_secs(10);

struct Row {
    step: String,
    outcome: String,
    ms: f64,
}

/// Where dialogs come from and how we learn what the page got.
enum Stage {
    Chromium { server: Server },
    Fake { fake: FakeBrowser },
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn say(s: &str) {
    println!("{s}");
}

const MAIN_PAGE: &str = r#"<!doctype html><html><head><meta charset="utf-8"><title>cdp-supervisor demo</title></head>
<body><h1>cdp-supervisor demo</h1>
<script>
function report(v) { fetch('/report?' + encodeURIComponent(JSON.stringify(v))); }
</script>
<iframe id="ads" src="http://localhost:{{PORT}}/frame" width="400" height="120"></iframe>
</body></html>"#;

const POPUP_PAGE: &str = r#"<!doctype html><html><head><meta charset="utf-8"><title>Sign-in popup</title></head>
<body><p>A popup the page opened.</p>
<script>
function report(v) { fetch('/report?' + encodeURIComponent(JSON.stringify(v))); }
</script>
<script>report(confirm('Allow the sign-in popup to continue?'));</script></body></html>"#;

const FRAME_PAGE: &str = r#"<!doctype html><html><head><meta charset="utf-8"><title>Cross-site frame</title></head>
<body><p>I live on another site, in another process.</p>
<script>
function report(v) { fetch('/report?' + encodeURIComponent(JSON.stringify(v))); }
</script></body></html>"#;

/// Runs the demo. `Err` only for what the user must fix (a bad `CHROME`, a browser that fails).
pub fn run(config: Config, cleanup: &Cleanup) -> Result<(), String> {
    say("cdp-supervisor demo: a persistent CDP connection that catches native JS dialogs");
    say("");
    let exe = find_browser(config.chrome_path.as_deref()).map_err(|e| e.to_string())?;
    let (stage, ws_url, page_url) = match exe {
        Some(exe) => {
            let t = Instant::now();
            let ws = crate::launch_browser(&config, cleanup)?.ok_or("browser vanished")?;
            say(&format!(
                "==> launched {} headless in {:.0} ms",
                exe.display(),
                ms(t.elapsed())
            ));
            let mut pages = HashMap::new();
            pages.insert("/", MAIN_PAGE.to_string());
            pages.insert("/frame", FRAME_PAGE.to_string());
            pages.insert("/popup", POPUP_PAGE.to_string());
            let server = Server::start(pages).map_err(|e| e.to_string())?;
            let page_url = format!("http://127.0.0.1:{}/", server.port());
            (Stage::Chromium { server }, ws, Some(page_url))
        }
        None => {
            say("==> no Chromium found (set CHROME, or install it: apt-get install -y chromium)");
            say("    running against the built-in fake CDP browser instead");
            let fake = FakeBrowser::start().map_err(|e| e.to_string())?;
            let ws = fake.ws_url();
            (Stage::Fake { fake }, ws, None)
        }
    };
    let registry = Arc::new(SupervisorRegistry::new(config));
    cleanup.set_registry(Arc::clone(&registry));
    let mut rows = Vec::new();

    let t = Instant::now();
    let sup = registry
        .get_or_start("demo", &ws_url)
        .map_err(|e| format!("attach failed: {e}"))?;
    let attach = t.elapsed();
    say(&format!(
        "==> supervisor attached to page target {} in {:.1} ms",
        sup.snapshot().page_target_id.as_deref().unwrap_or("?"),
        ms(attach)
    ));
    rows.push(Row {
        step: "attach".into(),
        outcome: "page target attached".into(),
        ms: ms(attach),
    });

    if let (Stage::Chromium { server }, Some(url)) = (&stage, &page_url) {
        let t = Instant::now();
        let page = sup.snapshot().page_target_id.clone().unwrap_or_default();
        sup.call(
            "Page.navigate",
            json!({"url": url}),
            Route::Target(&page),
            WAIT,
        )
        .map_err(|e| e.to_string())?;
        let navigated = sup.wait_for(WAIT, |s| {
            s.frame_tree.children.iter().any(|c| c.is_oopif)
                && s.frame_tree.top.as_ref().is_some_and(|t| t.url == *url)
        });
        // Wait for the load event (it waits for the iframes too): Chromium cancels an open
        // dialog when any frame of the page commits a navigation, so a dialog raised while the
        // cross-site iframe is still loading would be closed by the browser itself.
        let loaded = navigated.is_some()
            && sup
                .call(
                    "Runtime.evaluate",
                    json!({
                        "expression": "document.readyState === 'complete' || new Promise(r => addEventListener('load', () => r(true)))",
                        "awaitPromise": true,
                        "returnByValue": true,
                    }),
                    Route::Target(&page),
                    WAIT,
                )
                .is_ok();
        say(&format!(
            "==> loaded {url} with its cross-site iframe ({:.0} ms){}",
            ms(t.elapsed()),
            if loaded {
                ""
            } else {
                " — the page did not finish loading in time"
            }
        ));
        let _ = server;
    }

    let steps: [(&str, &str, &str, Option<&str>, DialogAction); 3] = [
        (
            "alert",
            "Hello from the page",
            "",
            None,
            DialogAction::Accept,
        ),
        (
            "confirm",
            "Delete everything?",
            "",
            None,
            DialogAction::Dismiss,
        ),
        (
            "prompt",
            "Your name?",
            "anonymous",
            Some("Ada Lovelace ✓"),
            DialogAction::Accept,
        ),
    ];
    for (i, (kind, message, default, text, action)) in steps.iter().enumerate() {
        say("");
        say(&format!("[{}] the page calls {kind}({message:?})", i + 1));
        let t = Instant::now();
        trigger(&stage, &sup, None, kind, message, default)?;
        let Some(d) = sup.wait_for_dialog(WAIT) else {
            return Err(format!("the {kind} was not detected within {WAIT:?}"));
        };
        let detected = t.elapsed();
        say(&format!(
            "    detected {} ({}) {:.2} ms after the trigger; the page's JS is blocked",
            d.id,
            d.kind,
            ms(detected)
        ));
        let t = Instant::now();
        sup.respond_to_dialog(*action, *text, Some(&d.id))
            .map_err(|e| e.to_string())?;
        let answered = t.elapsed();
        let got = page_result(&stage, &sup, &d.id);
        say(&format!(
            "    answered with {}{} in {:.2} ms; the page's JS got {got}",
            action.as_str(),
            text.map(|t| format!(" {t:?}")).unwrap_or_default(),
            ms(answered)
        ));
        rows.push(Row {
            step: format!("{kind} detect"),
            outcome: format!("{} pending", d.id),
            ms: ms(detected),
        });
        rows.push(Row {
            step: format!("{kind} answer"),
            outcome: format!("page got {got}"),
            ms: ms(answered),
        });
    }

    if let Stage::Chromium { server } = &stage {
        say("");
        say("[4] the frame tree, including the cross-site (out-of-process) iframe");
        let snap = sup.snapshot();
        if let Some(top) = &snap.frame_tree.top {
            say(&format!("    top   {}  {}", top.frame_id, top.url));
        }
        for c in &snap.frame_tree.children {
            say(&format!(
                "    child {}  {}  {}",
                c.frame_id,
                c.url,
                if c.is_oopif {
                    format!("OOPIF, session {}", c.session_id.as_deref().unwrap_or("?"))
                } else {
                    "same process".into()
                }
            ));
        }
        if let Some(oopif) = snap.frame_tree.children.iter().find(|c| c.is_oopif) {
            say("");
            say("[5] Runtime.evaluate(document.title) routed into the OOPIF");
            let t = Instant::now();
            let r = sup
                .call(
                    "Runtime.evaluate",
                    json!({"expression": "document.title + ' @ ' + location.host", "returnByValue": true}),
                    Route::Frame(&oopif.frame_id),
                    WAIT,
                )
                .map_err(|e| e.to_string())?;
            let took = t.elapsed();
            let v = r["result"]["value"].as_str().unwrap_or("?").to_string();
            say(&format!("    -> {v:?} in {:.2} ms", ms(took)));
            rows.push(Row {
                step: "evaluate in OOPIF".into(),
                outcome: v,
                ms: ms(took),
            });

            say("");
            say("[6] a prompt raised inside the OOPIF");
            let t = Instant::now();
            trigger(
                &stage,
                &sup,
                Some(&oopif.frame_id),
                "prompt",
                "Frame asks: colour?",
                "blue",
            )?;
            let d = sup
                .wait_for_dialog(WAIT)
                .ok_or("the OOPIF's prompt was not detected")?;
            let detected = t.elapsed();
            say(&format!(
                "    detected {} from frame {} ({:.2} ms)",
                d.id,
                d.frame_id.as_deref().unwrap_or("?"),
                ms(detected)
            ));
            sup.respond_to_dialog(DialogAction::Accept, Some("green"), Some(&d.id))
                .map_err(|e| e.to_string())?;
            let got = page_result(&stage, &sup, &d.id);
            say(&format!(
                "    answered \"green\"; the iframe's JS got {got}"
            ));
            rows.push(Row {
                step: "OOPIF prompt".into(),
                outcome: format!("frame got {got}"),
                ms: ms(detected),
            });
        } else {
            say("    (no out-of-process iframe appeared; skipping steps 5 and 6)");
        }

        say("");
        say(
            "[7] the agent's own Runtime.evaluate calls confirm(): it does not wait for its deadline",
        );
        let t = Instant::now();
        let r = sup.call(
            "Runtime.evaluate",
            json!({"expression": "window.agentAnswer = confirm('Proceed with checkout?')"}),
            Route::Page,
            Duration::from_secs(30),
        );
        let took = t.elapsed();
        let Err(cdp_supervisor::Error::BlockedByDialog { dialog, method }) = r else {
            return Err(format!(
                "expected the evaluate to be blocked by its dialog, got {r:?}"
            ));
        };
        say(&format!(
            "    {method} returned BlockedByDialog({} {:?}) after {:.2} ms (its deadline was 30 s)",
            dialog.id,
            dialog.message,
            ms(took)
        ));
        sup.respond_to_dialog(DialogAction::Accept, None, Some(&dialog.id))
            .map_err(|e| e.to_string())?;
        let v = sup
            .call(
                "Runtime.evaluate",
                json!({"expression": "window.agentAnswer", "returnByValue": true}),
                Route::Page,
                WAIT,
            )
            .map_err(|e| e.to_string())?;
        let got = v["result"]["value"].to_string();
        say(&format!(
            "    accepted; the page's confirm() returned {got}"
        ));
        rows.push(Row {
            step: "blocked call".into(),
            outcome: format!("BlockedByDialog, then page got {got}"),
            ms: ms(took),
        });

        popup_step(server, &sup, &mut rows)?;
    }

    say("");
    let recent = sup.snapshot().recent_dialogs.clone();
    say("closed dialogs: ");
    for c in recent.iter() {
        say(&format!(
            "    {}  {:8} closed_by={}",
            c.dialog.id, c.dialog.kind, c.closed_by
        ));
    }
    say("");
    say("summary");
    say(&format!("    {:<20} {:>10}  {}", "step", "ms", "outcome"));
    for r in &rows {
        say(&format!("    {:<20} {:>10.2}  {}", r.step, r.ms, r.outcome));
    }
    let t = Instant::now();
    registry.stop_all();
    say(&format!(
        "\nstopped the supervisor in {:.1} ms; bye",
        ms(t.elapsed())
    ));
    Ok(())
}

/// Step 8: the page opens a popup whose script asks a confirm() on load; the supervisor follows
/// the popup, catches the dialog before the popup runs on, and the answer reaches it.
fn popup_step(server: &Server, sup: &Supervisor, rows: &mut Vec<Row>) -> Result<(), String> {
    say("");
    say("[8] the page opens a popup (window.open) that asks a confirm() as it loads");
    let page = sup.snapshot().page_target_id.clone().unwrap_or_default();
    let t = Instant::now();
    sup.call(
        "Runtime.evaluate",
        json!({"expression": "window.open('/popup'); 'opened'", "userGesture": true}),
        Route::Page,
        WAIT,
    )
    .map_err(|e| format!("window.open failed: {e}"))?;
    let snap = sup
        .wait_for(WAIT, |s| {
            s.pending_dialogs.iter().any(|d| d.target_id != page)
        })
        .ok_or("the popup's dialog was not detected")?;
    let took = t.elapsed();
    let Some(d) = snap.pending_dialogs.iter().find(|d| d.target_id != page) else {
        return Err("the popup's dialog vanished".into());
    };
    say(&format!(
        "    detected {} ({}) {:?} in popup target {} after {:.1} ms",
        d.id,
        d.kind,
        d.message,
        d.target_id,
        ms(took)
    ));
    for p in snap.pages.iter() {
        say(&format!(
            "    pages: {}  {}  opener={}",
            p.target_id,
            p.url,
            p.opener_target_id.as_deref().unwrap_or("-")
        ));
    }
    sup.respond_to_dialog(DialogAction::Accept, None, Some(&d.id))
        .map_err(|e| e.to_string())?;
    let got = server
        .next_report(WAIT)
        .unwrap_or_else(|| "(no report from the popup)".into());
    say(&format!("    accepted; the popup's confirm() got {got}"));
    let popup = d.target_id.clone();
    let _ = sup.call(
        "Target.closeTarget",
        json!({"targetId": popup}),
        Route::Browser,
        WAIT,
    );
    let gone = sup.wait_for(WAIT, |s| s.pages.iter().all(|p| p.target_id != popup));
    say(&format!(
        "    closed the popup: {}",
        if gone.is_some() {
            "it left pages"
        } else {
            "still listed"
        }
    ));
    rows.push(Row {
        step: "popup confirm".into(),
        outcome: format!("detected in the popup, popup got {got}"),
        ms: ms(took),
    });
    Ok(())
}

fn trigger(
    stage: &Stage,
    sup: &Supervisor,
    frame: Option<&str>,
    kind: &str,
    message: &str,
    default: &str,
) -> Result<(), String> {
    match stage {
        Stage::Fake { fake } => {
            fake.open_dialog(kind, message, default);
            Ok(())
        }
        Stage::Chromium { .. } => {
            let args = if kind == "prompt" {
                format!("{}, {}", json!(message), json!(default))
            } else {
                json!(message).to_string()
            };
            let expr = format!("setTimeout(() => report({kind}({args})), 0); 'ok'");
            let page = sup.snapshot().page_target_id.clone().unwrap_or_default();
            let route = frame.map(Route::Frame).unwrap_or(Route::Target(&page));
            sup.call("Runtime.evaluate", json!({"expression": expr}), route, WAIT)
                .map(|_| ())
                .map_err(|e| format!("could not trigger the {kind}: {e}"))
        }
    }
}

fn page_result(stage: &Stage, sup: &Supervisor, dialog_id: &str) -> String {
    match stage {
        Stage::Chromium { server } => server
            .next_report(WAIT)
            .unwrap_or_else(|| "(no report from the page)".into()),
        Stage::Fake { .. } => {
            let snap = sup.snapshot();
            match snap.closed_dialog(dialog_id) {
                Some(c) if c.dialog.kind == DialogKind::Prompt => match (c.accepted, &c.user_input)
                {
                    (Some(true), Some(t)) => json!(t).to_string(),
                    _ => "null".into(),
                },
                Some(c) if c.dialog.kind == DialogKind::Confirm => {
                    c.accepted.unwrap_or(false).to_string()
                }
                Some(_) => "undefined".into(),
                None => "(not recorded)".into(),
            }
        }
    }
}

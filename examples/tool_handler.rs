//! A synchronous agent tool host wired to cdp-supervisor: the pattern the README shows.
//!
//! `cargo run --example tool_handler -- [CDP_URL]` — with no URL it launches a local headless
//! Chromium, or, without one, uses the built-in fake browser. It opens a dialog, answers it
//! through the JSON tool handlers and prints every tool result.

use std::sync::Arc;
use std::time::Duration;

use cdp_supervisor::fake::FakeBrowser;
use cdp_supervisor::unversioned::{LaunchedBrowser, find_browser};
use cdp_supervisor::{Config, SupervisorRegistry, tools};
use serde_json::{Value, json};

/// The host's dispatcher: every tool is a plain synchronous function of JSON.
fn handle_tool(registry: &SupervisorRegistry, task_id: &str, name: &str, args: &Value) -> Value {
    match name {
        // Cheap enough to call before every agent step: a wait-free snapshot read.
        "browser_snapshot" => tools::browser_snapshot(registry, task_id, args),
        "browser_dialog" => tools::browser_dialog(registry, task_id, args),
        "browser_cdp" => tools::browser_cdp(registry, task_id, args),
        other => json!({"success": false, "error": format!("unknown tool {other}")}),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Keep whatever provides the endpoint alive for the whole run.
    let mut _browser: Option<LaunchedBrowser> = None;
    let mut fake: Option<FakeBrowser> = None;
    let url = match std::env::args().nth(1) {
        Some(u) => u,
        None => match find_browser(None)? {
            Some(exe) => {
                let b = LaunchedBrowser::launch(&exe)?;
                let u = b.ws_url().to_string();
                _browser = Some(b);
                u
            }
            None => {
                let f = FakeBrowser::start()?;
                let u = f.ws_url();
                fake = Some(f);
                u
            }
        },
    };
    let registry = Arc::new(SupervisorRegistry::new(Config::load(None)?));
    let task = "agent-task-1";
    let sup = registry.get_or_start(task, &url)?;
    println!(
        "attached: {}",
        handle_tool(&registry, task, "browser_snapshot", &json!({}))
    );

    // Something on the page opens a prompt (here: we make it do so).
    match &fake {
        Some(f) => f.open_dialog("prompt", "Your name?", "anonymous"),
        None => {
            let page = sup.snapshot().page_target_id.clone().unwrap_or_default();
            handle_tool(
                &registry,
                task,
                "browser_cdp",
                &json!({"method": "Runtime.evaluate", "target_id": page,
                        "params": {"expression": "setTimeout(() => prompt('Your name?', 'anonymous'), 0)"}}),
            );
        }
    }
    sup.wait_for_dialog(Duration::from_secs(10))
        .ok_or("no dialog appeared")?;
    println!(
        "pending:  {}",
        handle_tool(&registry, task, "browser_snapshot", &json!({}))
    );
    let answer = handle_tool(
        &registry,
        task,
        "browser_dialog",
        &json!({"action": "accept", "prompt_text": "Ada"}),
    );
    println!("answered: {answer}");
    println!(
        "after:    {}",
        handle_tool(&registry, task, "browser_snapshot", &json!({}))
    );
    registry.stop(task);
    Ok(())
}

//! The MCP server at fleet scale (issue 24 point 3): it adds no thread per task. Each task has
//! its supervisor's two threads (reader, watchdog); dialog notifications for every task come from
//! the one `mcp-notify` thread.

use std::cell::RefCell;
use std::collections::HashSet;
use std::time::Duration;

use cdp_supervisor::fake::FakeBrowser;
use serde_json::json;

use crate::common::wait_until;
use crate::mcp_stdio::{Mcp, T, initialize};

/// Tasks connected at the end.
const TASKS: usize = 100;

/// The threads of process `pid` by name (as Linux keeps them: 15 bytes).
fn thread_names(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                .map(|n| n.trim().to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn count(names: &[String], prefix: &str) -> usize {
    names.iter().filter(|n| n.starts_with(prefix)).count()
}

/// Connects tasks `from..to` one after another (so the worker pool does not grow) and returns
/// the server's threads once every supervisor runs its two.
fn connect(mcp: &mut Mcp, ws: &str, from: usize, to: usize) -> Vec<String> {
    for i in from..to {
        mcp.ok_tool(
            "browser_connect",
            json!({"cdp_url": ws, "task_id": format!("fleet-{i}")}),
            T,
        );
    }
    let pid = mcp.pid();
    wait_until(T, || {
        let names = thread_names(pid);
        (count(&names, "cdp-reader") == to && count(&names, "cdp-watchdog") == to).then_some(names)
    })
    .unwrap_or_else(|| panic!("{to} tasks: threads {:?}", thread_names(pid)))
}

#[test]
fn a_hundred_tasks_cost_two_threads_each_and_every_task_still_hears_its_dialog() {
    let fake = FakeBrowser::start().expect("fake browser");
    let ws = fake.ws_url();
    let mut mcp = Mcp::start(&[("CHROME", std::ffi::OsStr::new("/nonexistent/chromium"))]);
    initialize(&mut mcp);

    let one = connect(&mut mcp, &ws, 0, 1);
    let fixed = one.len() - 2;
    let all = connect(&mut mcp, &ws, 1, TASKS);
    eprintln!(
        "MCP server threads: {} with 1 task ({fixed} besides its 2), {} with {TASKS} tasks",
        one.len(),
        all.len()
    );
    assert_eq!(count(&all, "mcp-watch"), 0, "{all:?}");
    assert!(count(&all, "mcp-notify") <= 1, "{all:?}");
    assert!(
        all.len() <= 2 * TASKS + fixed,
        "{TASKS} tasks run on {} threads, more than 2 per task + the {fixed} of one task's \
         server: {all:?}",
        all.len()
    );

    // Every task hears of the dialog in its page, through the one notifier.
    fake.open_dialog("confirm", "fleet?", "");
    let heard = RefCell::new(HashSet::new());
    let all_heard = mcp
        .note(Duration::from_secs(10) + T, |n| {
            let data = &n["params"]["data"];
            let mut heard = heard.borrow_mut();
            if data["event"] == "dialog_opened"
                && let Some(task) = data["task_id"].as_str()
            {
                heard.insert(task.to_string());
            }
            heard.len() == TASKS
        })
        .is_some();
    assert!(
        all_heard,
        "dialog_opened heard for {} of {TASKS} tasks",
        heard.borrow().len()
    );
}

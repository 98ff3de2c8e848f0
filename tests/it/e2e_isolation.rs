//! Issue 28 items 2 and 4 on real Chromium, through the MCP server:
//!
//! * attach mode (a `cdp_url`): every task without `target_id` gets a new page of its own,
//!   never one the browser already held, closed when the task disconnects, over stdio and over
//!   HTTP;
//! * two HTTP clients cannot reach each other's pages (`security.isolate_tasks`): the attack of
//!   the issue (client B lists A's page, connects to it by `target_id`, reads its text, answers
//!   its prompt, closes it) is refused at every step, and A's prompt still gets A's answer;
//!   `isolate_tasks = false` gives a trusted client the whole browser again.
//!
//! The servers attach to the shared Chromium ([`common::shared_browser`]), which holds pages of
//! other tests too: every check is about this test's own pages. Every wait has a deadline.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{self, HttpServer, RawCdp, Response, wait_until};
use crate::mcp_http::{Server, tool};
use crate::mcp_stdio::{Mcp, STOP, initialize};

const T: Duration = Duration::from_secs(15);
const ISOLATE: &str = "security.isolate_tasks";

/// The page targets the browser holds now.
fn pages(cdp: &mut RawCdp) -> Vec<String> {
    let targets = cdp
        .call("Target.getTargets", json!({}), None, T)
        .expect("Target.getTargets");
    targets["targetInfos"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|t| t["type"] == "page")
        .filter_map(|t| t["targetId"].as_str().map(str::to_string))
        .collect()
}

/// The shared browser, holding two pages this test opened (closed on drop).
struct Holding {
    ws_url: String,
    cdp: RawCdp,
    held: Vec<String>,
}

impl Holding {
    fn open() -> Option<Holding> {
        let b = common::shared_browser()?;
        let mut cdp = RawCdp::connect(&b.ws_url).expect("a raw CDP client");
        let held = (0..2)
            .map(|_| {
                cdp.new_page("about:blank")
                    .expect("a page the browser holds")
            })
            .collect();
        Some(Holding {
            ws_url: b.ws_url.clone(),
            cdp,
            held,
        })
    }

    /// Three tasks connected by `connect` got three new pages, none the browser held before.
    fn assert_new_pages(&mut self, before: &[String], got: &[String]) {
        let now = pages(&mut self.cdp);
        for (i, p) in got.iter().enumerate() {
            assert!(
                !before.contains(p),
                "task {i} took page {p} the browser held"
            );
            assert!(now.contains(p), "task {i}'s page {p} is in the browser");
            assert!(!got[..i].contains(p), "task {i} shares page {p}");
        }
        for h in &self.held {
            assert!(!got.contains(h), "a held page was taken");
        }
    }

    /// Waits until none of `gone` is in the browser, and the held pages still are.
    fn assert_closed(&mut self, gone: &[String]) {
        let left = wait_until(T, || {
            let now = pages(&mut self.cdp);
            gone.iter().all(|p| !now.contains(p)).then_some(now)
        })
        .unwrap_or_else(|| panic!("the tasks' pages {gone:?} were not closed"));
        for h in &self.held {
            assert!(left.contains(h), "held page {h} was closed");
        }
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        for h in self.held.clone() {
            let _ = self.cdp.close_page(&h);
        }
    }
}

#[test]
fn attach_mode_gives_each_task_a_new_page_of_its_own_over_stdio() {
    let Some(mut b) = Holding::open() else { return };
    let before = pages(&mut b.cdp);
    let mut mcp = Mcp::start(&[]);
    initialize(&mut mcp);
    let got: Vec<String> = (0..3)
        .map(|i| {
            let c = mcp.ok_tool(
                "browser_connect",
                json!({"cdp_url": b.ws_url, "task_id": format!("attach-{i}")}),
                T,
            );
            assert_eq!(c["launched_browser"], false, "{c}");
            c["page_target_id"].as_str().expect("a page").to_string()
        })
        .collect();
    b.assert_new_pages(&before, &got);
    for i in 0..3 {
        let d = mcp.ok_tool(
            "browser_disconnect",
            json!({"task_id": format!("attach-{i}")}),
            T,
        );
        assert_eq!(d["stopped"], true, "{d}");
    }
    b.assert_closed(&got);
    mcp.close_and_wait(STOP);
}

/// The `Host` header of a server on `addr`.
fn host(addr: SocketAddr) -> String {
    addr.to_string()
}

#[test]
fn attach_mode_gives_each_task_a_new_page_of_its_own_over_http() {
    let Some(mut b) = Holding::open() else { return };
    let before = pages(&mut b.cdp);
    let server = Server::start(&[]);
    let h = host(server.addr);
    let base = [("Host", h.as_str())];
    let conns: Vec<Value> = (0..3)
        .map(|_| {
            tool(
                server.addr,
                &base,
                "browser_connect",
                json!({"cdp_url": b.ws_url}),
            )
        })
        .collect();
    let got: Vec<String> = conns
        .iter()
        .map(|c| {
            c["page_target_id"]
                .as_str()
                .unwrap_or_else(|| panic!("{c}"))
                .to_string()
        })
        .collect();
    b.assert_new_pages(&before, &got);
    for c in &conns {
        let d = tool(
            server.addr,
            &base,
            "browser_disconnect",
            json!({"task_id": c["task_id"]}),
        );
        assert_eq!(d["stopped"], true, "{d}");
    }
    b.assert_closed(&got);
}

/// A page with a secret, which raises a prompt on demand and reports the answer.
fn secret_site() -> HttpServer {
    HttpServer::start(|req| match req.path.as_str() {
        "/secret" => Response::html(
            "<!doctype html><title>A's account</title><p>A's secret balance: 4711</p>",
        ),
        _ => Response::not_found(),
    })
}

/// One client's view of the server: its base headers.
struct Client {
    addr: SocketAddr,
    host: String,
}

impl Client {
    fn call(&self, name: &str, args: Value) -> Value {
        tool(self.addr, &[("Host", self.host.as_str())], name, args)
    }

    fn ok(&self, name: &str, args: Value) -> Value {
        let v = self.call(name, args.clone());
        assert_eq!(v["success"], true, "{name} {args}: {v}");
        v
    }

    fn cdp(&self, task: &str, method: &str, params: Value) -> Value {
        self.call(
            "browser_cdp",
            json!({"task_id": task, "method": method, "params": params}),
        )
    }
}

/// A's task on a page of its own showing the secret page, with a prompt pending when `prompt`;
/// returns (task, page).
fn victim(a: &Client, ws_url: &str, site: &HttpServer, prompt: bool) -> (String, String) {
    let conn = a.ok("browser_connect", json!({"cdp_url": ws_url}));
    let task = conn["task_id"].as_str().expect("a task id").to_string();
    let page = conn["page_target_id"].as_str().expect("a page").to_string();
    let url = site.url("127.0.0.1", "/secret");
    let nav = a.cdp(&task, "Page.navigate", json!({"url": url}));
    assert_eq!(nav["success"], true, "{nav}");
    let loaded = wait_until(T, || {
        let r = a.cdp(
            &task,
            "Runtime.evaluate",
            json!({"expression": "document.readyState === 'complete' && location.pathname", "returnByValue": true}),
        );
        (r["result"]["result"]["value"] == "/secret").then_some(())
    });
    assert!(loaded.is_some(), "A's page loads");
    if !prompt {
        return (task, page);
    }
    let raised = a.cdp(
        &task,
        "Runtime.evaluate",
        json!({"expression": "setTimeout(() => { const r = prompt('A asks: your PIN?', ''); \
               fetch('/report?' + encodeURIComponent(r)); }, 0); 1"}),
    );
    assert_eq!(raised["success"], true, "{raised}");
    let pending = wait_until(T, || {
        let s = a.ok("browser_snapshot", json!({"task_id": task}));
        (s["pending_dialogs"][0]["message"] == "A asks: your PIN?").then_some(())
    });
    assert!(pending.is_some(), "A's prompt is pending");
    (task, page)
}

#[test]
fn one_http_client_cannot_list_take_read_answer_or_close_another_clients_page() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let site = secret_site();
    let server = Server::start(&[]);
    let (a, b) = (
        Client {
            addr: server.addr,
            host: host(server.addr),
        },
        Client {
            addr: server.addr,
            host: host(server.addr),
        },
    );
    let (a_task, a_page) = victim(&a, &browser.ws_url, &site, true);
    let b_conn = b.ok("browser_connect", json!({"cdp_url": browser.ws_url}));
    let b_task = b_conn["task_id"].as_str().expect("B's task").to_string();
    let b_page = b_conn["page_target_id"]
        .as_str()
        .expect("B's page")
        .to_string();

    // B lists its own page only: nothing of A's (its id, URL or title).
    let list = b.cdp(&b_task, "Target.getTargets", json!({}));
    assert_eq!(list["success"], true, "{list}");
    let ids: Vec<&str> = list["result"]["targetInfos"]
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|t| t["targetId"].as_str())
        .collect();
    assert_eq!(ids, [b_page.as_str()], "{list}");
    let text = list.to_string();
    assert!(
        !text.contains("secret") && !text.contains("A's account"),
        "{text}"
    );

    // B cannot take A's page by target_id.
    let taken = b.call(
        "browser_connect",
        json!({"cdp_url": browser.ws_url, "target_id": a_page}),
    );
    assert_eq!(taken["success"], false, "{taken}");
    assert_eq!(taken["refused_by"], ISOLATE, "{taken}");

    // Nor read it, attach to it, look it up, bring it to front or close it: on the browser
    // route and through its own page's session alike.
    let read = b.call(
        "browser_cdp",
        json!({"task_id": b_task, "target_id": a_page, "method": "Runtime.evaluate",
               "params": {"expression": "document.body.innerText", "returnByValue": true}}),
    );
    assert_eq!(read["success"], false, "{read}");
    assert!(!read.to_string().contains("4711"), "{read}");
    for method in [
        "Target.attachToTarget",
        "Target.getTargetInfo",
        "Target.activateTarget",
        "Target.closeTarget",
    ] {
        for route in [Value::Null, json!(b_page)] {
            let out = b.call(
                "browser_cdp",
                json!({"task_id": b_task, "method": method, "target_id": route,
                       "params": {"targetId": a_page, "flatten": true}}),
            );
            assert_eq!(out["success"], false, "{method}: {out}");
            assert_eq!(out["refused_by"], ISOLATE, "{method}: {out}");
        }
    }
    let browser_session = b.cdp(&b_task, "Target.attachToBrowserTarget", json!({}));
    assert_eq!(browser_session["refused_by"], ISOLATE, "{browser_session}");

    // B's browser_dialog answers B's dialogs only: none.
    let answer = b.call(
        "browser_dialog",
        json!({"task_id": b_task, "action": "accept", "prompt_text": "B's text"}),
    );
    assert_eq!(answer["success"], false, "{answer}");

    // A's page is untouched: its prompt is still pending, and gets A's answer.
    let mut raw = RawCdp::connect(&browser.ws_url).expect("a raw client");
    assert!(pages(&mut raw).contains(&a_page), "A's page is open");
    let answered = a.ok(
        "browser_dialog",
        json!({"task_id": a_task, "action": "accept", "prompt_text": "A's text"}),
    );
    assert_eq!(
        answered["dialog"]["message"], "A asks: your PIN?",
        "{answered}"
    );
    assert_eq!(site.wait_report(T).as_deref(), Some("A's text"));
    let snap = a.ok("browser_snapshot", json!({"task_id": a_task}));
    assert_eq!(snap["recent_dialogs"][0]["closed_by"], "agent", "{snap}");
    for (c, task) in [(&a, &a_task), (&b, &b_task)] {
        c.ok("browser_disconnect", json!({"task_id": task}));
    }
}

#[test]
fn with_isolate_tasks_false_one_trusted_client_reaches_every_page() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let site = secret_site();
    let server = Server::start(&[("CDP_SUPERVISOR__SECURITY__ISOLATE_TASKS", "false")]);
    // Two tasks of one client (or two trusted clients) on one page.
    let c = Client {
        addr: server.addr,
        host: host(server.addr),
    };
    let (a_task, a_page) = victim(&c, &browser.ws_url, &site, false);
    let b_conn = c.ok(
        "browser_connect",
        json!({"cdp_url": browser.ws_url, "target_id": a_page}),
    );
    let b_task = b_conn["task_id"].as_str().expect("a task").to_string();
    assert_eq!(b_conn["page_target_id"], a_page.as_str(), "{b_conn}");
    let list = c.cdp(&b_task, "Target.getTargets", json!({}));
    assert!(list.to_string().contains(&a_page), "{list}");
    let read = c.call(
        "browser_cdp",
        json!({"task_id": b_task, "method": "Runtime.evaluate",
               "params": {"expression": "document.body.innerText", "returnByValue": true}}),
    );
    assert!(read.to_string().contains("4711"), "{read}");
    for task in [&b_task, &a_task] {
        c.ok("browser_disconnect", json!({"task_id": task}));
    }
}

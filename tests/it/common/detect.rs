//! The detection page (SPEC §19, issue 32): a loopback site whose pages check, in rounds, the
//! known ways a page tells that a protocol client or an automation layer is attached
//! (`detect.js`, which lists them), in the top page (`http://127.0.0.1:P`), a same-origin iframe
//! (in the top page's renderer) and a cross-site iframe (`http://localhost:P`, an OOPIF).
//!
//! A page reports round 0 as soon as it has loaded; [`DetectSite::advance`] moves its round on
//! (the page long-polls for it) and [`DetectSite::wait_round`] waits for every frame's report.
//! [`flipped`] says which checks differ from round 0. Pages are opened with
//! [`open_detect_page`] from a browser-level connection that never attaches to them, each in a
//! browser context of its own so that it stays visible (headless Chromium shows one tab per
//! window, and a hidden tab would flip `visibility` by itself).

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Browser, HttpServer, RawCdp, Response};

/// The checks' script.
pub const SCRIPT: &str = include_str!("detect.js");

/// The checks a page reports every round (`detect.js`), in the order tables show them.
pub const CHECKS: &[&str] = &[
    "console_debug_error_stack_getter",
    "console_log_error_stack_getter",
    "console_prepare_stack_trace",
    "console_error_message_name_getter",
    "console_tostringtag_getter",
    "console_proxy_traps",
    "console_table_getter",
    "console_format_tostring",
    "console_dir_getter",
    "tostring_alert",
    "tostring_confirm",
    "tostring_prompt",
    "tostring_print",
    "tostring_open",
    "tostring_tostring",
    "descriptors",
    "new_props_window",
    "new_props_document",
    "new_props_prototypes",
    "resource_entries",
    "stack_through_dialogs",
    "main_world_foreign_calls",
    "debugger_pause",
    "navigator_webdriver",
    "visibility",
    "viewport",
    "user_agent",
];

/// How long a page's long poll waits before it asks again.
const POLL: Duration = Duration::from_secs(8);

#[derive(Default)]
struct State {
    /// page -> its current round (`-1`: stop polling).
    rounds: HashMap<String, i64>,
    /// (page, role, round) -> the report.
    reports: HashMap<(String, String, i64), Value>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The three frames' reports of one round.
#[derive(Debug, Clone)]
pub struct Round {
    /// The top page's (`127.0.0.1`).
    pub top: Value,
    /// The same-origin iframe's (`127.0.0.1`, in the top page's renderer).
    pub same: Value,
    /// The cross-site iframe's (`localhost`, an OOPIF).
    pub oopif: Value,
}

/// The frames of a detection page, as they report.
pub const ROLES: [&str; 3] = ["top", "same", "oopif"];

/// The loopback site serving the detection pages.
pub struct DetectSite {
    server: HttpServer,
    shared: Arc<Shared>,
}

fn query_param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == key).then(|| super::percent_decode(v))
    })
}

impl DetectSite {
    /// Starts the site on a loopback port.
    pub fn start() -> DetectSite {
        let shared = Arc::new(Shared::default());
        let handler_shared = Arc::clone(&shared);
        let port_cell: Arc<Mutex<u16>> = Arc::new(Mutex::new(0));
        let handler_port = Arc::clone(&port_cell);
        let server = HttpServer::start(move |req| {
            let port = *handler_port.lock().unwrap_or_else(|p| p.into_inner());
            serve(&handler_shared, port, req)
        });
        *port_cell.lock().unwrap_or_else(|p| p.into_inner()) = server.port();
        DetectSite { server, shared }
    }

    /// The top page of detection page `page`.
    pub fn top_url(&self, page: &str) -> String {
        self.server
            .url("127.0.0.1", &format!("/detect?role=top&p={page}"))
    }

    /// Moves page `page` on to its next round; returns that round.
    pub fn advance(&self, page: &str) -> i64 {
        let mut st = self.shared.lock();
        let r = st.rounds.entry(page.to_string()).or_insert(0);
        *r += 1;
        let now = *r;
        drop(st);
        self.shared.changed.notify_all();
        now
    }

    /// Tells page `page` to stop polling.
    pub fn finish(&self, page: &str) {
        self.shared.lock().rounds.insert(page.to_string(), -1);
        self.shared.changed.notify_all();
    }

    /// Waits for the three frames' reports of `round` on page `page`.
    pub fn wait_round(&self, page: &str, round: i64, timeout: Duration) -> Result<Round, String> {
        let deadline = Instant::now() + timeout;
        let key = |role: &str| (page.to_string(), role.to_string(), round);
        let mut st = self.shared.lock();
        loop {
            if let (Some(top), Some(same), Some(oopif)) = (
                st.reports.get(&key("top")),
                st.reports.get(&key("same")),
                st.reports.get(&key("oopif")),
            ) {
                return Ok(Round {
                    top: top.clone(),
                    same: same.clone(),
                    oopif: oopif.clone(),
                });
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let got: Vec<_> = st
                    .reports
                    .keys()
                    .filter(|(p, _, _)| p == page)
                    .map(|(_, role, r)| format!("{role}#{r}"))
                    .collect();
                return Err(format!(
                    "page {page}: round {round} not reported by every frame within {timeout:?} (have {got:?})"
                ));
            }
            st = self
                .shared
                .changed
                .wait_timeout(st, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

fn serve(shared: &Shared, port: u16, req: &super::Request) -> Response {
    let page = query_param(&req.query, "p").unwrap_or_default();
    match req.path.as_str() {
        "/detect" => {
            let role = query_param(&req.query, "role").unwrap_or_default();
            let iframe = if role == "top" {
                format!(
                    "<iframe id=\"same\" name=\"same\" src=\"/detect?role=same&p={page}\" \
                     width=\"300\" height=\"150\"></iframe>\
                     <iframe id=\"oopif\" src=\"http://localhost:{port}/detect?role=oopif&p={page}\" \
                     width=\"300\" height=\"150\"></iframe>"
                )
            } else {
                String::new()
            };
            // No favicon request (it would be a resource entry of its own); `detectRole` is a
            // main-world global (an isolated world does not see it).
            Response::html(format!(
                "<!doctype html><html><head><meta charset=\"utf-8\"><title>detect {role}</title>\
                 <link rel=\"icon\" href=\"data:,\">\
                 <script>var detectRole = '{role}';</script>\
                 <script src=\"/detect.js?role={role}&p={page}\"></script></head>\
                 <body><p id=\"role\">{role}</p>{iframe}</body></html>"
            ))
        }
        "/detect.js" => Response {
            content_type: "application/javascript; charset=utf-8".into(),
            ..Response::text(SCRIPT)
        },
        "/detect-next" => {
            let after: i64 = query_param(&req.query, "after")
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            let deadline = Instant::now() + POLL;
            let mut st = shared.lock();
            loop {
                let round = st.rounds.get(&page).copied().unwrap_or(0);
                if round > after || round < 0 {
                    return Response::text(round.to_string());
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Response::text(after.to_string());
                }
                st = shared
                    .changed
                    .wait_timeout(st, left)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
        "/detect-report" => {
            let Ok(report) = serde_json::from_slice::<Value>(&req.body) else {
                return Response {
                    status: 400,
                    ..Response::text("bad report")
                };
            };
            let key = (
                report["page"].as_str().unwrap_or_default().to_string(),
                report["role"].as_str().unwrap_or_default().to_string(),
                report["round"].as_i64().unwrap_or(-2),
            );
            shared.lock().reports.insert(key, report);
            shared.changed.notify_all();
            Response {
                status: 204,
                ..Response::text("")
            }
        }
        _ => Response::not_found(),
    }
}

/// Opens `url` in a new window, of a new browser context of `cdp`'s (`own_context`; it goes
/// away with `cdp`) or of the default one, from a browser-level connection that never attaches
/// to the page; returns the page's target id.
pub fn open_detect_page(cdp: &mut RawCdp, url: &str, own_context: bool) -> Result<String, String> {
    let mut params = json!({"url": url, "newWindow": true});
    if own_context {
        let ctx = cdp.call(
            "Target.createBrowserContext",
            json!({"disposeOnDetach": true}),
            None,
            super::DEFAULT_TIMEOUT,
        )?;
        params["browserContextId"] = ctx["browserContextId"].clone();
    }
    let t = cdp.call("Target.createTarget", params, None, super::DEFAULT_TIMEOUT)?;
    t["targetId"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("no targetId in {t}"))
}

/// The checks of `after` whose value differs from `before`'s (both a frame's report).
pub fn flipped(before: &Value, after: &Value) -> Vec<String> {
    CHECKS
        .iter()
        .filter(|c| before["checks"][**c] != after["checks"][**c])
        .map(|c| c.to_string())
        .collect()
}

/// What changed for one check, for messages: `before -> after`, each clipped.
pub fn change(before: &Value, after: &Value, check: &str) -> String {
    let clip = |v: &Value| {
        let s = v.to_string();
        if s.chars().count() > 300 {
            format!("{}…", s.chars().take(300).collect::<String>())
        } else {
            s
        }
    };
    format!(
        "{check}: {} -> {}",
        clip(&before["checks"][check]),
        clip(&after["checks"][check])
    )
}

impl Round {
    /// The report of frame `role` (one of [`ROLES`]).
    pub fn of(&self, role: &str) -> &Value {
        match role {
            "top" => &self.top,
            "same" => &self.same,
            _ => &self.oopif,
        }
    }
}

/// Which checks flipped in round `after` against `before`, per frame.
#[derive(Debug, Clone, Default)]
pub struct Flips {
    /// In the top page.
    pub top: Vec<String>,
    /// In the same-origin iframe.
    pub same: Vec<String>,
    /// In the OOPIF.
    pub oopif: Vec<String>,
}

impl Flips {
    /// Compares two rounds.
    pub fn of(before: &Round, after: &Round) -> Flips {
        Flips {
            top: flipped(&before.top, &after.top),
            same: flipped(&before.same, &after.same),
            oopif: flipped(&before.oopif, &after.oopif),
        }
    }

    /// The flips of frame `role`.
    pub fn of_role(&self, role: &str) -> &[String] {
        match role {
            "top" => &self.top,
            "same" => &self.same,
            _ => &self.oopif,
        }
    }

    /// Nothing flipped anywhere.
    pub fn none(&self) -> bool {
        ROLES.iter().all(|r| self.of_role(r).is_empty())
    }

    /// Every change, for a failure message.
    pub fn describe(&self, before: &Round, after: &Round) -> String {
        let mut out = String::new();
        for role in ROLES {
            for c in self.of_role(role) {
                out.push_str(&format!(
                    "  {role:<5} {}\n",
                    change(before.of(role), after.of(role), c)
                ));
            }
        }
        out
    }
}

/// How long a round may take to be reported.
pub const ROUND_WAIT: Duration = Duration::from_secs(15);

/// A private Chromium (one per test: a window that opens elsewhere in the same browser could
/// take the focus, which `visibility` checks), the site, and a browser-level connection that
/// opens the pages and never attaches to them.
pub struct Lab {
    /// The browser's DevTools WebSocket URL.
    pub ws_url: String,
    /// The site.
    pub site: DetectSite,
    /// Where pages open: a browser context of their own (a window each), or the default one
    /// (a new window of it), where every client sees them.
    pub own_context: bool,
    opener: RawCdp,
    pages: u32,
    /// Keeps the browser alive (a test [`Browser`], or one the supervisor's launch started).
    _browser: Box<dyn Any>,
}
/// A detection page: the site's name for it and its target id.
#[derive(Debug, Clone)]
pub struct DetectPage {
    /// The site's name (`p=`).
    pub name: String,
    /// Its target id.
    pub target: String,
}

/// One measured client: both rounds and what flipped.
pub struct Measured {
    /// Round 0.
    pub before: Round,
    /// Round 1.
    pub after: Round,
    /// What changed.
    pub flips: Flips,
}

impl Lab {
    /// `None` (after the loud skip line) without Chromium.
    pub fn new(extra_args: &[&str]) -> Option<Lab> {
        super::shared_browser()?;
        let browser = Browser::launch_with_args(extra_args).expect("launch Chromium");
        let ws_url = browser.ws_url.clone();
        Some(Lab::on(&ws_url, Box::new(browser)))
    }

    /// A lab on the browser at `ws_url`, which `keep` keeps alive.
    pub fn on(ws_url: &str, keep: Box<dyn Any>) -> Lab {
        Lab {
            ws_url: ws_url.to_string(),
            site: DetectSite::start(),
            own_context: true,
            opener: RawCdp::connect(ws_url).expect("connect"),
            pages: 0,
            _browser: keep,
        }
    }

    /// The browser's DevTools HTTP endpoint (`http://127.0.0.1:PORT`).
    pub fn http_url(&self) -> String {
        let authority = self
            .ws_url
            .trim_start_matches("ws://")
            .split('/')
            .next()
            .unwrap_or_default();
        format!("http://{authority}")
    }

    /// Opens a fresh detection page and waits for its round 0 (nobody attached yet).
    pub fn open(&mut self) -> Result<(DetectPage, Round), String> {
        self.pages += 1;
        let name = format!("p{}", self.pages);
        let url = self.site.top_url(&name);
        let target = open_detect_page(&mut self.opener, &url, self.own_context)?;
        let page = DetectPage { name, target };
        let before = self.site.wait_round(&page.name, 0, ROUND_WAIT)?;
        Ok((page, before))
    }

    /// Asks `page` for its next round and waits for it.
    pub fn next_round(&self, page: &DetectPage) -> Result<Round, String> {
        let round = self.site.advance(&page.name);
        self.site.wait_round(&page.name, round, ROUND_WAIT)
    }

    /// Stops `page` polling and closes it.
    pub fn close(&mut self, page: &DetectPage) {
        self.site.finish(&page.name);
        let _ = self.opener.close_page(&page.target);
    }

    /// The browser's product string (`Browser.getVersion`).
    pub fn product(&mut self) -> String {
        self.opener
            .call(
                "Browser.getVersion",
                json!({}),
                None,
                super::DEFAULT_TIMEOUT,
            )
            .ok()
            .and_then(|v| v["product"].as_str().map(str::to_string))
            .unwrap_or_default()
    }

    /// Opens a page, runs `attach(ws_url, target)` (which returns what keeps the client
    /// attached), asks for round 1 and returns both rounds.
    pub fn measure(
        &mut self,
        attach: impl FnOnce(&str, &str) -> Result<Box<dyn Any>, String>,
    ) -> Result<Measured, String> {
        let (page, before) = self.open()?;
        let result = (|| {
            let guard = attach(&self.ws_url, &page.target)?;
            let after = self.next_round(&page);
            drop(guard);
            let after = after?;
            let flips = Flips::of(&before, &after);
            Ok(Measured {
                before,
                after,
                flips,
            })
        })();
        self.close(&page);
        result
    }
}

/// The page's OOPIF target (the detection page's iframe), found browser-level.
pub fn oopif_of(cdp: &mut RawCdp, page_target: &str) -> Result<String, String> {
    let mut found = None;
    super::wait_until(ROUND_WAIT, || {
        let t = cdp
            .call("Target.getTargets", json!({}), None, super::DEFAULT_TIMEOUT)
            .ok()?;
        found = t["targetInfos"].as_array()?.iter().find_map(|i| {
            (i["type"] == "iframe"
                && i["parentFrameId"].as_str() == Some(page_target)
                && i["url"].as_str().is_some_and(|u| u.contains("role=oopif")))
            .then(|| i["targetId"].as_str().unwrap_or_default().to_string())
        });
        found.clone()
    })
    .ok_or_else(|| format!("no OOPIF target under {page_target}"))
}

/// A raw client: attaches to the page and to its OOPIF (`Target.attachToTarget`, flat) and
/// sends `commands` on both sessions, in order, each waited for.
pub fn raw_client(
    ws: &str,
    target: &str,
    commands: &[(&str, Value)],
) -> Result<Box<dyn Any>, String> {
    let mut cdp = RawCdp::connect(ws).map_err(|e| e.to_string())?;
    let oopif = oopif_of(&mut cdp, target)?;
    for t in [target, oopif.as_str()] {
        let sid = cdp.attach(t)?;
        for (m, p) in commands {
            cdp.call(m, p.clone(), Some(&sid), super::DEFAULT_TIMEOUT)
                .map_err(|e| format!("{m}: {e}"))?;
        }
    }
    Ok(Box::new(cdp))
}

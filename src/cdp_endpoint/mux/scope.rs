//! What a client may see and do: its task's targets only (issue 30 point 5) and the task's
//! `[security]` policy (point 6).
//!
//! # The task's targets
//!
//! A target is the task's ([`Mux::judge`]) when the task reaches it (`security::isolation`'s
//! rule: its page, the popups it follows or watches, the pages it created, their frames, an
//! iframe whose `parentFrameId` is one of their frames), when a page of the task opened it
//! (`openerId`: the supervisor may not have followed it yet), or when it joined through the
//! task's clients (`State::joined`): a page a client created (`Target.createTarget`, which the
//! supervisor then follows like a popup, after a reconnect too: `Core::adopt_created`,
//! `Core::readopt_created`), a target attached under a
//! client session on one of the task's (its iframes and workers). `[endpoint] all_targets`
//! shows everything.
//!
//! * `Target.getTargets` replies list the task's targets; `targetCreated`, `targetInfoChanged`
//!   on a client's browser session come for the task's targets, `targetDestroyed` and
//!   `targetCrashed` for the targets the client was shown.
//! * A browser-level `attachedToTarget` (auto-attach) to another target is never shown: the
//!   page is resumed when it waits for the debugger and its session let go at once (so a
//!   client's `waitForDebuggerOnStart` never holds another task's new page).
//! * `tab` targets (Puppeteer attaches to tabs, then to their page under the tab's session)
//!   carry no link to their page: a tab is shown until the page attached under it turns out
//!   not to be the task's; then the tab's session is let go too and the client is told the tab
//!   went away (`detachedFromTarget`, `targetDestroyed`), and the tab is not shown again.
//! * A page a client is creating is not known until the browser answers: while a client has a
//!   `Target.createTarget` in flight, every client's browser-level events about pages not known
//!   yet are held (another client that discovers targets hears of the new page too), and judged
//!   again (in order, before the reply) when an answer names a new page.
//!
//! Service workers and shared workers reached from no session of the task are not shown.
//!
//! # Security
//!
//! Each command passes `security::judge_task_call`, the function `browser_cdp` runs
//! (`[security]` rules, then `isolate_tasks` on this scope). One exception, for Playwright,
//! whose `connectOverCDP` sets a download path (`Browser.setDownloadBehavior` with
//! `downloadPath` in its own `playwright-artifacts-*` directory under the system temp
//! directory) and fails to connect when refused: a `downloadPath` naming an existing directory
//! under the system temp directory passes as the task's own download directory does. No URL
//! rule is loosened: `file:` navigation stays refused (`security.allow_file_urls`).

use std::sync::atomic::Ordering;

use rustc_hash::FxHashSet;
use serde_json::Value;
use serde_json::value::RawValue;

use super::{Mux, Out, State, deliver};
use crate::security::isolation::{self, Reach};
use crate::snapshot::Snapshot;

/// What a target is to a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Seen {
    Task,
    Foreign,
    /// Perhaps the page the client is creating: held until the browser answers.
    Unknown,
}

/// The session an event came on, to a client: its browser session (`browser`), or the root of a
/// page client (`root`: `Target.*` events there are screened as a browser session's, since a
/// page connection discovers and attaches as the browser's does).
#[derive(Debug, Clone, Copy)]
pub(super) struct Level {
    pub(super) browser: bool,
    pub(super) root: bool,
}

/// The task's reach as a client's view needs it: the snapshot's, and what joined through the
/// task's clients.
struct Scope<'a> {
    snap: &'a Snapshot,
    joined: &'a FxHashSet<String>,
}

impl Reach for Scope<'_> {
    fn owns_target(&self, target_id: &str) -> bool {
        self.joined.contains(target_id) || self.snap.owns_target(target_id)
    }

    fn owns_frame(&self, frame_id: &str) -> bool {
        self.joined.contains(frame_id) || self.snap.owns_frame(frame_id)
    }

    fn owns_context(&self, context_id: &str) -> bool {
        self.snap.owns_context(context_id)
    }
}

fn text<'v>(v: &'v Value, key: &str) -> &'v str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn params_of(params: Option<&RawValue>) -> Value {
    params
        .and_then(|p| serde_json::from_str(p.get()).ok())
        .unwrap_or(Value::Null)
}

/// A `downloadPath` Playwright sets on connect (module doc): an existing directory under the
/// system temp directory.
fn temp_download_dir(method: &str, params: &Value) -> Option<std::path::PathBuf> {
    if !matches!(
        method,
        "Browser.setDownloadBehavior" | "Page.setDownloadBehavior"
    ) {
        return None;
    }
    let path = std::path::Path::new(crate::security::param(params, "downloadPath")?.as_str()?);
    let real = path.canonicalize().ok()?;
    let temp = std::env::temp_dir().canonicalize().ok()?;
    (real.is_dir() && real != temp && real.starts_with(&temp)).then(|| path.to_path_buf())
}

impl Mux {
    fn snap(&self) -> Option<std::sync::Arc<Snapshot>> {
        Some(self.shared.upgrade()?.snapshot.load_full())
    }

    /// Whether `info` (a `TargetInfo`) is one of the task's targets, for `client`.
    pub(super) fn judge(&self, st: &State, snap: &Snapshot, _client: u64, info: &Value) -> Seen {
        let (kind, id) = (text(info, "type"), text(info, "targetId"));
        if self.policy.all_targets || kind == "browser" {
            return Seen::Task;
        }
        if kind == "tab" {
            return match st.foreign_tabs.contains(id) {
                true => Seen::Foreign,
                false => Seen::Task,
            };
        }
        let scope = Scope {
            snap,
            joined: &st.joined,
        };
        let opener = info.get("openerId").and_then(Value::as_str);
        if isolation::is_task_target(&scope, info) || opener.is_some_and(|o| scope.owns_target(o)) {
            return Seen::Task;
        }
        let creating = st.clients.values().any(|c| c.creating > 0);
        match creating && kind == "page" {
            true => Seen::Unknown,
            false => Seen::Foreign,
        }
    }

    /// The `[security]` policy on one client command (module doc).
    pub(super) fn judge_command(
        &self,
        st: &State,
        snap: &Snapshot,
        method: &str,
        params: &Value,
    ) -> Result<(), crate::error::Error> {
        let scope = Scope {
            snap,
            joined: &st.joined,
        };
        let temp = temp_download_dir(method, params);
        let own = temp.as_deref().or(self.policy.own_downloads.as_deref());
        crate::security::judge_task_call(&self.policy.security, own, &scope, method, params)
    }

    /// An event on `client`'s `session`: true when it is not to be delivered (not the task's,
    /// held, or let go; module doc), false to deliver it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn screen(
        &self,
        st: &mut State,
        client: u64,
        session: &str,
        level: Level,
        method: &str,
        params: Option<&RawValue>,
        raw: &str,
    ) -> bool {
        if self.policy.all_targets || !method.starts_with("Target.") {
            return false;
        }
        let Some(snap) = self.snap() else {
            return false;
        };
        let browser_level = level.browser;
        let browser_like = level.browser || level.root;
        match method {
            "Target.targetCreated" | "Target.targetInfoChanged" if browser_like => {
                let p = params_of(params);
                let info = p.get("targetInfo").cloned().unwrap_or(Value::Null);
                match self.judge(st, &snap, client, &info) {
                    Seen::Task => {
                        self.shown(st, client, &info);
                        false
                    }
                    Seen::Foreign => true,
                    Seen::Unknown => self.hold(st, client, raw),
                }
            }
            "Target.targetDestroyed" | "Target.targetCrashed" if browser_like => {
                let p = params_of(params);
                let id = text(&p, "targetId");
                let gone = method == "Target.targetDestroyed";
                if gone {
                    st.joined.remove(id);
                }
                let shown = st.clients.get_mut(&client).is_some_and(|c| match gone {
                    true => c.shown.remove(id),
                    false => c.shown.contains(id),
                });
                !shown
            }
            "Target.attachedToTarget" => {
                let p = params_of(params);
                let info = p.get("targetInfo").cloned().unwrap_or(Value::Null);
                let under_tab = !browser_level && st.tab_sessions.contains(session);
                // On a page's root, a page or tab came from `attachToTarget`, not from its own.
                let attached_by_id = level.root && matches!(text(&info, "type"), "page" | "tab");
                if !browser_level && !under_tab && !attached_by_id {
                    // Under a session on one of the task's targets: its iframe or worker.
                    st.joined.insert(text(&info, "targetId").to_string());
                    return false;
                }
                let child = text(&p, "sessionId").to_string();
                match self.judge(st, &snap, client, &info) {
                    Seen::Task => {
                        if text(&info, "type") == "tab" {
                            st.tab_sessions.insert(child);
                        }
                        self.shown(st, client, &info);
                        false
                    }
                    Seen::Unknown => self.hold(st, client, raw),
                    Seen::Foreign => {
                        let waiting = p.get("waitingForDebugger") == Some(&Value::Bool(true));
                        self.let_go(st, session, &child, waiting);
                        if under_tab {
                            self.drop_tab(st, client, session);
                        }
                        true
                    }
                }
            }
            "Target.detachedFromTarget" => {
                let p = params_of(params);
                let sid = text(&p, "sessionId");
                st.tab_sessions.remove(sid);
                st.hidden.remove(sid)
            }
            _ => false,
        }
    }

    fn shown(&self, st: &mut State, client: u64, info: &Value) {
        let (kind, id) = (text(info, "type"), text(info, "targetId"));
        if kind == "page" && !id.is_empty() {
            st.joined.insert(id.to_string());
        }
        if let Some(c) = st.clients.get_mut(&client) {
            c.shown.insert(id.to_string());
        }
    }

    fn hold(&self, st: &mut State, client: u64, raw: &str) -> bool {
        if let Some(c) = st.clients.get_mut(&client) {
            c.held.push(raw.to_string());
        }
        true
    }

    /// Lets go of `child`, attached under `parent` to a target not of the task.
    fn let_go(&self, st: &mut State, parent: &str, child: &str, waiting: bool) {
        st.hidden.insert(child.to_string());
        if waiting {
            let run = "Runtime.runIfWaitingForDebugger";
            self.own_command(st, run, serde_json::json!({}), Some(child));
        }
        let params = serde_json::json!({ "sessionId": child });
        self.own_command(st, "Target.detachFromTarget", params, Some(parent));
    }

    /// The tab of `tab_session` holds a page not of the task: let go of it, and tell the
    /// client it went away.
    fn drop_tab(&self, st: &mut State, client: u64, tab_session: &str) {
        let Some((_, tab)) = st.sessions.remove(tab_session) else {
            return;
        };
        st.tab_sessions.remove(tab_session);
        st.foreign_tabs.insert(tab.clone());
        let Some(browser_session) = st.clients.get(&client).map(|c| c.browser_session.clone())
        else {
            return;
        };
        self.let_go(st, &browser_session, tab_session, false);
        let detached = serde_json::json!({
            "method": "Target.detachedFromTarget",
            "params": {"sessionId": tab_session, "targetId": tab},
        });
        deliver(st, client, Out::Text(detached.to_string()));
        if st
            .clients
            .get_mut(&client)
            .is_some_and(|c| c.shown.remove(&tab))
        {
            let destroyed = serde_json::json!({
                "method": "Target.targetDestroyed",
                "params": {"targetId": tab},
            });
            deliver(st, client, Out::Text(destroyed.to_string()));
        }
    }

    /// `client`'s `Target.createTarget` was answered: the page joins the task, and the events
    /// held for it are judged again.
    pub(super) fn created(&self, st: &mut State, client: u64, result: Option<&RawValue>) {
        if let Some(c) = st.clients.get_mut(&client) {
            c.creating = c.creating.saturating_sub(1);
        }
        let held: Vec<String> = (st.clients.values_mut())
            .flat_map(|c| std::mem::take(&mut c.held))
            .collect();
        let page = params_of(result);
        let id = text(&page, "targetId");
        if !id.is_empty() {
            st.joined.insert(id.to_string());
            st.adopt.push(id.to_string());
            self.adopt_queued.store(true, Ordering::Release);
            if let Some(c) = st.clients.get_mut(&client) {
                c.created.push(id.to_string());
            }
        }
        for raw in held {
            if let Ok(env) = serde_json::from_str::<super::Envelope<'_>>(&raw)
                && let (Some(m), Some(s)) = (env.method.as_deref(), env.session_id.as_deref())
            {
                self.on_event(st, m, s, &env, &raw);
            }
        }
    }

    /// A page opened for the task outside any client (`/json/new`) joins it, as a page a
    /// client created: followed by the supervisor. The reader takes it with its next batch,
    /// which the reply to a `Target.getTargetInfo` on it (the endpoint's own, swallowed) brings.
    pub(crate) fn join_page(&self, target_id: &str) {
        if target_id.is_empty() {
            return;
        }
        let outbox = {
            let mut st = self.lock();
            st.joined.insert(target_id.to_string());
            st.adopt.push(target_id.to_string());
            self.adopt_queued.store(true, Ordering::Release);
            let params = serde_json::json!({ "targetId": target_id });
            self.own_command(&mut st, "Target.getTargetInfo", params, None);
            std::mem::take(&mut st.outbox)
        };
        self.flush(outbox);
    }

    /// A reply narrowed to the task (`Target.getTargets`; `Target.getBrowserContexts` under
    /// `isolate_tasks`), or `None` to pass it as it is.
    pub(super) fn narrow_reply(
        &self,
        st: &State,
        client: u64,
        method: &str,
        result: &RawValue,
    ) -> Option<String> {
        let targets = method == "Target.getTargets" && !self.policy.all_targets;
        let contexts = method == "Target.getBrowserContexts" && self.policy.security.isolate_tasks;
        if !targets && !contexts {
            return None;
        }
        let snap = self.snap()?;
        let mut v: Value = serde_json::from_str(result.get()).ok()?;
        if targets && let Some(Value::Array(infos)) = v.get_mut("targetInfos") {
            infos.retain(|info| self.judge(st, &snap, client, info) == Seen::Task);
        }
        if contexts {
            let scope = Scope {
                snap: &snap,
                joined: &st.joined,
            };
            isolation::filter_reply(&scope, method, &mut v);
        }
        Some(v.to_string())
    }

    /// The task's targets among `infos` (`Target.getTargets`' `targetInfos`), for `/json/list`.
    pub(crate) fn task_targets(&self, infos: Vec<Value>) -> Vec<Value> {
        let Some(snap) = self.snap() else {
            return Vec::new();
        };
        let st = self.lock();
        infos
            .into_iter()
            .filter(|info| self.judge(&st, &snap, 0, info) == Seen::Task)
            .collect()
    }
}

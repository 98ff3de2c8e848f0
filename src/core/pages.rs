//! Pages the task's page opens (issue 14): popups and new tabs followed on the same connection.
//!
//! How a popup is caught before its first script runs, measured on Chromium 156 headless
//! (`tests/measure_popups.rs`):
//! * `Target.setAutoAttach {waitForDebuggerOnStart: true}` on the *page* session attaches its
//!   iframes and workers only: `window.open` and `target=_blank` pages are never auto-attached
//!   from there, with or without a `filter` naming `page`;
//! * `Target.setDiscoverTargets` reports the popup (`targetCreated` with `openerId` and
//!   `openerFrameId`, not yet paused): an `attachToTarget` + `Page.enable` sent at once was in
//!   time for an on-load `alert()` of a page loaded from a loopback server (3 runs of 3), but
//!   only because the popup still had to fetch its document: a race, not a guarantee;
//! * `Target.setAutoAttach {autoAttach: true, waitForDebuggerOnStart: true, flatten: true}` on
//!   the *browser* connection attaches every new page paused (`waitingForDebugger: true`), with
//!   `openerId`/`openerFrameId` in its `targetInfo`: `Page.enable` before
//!   `Runtime.runIfWaitingForDebugger` catches an on-load `alert()`, and even one the opener
//!   writes into an `about:blank` popup (`w.document.write('<script>alert(..)...')`): the
//!   opener's script waits until the popup is resumed.
//!
//! `openerId` and `openerFrameId` are reported for `window.open(.., 'noopener')` and
//! `rel="noopener"` links too (measured), so those popups are followed as well.
//!
//! So the supervisor turns browser-level auto-attach on once its page is attached, follows a
//! new page whose opener is the task's page or a page it follows (by `openerId`, else by the
//! page that owns `openerFrameId`), and resumes and detaches, at once, every other page it is
//! handed: those of other clients and tasks, the task's own page again, popups past
//! `limits.pages_max`. Nothing waits: each page costs a few fire-and-forget commands.

use super::*;

/// Bound of the walk from a session up to its page (sessions nest: page, OOPIF, OOPIF, ...).
const MAX_SESSION_DEPTH: usize = 64;

impl Core {
    /// Turns browser-level auto-attach on (module doc), once the page session is known.
    pub(super) fn follow_popups_from_now(&mut self) {
        if self.settings.follow_popups {
            self.command(
                "Target.setAutoAttach",
                json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
                None,
            );
            self.pages_changed = true;
        }
    }

    /// Whether `sid` is the session of a page: the task's page or a followed one.
    pub(super) fn is_page_session(&self, sid: &str) -> bool {
        self.page_session_id.as_deref() == Some(sid)
            || self.pages.iter().any(|p| p.session_id == sid)
    }

    /// The page target (the task's page or a followed one) that session `sid` belongs to.
    pub(super) fn page_of_session(&self, sid: &str) -> Option<&str> {
        let mut cur = sid;
        for _ in 0..MAX_SESSION_DEPTH {
            let s = self.sessions.get(cur)?;
            match &s.parent {
                Some(p) => cur = p,
                None => return Some(s.target_id.as_str()),
            }
        }
        None
    }

    /// The page target a dialog that arrived on `sid` belongs to (the task's page when unknown).
    pub(super) fn dialog_target(&self, sid: &str) -> String {
        self.page_of_session(sid)
            .or(self.page_target_id.as_deref())
            .unwrap_or_default()
            .to_string()
    }

    /// Whether `target_id` is the task's page or a page it follows.
    fn is_followed_page(&self, target_id: &str) -> bool {
        self.page_target_id.as_deref() == Some(target_id)
            || self.pages.iter().any(|p| p.target_id == target_id)
    }

    /// The followed page that opened `info`, if one did.
    fn opener_of(&self, info: &protocol::TargetInfo) -> Option<String> {
        if let Some(o) = info
            .opener_id
            .as_deref()
            .filter(|o| self.is_followed_page(o))
        {
            return Some(o.to_string());
        }
        let frame = info.opener_frame_id.as_deref()?;
        let owner = self.frames.owner_of(frame)?;
        let page = self.page_of_session(owner)?;
        self.is_followed_page(page).then(|| page.to_string())
    }

    /// A browser-level `Target.attachedToTarget` that is not the attach of the task's page: a
    /// page handed over by browser-level auto-attach (module doc).
    pub(super) fn browser_target_attached(&mut self, ev: protocol::AttachedToTarget) {
        let info = ev.target_info;
        let sid = ev.session_id;
        let opener = if self.settings.follow_popups
            && info.kind == "page"
            && !self.is_followed_page(&info.target_id)
            && self.page_target_id.is_some()
        {
            self.opener_of(&info)
        } else {
            None
        };
        if let Some(opener) = opener {
            if self.pages.len() < self.settings.limits.pages_max
                && self.sessions.len() < self.settings.limits.frames_max
            {
                self.follow_page(&sid, info, opener);
                return;
            }
            if !self.pages_truncated {
                warn!(
                    "task {}: page {} opened more than limits.pages_max = {} popups; {} and \
                     later ones are not followed",
                    self.task_id, opener, self.settings.limits.pages_max, info.target_id
                );
            }
            self.pages_truncated = true;
            self.pages_changed = true;
            self.dirty = true;
        }
        // Not ours to follow: let it run, and let go of it.
        if ev.waiting_for_debugger {
            self.command(
                "Runtime.runIfWaitingForDebugger",
                json!({}),
                Some(sid.clone()),
            );
        }
        self.command("Target.detachFromTarget", json!({"sessionId": sid}), None);
    }

    /// Follows a page the task opened: the same set-up as the task's page (SPEC §4.3), then it
    /// may run.
    fn follow_page(&mut self, sid: &str, info: protocol::TargetInfo, opener: String) {
        info!(
            "task {}: following page {} ({}) opened by {opener}",
            self.task_id, info.target_id, info.url
        );
        self.sessions.insert(
            sid.to_string(),
            Session {
                target_id: info.target_id.clone(),
                kind: "page".into(),
                parent: None,
            },
        );
        self.pages.push(PageInfo {
            target_id: info.target_id,
            url: clip(info.url, MAX_TEXT),
            // The title at attach time is that of the blank initial document, and browser-level
            // auto-attach sends no `targetInfoChanged`: a stale title would mislead, so none.
            title: String::new(),
            opener_target_id: Some(opener),
            session_id: sid.to_string(),
        });
        self.pages_changed = true;
        self.dirty = true;
        let s = Some(sid.to_string());
        self.out.push(Outgoing::Command(Command {
            method: "Page.enable".into(),
            params: json!({}),
            session_id: s.clone(),
            kind: CallKind::Automatic,
        }));
        self.command("Runtime.enable", json!({}), s.clone());
        self.out.push(Outgoing::Command(Command {
            method: "Page.getFrameTree".into(),
            params: json!({}),
            session_id: s.clone(),
            kind: CallKind::SeedFrameTree {
                session_id: sid.to_string(),
            },
        }));
        self.command(
            "Target.setAutoAttach",
            json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
            s.clone(),
        );
        if self.bridge_active {
            self.bridge_setup(sid);
        }
        self.command("Runtime.runIfWaitingForDebugger", json!({}), s);
    }

    /// A followed page went away (closed, or its session detached): it leaves `pages`, its
    /// frames leave the map, and the dialogs still open on it (or on sessions attached through
    /// it, `gone`) are recorded `remote`.
    pub(super) fn followed_page_gone(&mut self, target_id: &str, gone: &[String]) {
        let before = self.pages.len();
        self.pages.retain(|p| p.target_id != target_id);
        if self.pages.len() == before {
            return;
        }
        info!("task {}: followed page {target_id} went away", self.task_id);
        self.dirty |= self.frames.remove_page(target_id);
        let doomed: Vec<String> = self
            .open
            .iter()
            .filter(|d| gone.contains(&d.public.session_id))
            .map(|d| d.public.id.clone())
            .collect();
        for id in doomed {
            let closed = self
                .open
                .iter_mut()
                .find(|d| d.public.id == id)
                .and_then(|d| d.closed_event.take());
            self.finalize(&id, ClosedBy::Remote, closed);
        }
        self.pages_changed = true;
        self.dirty = true;
    }

    /// `pages` as the snapshot shows it: the task's page first, then the followed ones, with
    /// the URL of each one's main frame. Empty when popups are not followed.
    pub(super) fn pages_list(&self) -> Vec<PageInfo> {
        if !self.settings.follow_popups {
            return Vec::new();
        }
        let Some(main) = &self.page_target_id else {
            return Vec::new();
        };
        let url_of = |t: &str, fallback: &str| {
            self.frames
                .url_of(t)
                .map_or_else(|| fallback.to_string(), str::to_string)
        };
        let mut out = Vec::with_capacity(self.pages.len() + 1);
        out.push(PageInfo {
            target_id: main.clone(),
            url: url_of(main, ""),
            title: String::new(),
            opener_target_id: None,
            session_id: self.page_session_id.clone().unwrap_or_default(),
        });
        for p in &self.pages {
            let mut p = p.clone();
            p.url = url_of(&p.target_id, &p.url);
            out.push(p);
        }
        out
    }
}

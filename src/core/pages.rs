//! Pages the task's page opens (issue 14): popups and new tabs followed on the same connection.
//!
//! How a popup is caught before its first script runs, measured on Chromium 156 headless
//! (`tests/it/measure_popups.rs`):
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
//! handed: those of other clients and tasks, the task's own page again. Nothing waits: each
//! page costs a few fire-and-forget commands.
//!
//! # Past the cap: watched, not followed (SPEC §8 "No silent wedge")
//!
//! A popup past `limits.pages_max` may still share the task's renderer (a same-site popup
//! does: `crate::core::policy`), and a dialog it raises then freezes the task's page too. So it
//! is not let go: up to `limits.watched_pages_max` such popups (and the popups they open) keep
//! a dialog-only watch, `Page.enable` and `Runtime.getIsolateId` and nothing else (no frames,
//! console, iframes or bridge). Their dialogs are pending like any other, with their
//! `target_id`, answerable, under the task's policy and watchdog; calls into their renderer
//! fail fast naming the dialog; a call routed to the page (`target_id`) goes to the watch
//! session. Past that second cap popups are resumed and let go as before (logged once).
//!
//! Each page belongs to a browsing-context group (`Core::page_groups`): its opener's when it
//! can script it (`canAccessOpener`; a `noopener` popup cannot, although `openerId` names its
//! opener), else its own. Same-site documents of one group share a renderer (measured).

use super::*;

/// Bound of the walk from a session up to its page (sessions nest: page, OOPIF, OOPIF, ...).
const MAX_SESSION_DEPTH: usize = 64;

impl Core {
    /// Turns browser-level auto-attach on (module doc), once the page session is known.
    pub(super) fn follow_popups_from_now(&mut self) {
        if self.settings.follow_popups {
            self.command("Target.setAutoAttach", session::auto_attach_params(), None);
            self.pages_changed = true;
        }
    }

    /// Whether `sid` is the session of a page: the task's page, a followed or a watched one.
    pub(super) fn is_page_session(&self, sid: &str) -> bool {
        self.page_session_id.as_deref() == Some(sid)
            || self.pages.iter().any(|p| p.session_id == sid)
            || self.is_watched_session(sid)
    }

    /// Whether `sid` is the watch session of a popup past `limits.pages_max`.
    pub(super) fn is_watched_session(&self, sid: &str) -> bool {
        self.sessions
            .get(sid)
            .is_some_and(|s| s.kind == SessionKind::Watched)
    }

    /// A frame event on a watch session: only a new document of the page's own frame matters
    /// (it may run in another renderer now).
    pub(super) fn watched_frame_event(
        &mut self,
        method: &str,
        session: &str,
        params: Option<&RawValue>,
    ) {
        if method == "Page.frameNavigated"
            && let Some(ev) = protocol::decode::<protocol::FrameNavigated>(params)
            && ev.frame.parent_id.is_none()
        {
            if let Some(p) = self.watched.iter_mut().find(|p| p.session_id == session) {
                p.url = clip(ev.frame.url, MAX_TEXT);
                self.pages_changed = true;
            }
            self.renderer_moved(session);
        }
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

    /// Whether `target_id` is the task's page or a page it follows or watches: the pages whose
    /// popups are the task's.
    fn is_own_page(&self, target_id: &str) -> bool {
        self.is_followed_page(target_id) || self.watched.iter().any(|p| p.target_id == target_id)
    }

    /// The browsing-context group of a new page opened by `opener` (module doc).
    fn group_of_new_page(&self, info: &protocol::TargetInfo, opener: &str) -> String {
        if info.can_access_opener {
            self.page_groups
                .get(opener)
                .cloned()
                .unwrap_or_else(|| opener.to_string())
        } else {
            info.target_id.clone()
        }
    }

    /// The followed page that opened `info`, if one did.
    fn opener_of(&self, info: &protocol::TargetInfo) -> Option<String> {
        if let Some(o) = info.opener_id.as_deref().filter(|o| self.is_own_page(o)) {
            return Some(o.to_string());
        }
        let frame = info.opener_frame_id.as_deref()?;
        if self.is_own_page(frame) {
            return Some(frame.to_string()); // a watched page's main frame (its frames are not tracked)
        }
        let owner = self.frames.owner_of(frame)?;
        let page = self.page_of_session(owner)?;
        self.is_own_page(page).then(|| page.to_string())
    }

    /// A browser-level `Target.attachedToTarget` that is not the attach of the task's page: a
    /// page handed over by browser-level auto-attach (module doc).
    pub(super) fn browser_target_attached(&mut self, ev: protocol::AttachedToTarget) {
        let info = ev.target_info;
        let sid = ev.session_id;
        let opener = if self.settings.follow_popups
            && info.kind == "page"
            && !self.is_own_page(&info.target_id)
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
                     later ones are not followed, only watched for dialogs",
                    self.task_id, opener, self.settings.limits.pages_max, info.target_id
                );
            }
            self.pages_truncated = true;
            self.pages_changed = true;
            self.dirty = true;
            if self.watched.len() < self.settings.limits.watched_pages_max
                && self.sessions.len() < self.settings.limits.frames_max
            {
                self.watch_page(&sid, info, opener);
                return;
            }
            if !std::mem::replace(&mut self.watch_truncated, true) {
                warn!(
                    "task {}: {} popups are watched for dialogs already \
                     (limits.watched_pages_max): {} and later ones are let go, and a dialog \
                     they raise is not seen",
                    self.task_id,
                    self.watched.len(),
                    info.target_id
                );
            }
        }
        // Not ours to follow: let it run, and let go of it.
        if ev.waiting_for_debugger {
            self.out.push(Outgoing::Command(session::resume(&sid)));
        }
        self.command("Target.detachFromTarget", json!({"sessionId": sid}), None);
    }

    /// Watches a popup past `limits.pages_max` for its dialogs only (module doc), then lets it
    /// run.
    fn watch_page(&mut self, sid: &str, info: protocol::TargetInfo, opener: String) {
        debug!(
            "task {}: watching page {} ({}) opened by {opener} for dialogs only",
            self.task_id, info.target_id, info.url
        );
        let group = self.group_of_new_page(&info, &opener);
        self.page_groups.insert(info.target_id.clone(), group);
        self.sessions.insert(
            sid.to_string(),
            Session {
                target_id: info.target_id.clone(),
                kind: SessionKind::Watched,
                parent: None,
            },
        );
        self.watched.push(PageInfo {
            target_id: info.target_id,
            url: clip(info.url, MAX_TEXT),
            title: String::new(),
            opener_target_id: Some(opener),
            session_id: sid.to_string(),
        });
        self.renderers_changed = true;
        self.set_up_session(sid, SessionKind::Watched);
        self.out.push(Outgoing::Command(session::resume(sid)));
    }

    /// A watched page went away: its dialogs still open are recorded `remote`.
    pub(super) fn watched_page_gone(&mut self, target_id: &str, gone: &[String], now: Now) {
        self.watched.retain(|p| p.target_id != target_id);
        self.page_groups.remove(target_id);
        self.finalize_dialogs_of(gone, now);
        self.pages_changed = true;
        self.dirty = true;
    }

    /// Records the dialogs still open on sessions that went away as `remote`.
    fn finalize_dialogs_of(&mut self, gone: &[String], now: Now) {
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
            self.finalize(&id, ClosedBy::Remote, closed, now);
        }
    }

    /// Follows a page the task opened: the same set-up as the task's page (SPEC §4.3), then it
    /// may run.
    fn follow_page(&mut self, sid: &str, info: protocol::TargetInfo, opener: String) {
        info!(
            "task {}: following page {} ({}) opened by {opener}",
            self.task_id, info.target_id, info.url
        );
        let group = self.group_of_new_page(&info, &opener);
        self.page_groups.insert(info.target_id.clone(), group);
        self.renderers_changed = true;
        self.sessions.insert(
            sid.to_string(),
            Session {
                target_id: info.target_id.clone(),
                kind: SessionKind::Popup,
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
        self.set_up_session(sid, SessionKind::Popup);
        self.out.push(Outgoing::Command(session::resume(sid)));
    }

    /// A followed page went away (closed, or its session detached): it leaves `pages`, its
    /// frames leave the map, and the dialogs still open on it (or on sessions attached through
    /// it, `gone`) are recorded `remote`.
    pub(super) fn followed_page_gone(&mut self, target_id: &str, gone: &[String], now: Now) {
        let before = self.pages.len();
        self.pages.retain(|p| p.target_id != target_id);
        if self.pages.len() == before {
            return;
        }
        info!("task {}: followed page {target_id} went away", self.task_id);
        self.dirty |= self.frames.remove_page(target_id);
        self.page_groups.remove(target_id);
        self.finalize_dialogs_of(gone, now);
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

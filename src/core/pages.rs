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
//! A task of a `SupervisorRegistry` does not turn it on (`CoreSettings::browser_auto_attach`):
//! the registry's popup watcher of the browser holds each new page paused and has the task's
//! connection attach to the task's popups (`crate::registry::popups`, issue 24). Such a page
//! arrives here the same way, a browser-level `Target.attachedToTarget`, only not paused on
//! this connection, and is followed, watched or let go by the same rules.
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
//! session. Past that second cap popups are resumed and let go as before (logged once), and
//! each one let go tells the watchdog to probe the task's renderer about once a second while
//! such popups are open (`Outgoing::Watchdog(WatchRenderer)`, `crate::supervisor::stall`): a
//! dialog in one of them is then reported within 2 s, though nobody calls.
//!
//! Each page belongs to a browsing-context group (`Sessions::group_of`): its opener's when it
//! can script it (`canAccessOpener`; a `noopener` popup cannot, although `openerId` names its
//! opener), else its own. Same-site documents of one group share a renderer (measured).

use std::sync::Arc;

use log::{debug, info, warn};
use serde_json::json;
use serde_json::value::RawValue;

use super::frames::Frames;
use super::session::{self, SessionKind};
use super::sessions::Session;
use super::{Core, MAX_TEXT, Outgoing, clip};
use crate::clock::Now;
use crate::config::Limits;
use crate::protocol;
use crate::snapshot::{ClosedBy, PageInfo};
use crate::watchdog::WatchdogMsg;

/// Bound of the walk from a session up to its page (sessions nest: page, OOPIF, OOPIF, ...).
const MAX_SESSION_DEPTH: usize = 64;

/// The pages the task follows and watches besides its own. Owned by the reader thread; [`Pages::take_published`] hands the core `pages`,
/// `pages_truncated` and `watched_pages` when they changed.
#[derive(Debug)]
pub(crate) struct Pages {
    /// `browser.follow_popups`: without it `pages` stays empty.
    follow: bool,
    /// `limits.pages_max`.
    followed_max: usize,
    /// `limits.watched_pages_max`.
    watched_max: usize,
    /// The popups and new tabs the task follows (issue 14), oldest first; the task's own page
    /// is not in it.
    followed: Vec<PageInfo>,
    /// A popup was left alone because of `limits.pages_max`.
    truncated: bool,
    /// Popups past `limits.pages_max` watched for their dialogs only (SPEC §8 "No silent
    /// wedge"), oldest first.
    watched: Vec<PageInfo>,
    /// A popup was let go because of `limits.watched_pages_max` (logged once).
    watch_truncated: bool,
    /// The title of the task's own page, with its target (`core/titles.rs`).
    own_title: Option<(String, String)>,
    /// The published `pages`, `pages_truncated` or `watched_pages` are out of date.
    changed: bool,
}

/// What [`Pages::take_published`] hands over.
#[derive(Debug)]
pub(crate) struct PublishedPages {
    /// `pages`: the task's page first, then the followed ones.
    pub pages: Arc<[PageInfo]>,
    /// `pages_truncated`.
    pub truncated: bool,
    /// `watched_pages`.
    pub watched: Arc<[PageInfo]>,
    /// A popup was let go past both caps.
    pub let_go: bool,
}

impl Pages {
    /// No page followed yet.
    pub fn new(limits: &Limits, follow: bool) -> Pages {
        Pages {
            follow,
            followed_max: limits.pages_max,
            watched_max: limits.watched_pages_max,
            followed: Vec::new(),
            truncated: false,
            watched: Vec::new(),
            watch_truncated: false,
            own_title: None,
            changed: true,
        }
    }

    /// Page `target_id`'s title is `title` (a followed page's, else the task's own page's).
    pub fn set_title(&mut self, target_id: &str, title: String) {
        if let Some(p) = self.followed.iter_mut().find(|p| p.target_id == target_id) {
            self.changed |= p.title != title;
            p.title = title;
            return;
        }
        let own = Some((target_id.to_string(), title));
        if self.own_title != own {
            self.own_title = own;
            self.changed = true;
        }
    }

    /// The watched pages, oldest first.
    pub fn watched(&self) -> &[PageInfo] {
        &self.watched
    }

    /// Whether `target_id` is a followed page.
    pub fn is_followed(&self, target_id: &str) -> bool {
        self.followed.iter().any(|p| p.target_id == target_id)
    }

    /// Whether `target_id` is a watched page.
    pub fn is_watched(&self, target_id: &str) -> bool {
        self.watched.iter().any(|p| p.target_id == target_id)
    }

    /// Whether `sid` is the session of a followed page.
    pub fn is_followed_session(&self, sid: &str) -> bool {
        self.followed.iter().any(|p| p.session_id == sid)
    }

    /// Whether one more page may be followed (`limits.pages_max`).
    pub fn room_to_follow(&self) -> bool {
        self.followed.len() < self.followed_max
    }

    /// Whether one more page may be watched (`limits.watched_pages_max`).
    pub fn room_to_watch(&self) -> bool {
        self.watched.len() < self.watched_max
    }

    /// Follows `page`.
    pub fn follow(&mut self, page: PageInfo) {
        self.followed.push(page);
        self.changed = true;
    }

    /// Watches `page` for its dialogs.
    pub fn watch(&mut self, page: PageInfo) {
        self.watched.push(page);
        self.changed = true;
    }

    /// A popup was not followed for `limits.pages_max`: true the first time (log it then).
    pub fn note_truncated(&mut self) -> bool {
        self.changed = true;
        !std::mem::replace(&mut self.truncated, true)
    }

    /// A popup was let go for `limits.watched_pages_max`: true the first time (log it then).
    pub fn note_watch_truncated(&mut self) -> bool {
        let first = !std::mem::replace(&mut self.watch_truncated, true);
        self.changed |= first;
        first
    }

    /// The watched page on session `sid` has a new document at `url` (which may run in another
    /// renderer: the caller tells `Sessions` too, `Core::renderer_moved`).
    pub fn watched_navigated(&mut self, sid: &str, url: String) {
        if let Some(p) = self.watched.iter_mut().find(|p| p.session_id == sid) {
            p.url = url;
            self.changed = true;
        }
    }

    /// Followed page `target_id` went away; false when it was not followed.
    pub fn remove_followed(&mut self, target_id: &str) -> bool {
        let before = self.followed.len();
        self.followed.retain(|p| p.target_id != target_id);
        if self.followed.len() == before {
            return false;
        }
        self.changed = true;
        true
    }

    /// Watched page `target_id` went away.
    pub fn remove_watched(&mut self, target_id: &str) {
        self.watched.retain(|p| p.target_id != target_id);
        self.changed = true;
    }

    /// Forgets every page (a new connection); the followed then the watched ones, oldest
    /// first, to attach again (`Core::reset_for_reconnect`).
    pub fn clear(&mut self) -> Vec<String> {
        let had = (self.followed.iter().chain(&self.watched))
            .map(|p| p.target_id.clone())
            .collect();
        self.followed.clear();
        self.truncated = false;
        self.watched.clear();
        self.watch_truncated = false;
        self.own_title = None;
        self.changed = true;
        had
    }

    /// When they changed, or `inputs_changed` (the task's page `main` or the frames, whose
    /// main frames' URLs `pages` shows): what to publish.
    pub fn take_published(
        &mut self,
        main: Option<(&str, &str)>,
        frames: &Frames,
        inputs_changed: bool,
    ) -> Option<PublishedPages> {
        (std::mem::take(&mut self.changed) || inputs_changed).then(|| self.published(main, frames))
    }

    /// `pages` as the snapshot shows it: the task's page `main` (target, session) first, then
    /// the followed ones, each with the URL of its main frame (empty when popups are not
    /// followed); `pages_truncated` and `watched_pages`.
    pub fn published(&self, main: Option<(&str, &str)>, frames: &Frames) -> PublishedPages {
        let pages = match main {
            Some((target_id, session_id)) if self.follow => {
                let url_of = |t: &str, fallback: &str| {
                    frames
                        .url_of(t)
                        .map_or_else(|| fallback.to_string(), str::to_string)
                };
                let mut out = Vec::with_capacity(self.followed.len() + 1);
                out.push(PageInfo {
                    target_id: target_id.to_string(),
                    url: url_of(target_id, ""),
                    title: (self.own_title.as_ref())
                        .filter(|(t, _)| t == target_id)
                        .map(|(_, title)| title.clone())
                        .unwrap_or_default(),
                    opener_target_id: None,
                    session_id: session_id.to_string(),
                });
                for p in &self.followed {
                    let mut p = p.clone();
                    p.url = url_of(&p.target_id, &p.url);
                    out.push(p);
                }
                out
            }
            _ => Vec::new(),
        };
        PublishedPages {
            pages: pages.into(),
            truncated: self.truncated,
            watched: self.watched.clone().into(),
            let_go: self.watch_truncated,
        }
    }
}

impl Core {
    /// Turns browser-level auto-attach on (module doc), once the page session is known, unless
    /// a popup watcher hands this task its pages (`CoreSettings::browser_auto_attach`).
    pub(super) fn follow_popups_from_now(&mut self) {
        if self.settings.follow_popups && self.settings.browser_auto_attach {
            self.command("Target.setAutoAttach", session::auto_attach_params(), None);
        }
    }

    /// This task follows its popups itself from now on (its registry's popup watcher has gone,
    /// or could not serve it): every later attach of its page, after a reconnect, turns
    /// browser-level auto-attach on before the task is published active again.
    pub fn follow_popups_itself_from_now(&mut self) {
        self.settings.browser_auto_attach = true;
    }

    /// Whether `sid` is the session of a page: the task's page, a followed or a watched one.
    pub(super) fn is_page_session(&self, sid: &str) -> bool {
        self.page_session_id.as_deref() == Some(sid)
            || self.pages.is_followed_session(sid)
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
            self.pages
                .watched_navigated(session, clip(ev.frame.url, MAX_TEXT));
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
        self.page_target_id.as_deref() == Some(target_id) || self.pages.is_followed(target_id)
    }

    /// Whether `target_id` is the task's page or a page it follows or watches: the pages whose
    /// popups are the task's.
    fn is_own_page(&self, target_id: &str) -> bool {
        self.is_followed_page(target_id) || self.pages.is_watched(target_id)
    }

    /// The browsing-context group of a new page opened by `opener` (module doc).
    fn group_of_new_page(&self, info: &protocol::TargetInfo, opener: &str) -> String {
        if info.can_access_opener {
            self.sessions.group_of(opener).unwrap_or(opener).to_string()
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
        // A page a client of the task's CDP endpoint created (`Core::adopt_created`): the
        // task's, with no opener.
        let created = opener.is_none()
            && self.settings.follow_popups
            && info.kind == "page"
            && !self.is_own_page(&info.target_id)
            && self.created.has_target(&info.target_id);
        if created
            && self.pages.room_to_follow()
            && self.sessions.len() < self.settings.limits.frames_max
        {
            let own = info.target_id.clone();
            self.follow_page(&sid, info, own);
            return;
        }
        if let Some(opener) = opener {
            if self.pages.room_to_follow() && self.sessions.len() < self.settings.limits.frames_max
            {
                self.follow_page(&sid, info, opener);
                return;
            }
            if self.pages.note_truncated() {
                warn!(
                    "task {}: page {} opened more than limits.pages_max = {} popups; {} and \
                     later ones are not followed, only watched for dialogs",
                    self.task_id, opener, self.settings.limits.pages_max, info.target_id
                );
            }
            if self.pages.room_to_watch() && self.sessions.len() < self.settings.limits.frames_max {
                self.watch_page(&sid, info, opener);
                return;
            }
            if self.pages.note_watch_truncated() {
                warn!(
                    "task {}: {} popups are watched for dialogs already \
                     (limits.watched_pages_max): {} and later ones are let go; a dialog \
                     they raise shows only as a frozen renderer (blocked)",
                    self.task_id,
                    self.pages.watched().len(),
                    info.target_id
                );
            }
            // A dialog it raises would freeze the task's renderer unseen: from now on the
            // watchdog probes that renderer, until no popup it let go is left
            // (`supervisor/stall.rs`).
            self.out
                .push(Outgoing::Watchdog(WatchdogMsg::WatchRenderer));
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
        self.sessions.insert(
            sid,
            Session {
                target_id: info.target_id.clone(),
                kind: SessionKind::Watched,
                parent: None,
            },
        );
        let page = PageInfo {
            target_id: info.target_id,
            url: clip(info.url, MAX_TEXT),
            title: String::new(),
            opener_target_id: Some(opener),
            session_id: sid.to_string(),
        };
        self.sessions.set_group(&page.target_id, group);
        self.pages.watch(page);
        self.set_up_session(sid, SessionKind::Watched);
        self.out.push(Outgoing::Command(session::resume(sid)));
    }

    /// A watched page went away: its dialogs still open are recorded `remote`.
    pub(super) fn watched_page_gone(&mut self, target_id: &str, gone: &[String], now: Now) {
        self.pages.remove_watched(target_id);
        self.sessions.remove_group(target_id);
        self.finalize_dialogs_of(gone, now);
    }

    /// Records the dialogs still open on sessions that went away as `remote`.
    fn finalize_dialogs_of(&mut self, gone: &[String], now: Now) {
        let doomed: Vec<String> = self
            .dialogs
            .open()
            .iter()
            .filter(|d| gone.contains(&d.public.session_id))
            .map(|d| d.public.id.clone())
            .collect();
        for id in doomed {
            let closed = self
                .dialogs
                .position(&id)
                .and_then(|pos| self.dialogs.take_closed_event(pos));
            self.finalize(&id, ClosedBy::Remote, closed, now);
        }
    }

    /// Follows a page the task opened (`opener`; the page itself for one a client of the task's
    /// CDP endpoint created, which has none): the same set-up as the task's page (SPEC §4.3),
    /// then it may run.
    fn follow_page(&mut self, sid: &str, info: protocol::TargetInfo, opener: String) {
        info!(
            "task {}: following page {} ({}) opened by {opener}",
            self.task_id, info.target_id, info.url
        );
        let group = self.group_of_new_page(&info, &opener);
        let opened = opener != info.target_id;
        self.sessions.insert(
            sid,
            Session {
                target_id: info.target_id.clone(),
                kind: SessionKind::Popup,
                parent: None,
            },
        );
        let page = PageInfo {
            target_id: info.target_id,
            url: clip(info.url, MAX_TEXT),
            // Asked for below, and after each load (`core/titles.rs`).
            title: String::new(),
            opener_target_id: opened.then_some(opener),
            session_id: sid.to_string(),
        };
        self.sessions.set_group(&page.target_id, group);
        let target = page.target_id.clone();
        self.pages.follow(page);
        self.set_up_session(sid, SessionKind::Popup);
        self.out.push(Outgoing::Command(session::resume(sid)));
        self.ask_title(&target);
        // A page another client let run before this set-up reached the browser may be frozen
        // by a dialog nobody sees: asked about in 2 s (`supervisor/stall.rs`).
        self.out.push(Outgoing::Watchdog(WatchdogMsg::CheckAnswers {
            session_id: sid.to_string(),
            target_id: target,
        }));
    }

    /// A followed page went away (closed, or its session detached): it leaves `pages`, its
    /// frames leave the map, and the dialogs still open on it (or on sessions attached through
    /// it, `gone`) are recorded `remote`.
    pub(super) fn followed_page_gone(&mut self, target_id: &str, gone: &[String], now: Now) {
        if !self.pages.remove_followed(target_id) {
            return;
        }
        self.created.forget_adopted(target_id);
        self.sessions.remove_group(target_id);
        info!("task {}: followed page {target_id} went away", self.task_id);
        self.frames.remove_page(target_id);
        self.finalize_dialogs_of(gone, now);
    }
}

//! The CDP sessions a supervisor tracks (the task's page, followed and watched popups, OOPIFs,
//! workers), which of them crashed, which renderer each document session runs in as far as
//! `Runtime.getIsolateId` said, and the browsing-context group of each page: what the dialog
//! rule (`crate::core::policy`) knows of the sessions, besides their documents' sites (the
//! frames' origins). Owned by the reader thread; [`Sessions::take_changed`] tells the core when
//! the published `renderers` map may be out of date.

use std::collections::{HashMap, HashSet};

use log::{info, warn};
use serde_json::Value;
use serde_json::value::RawValue;

use super::session::{self, SessionKind};
use super::{Core, Outgoing, clip, frames, policy};
use crate::snapshot::{Blocked, BlockedReason, Renderer, SupervisorState};

/// What a child session is attached to.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    /// The target it is attached to (an OOPIF's equals its frame id).
    pub target_id: String,
    /// What kind of target.
    pub kind: SessionKind,
    /// The session whose auto-attach produced this one (`None` for pages).
    pub parent: Option<String>,
}

/// Every tracked session. Each change that can move a session to another renderer (a session
/// comes or goes, a new document, an isolate id learnt) marks the set changed.
#[derive(Debug)]
pub(crate) struct Sessions {
    map: HashMap<String, Session>,
    /// Sessions whose renderer crashed (`Inspector.targetCrashed`); a subset of `map`'s keys.
    crashed: HashSet<String>,
    /// Per page and OOPIF session: its document number (bumped by each new document of the
    /// session's own frame) and the `Runtime.getIsolateId` answered for that document. Its
    /// keys are tracked sessions, or sessions whose new document was seen before they went away
    /// (removed with them).
    isolates: HashMap<String, (u64, Option<String>)>,
    /// The browsing-context group of each page (the task's, followed, watched): the target id
    /// of the first page of its chain of openers that can script each other
    /// (`crate::core::pages`). Bounded by the pages.
    groups: HashMap<String, String>,
    /// The published `renderers` map may be out of date.
    changed: bool,
}

impl Sessions {
    /// No session yet.
    pub fn new() -> Sessions {
        Sessions {
            map: HashMap::new(),
            crashed: HashSet::new(),
            isolates: HashMap::new(),
            groups: HashMap::new(),
            changed: true,
        }
    }

    /// The session `sid`, when tracked.
    pub fn get(&self, sid: &str) -> Option<&Session> {
        self.map.get(sid)
    }

    /// Whether `sid` is tracked.
    pub fn contains(&self, sid: &str) -> bool {
        self.map.contains_key(sid)
    }

    /// How many sessions are tracked.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Every tracked session.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Session)> {
        self.map.iter()
    }

    /// Starts tracking `sid`.
    pub fn insert(&mut self, sid: &str, session: Session) {
        self.map.insert(sid.to_string(), session);
        self.changed = true;
    }

    /// Stops tracking `sid` (it went away), with what was known of its renderer.
    pub fn remove(&mut self, sid: &str) -> Option<Session> {
        let gone = self.map.remove(sid)?;
        self.crashed.remove(sid);
        self.isolates.remove(sid);
        self.changed = true;
        Some(gone)
    }

    /// Forgets every session (a new connection).
    pub fn clear(&mut self) {
        self.map.clear();
        self.crashed.clear();
        self.isolates.clear();
        self.groups.clear();
        self.changed = true;
    }

    /// The sessions attached through `parent`.
    pub fn children_of(&self, parent: &str) -> Vec<String> {
        self.map
            .iter()
            .filter(|(_, s)| s.parent.as_deref() == Some(parent))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// The tracked session attached to `target_id`.
    pub fn of_target(&self, target_id: &str) -> Option<String> {
        self.map
            .iter()
            .find(|(_, s)| s.target_id == target_id)
            .map(|(id, _)| id.clone())
    }

    /// Whether the renderer behind `sid` crashed (and no new document came since).
    pub fn is_crashed(&self, sid: &str) -> bool {
        self.crashed.contains(sid)
    }

    /// The renderer behind tracked session `sid` crashed; false when it is not tracked or
    /// already known crashed.
    pub fn mark_crashed(&mut self, sid: &str) -> bool {
        self.map.contains_key(sid) && self.crashed.insert(sid.to_string())
    }

    /// `sid` has a live renderer again; false when it was not crashed.
    pub fn recovered(&mut self, sid: &str) -> bool {
        self.crashed.remove(sid)
    }

    /// Session `sid`'s own frame has a new document, perhaps in another renderer: what it runs
    /// in is unknown until `Runtime.getIsolateId` answers for the returned document number.
    pub fn document_moved(&mut self, sid: &str) -> u64 {
        let entry = self.isolates.entry(sid.to_string()).or_insert((0, None));
        entry.0 += 1;
        entry.1 = None;
        self.changed = true;
        entry.0
    }

    /// `Runtime.getIsolateId` answered `id` for document number `generation` of `sid`: kept if
    /// the session is still tracked and no newer document came since. Returns whether it was.
    pub fn isolate_known(&mut self, sid: &str, generation: u64, id: String) -> bool {
        if !self.map.contains_key(sid) {
            return false;
        }
        let entry = self.isolates.entry(sid.to_string()).or_insert((0, None));
        if entry.0 != generation {
            return false;
        }
        entry.1 = Some(id);
        self.changed = true;
        true
    }

    /// The isolate `sid`'s current document runs in, when known.
    pub fn isolate(&self, sid: &str) -> Option<&str> {
        self.isolates.get(sid).and_then(|(_, i)| i.as_deref())
    }

    /// Page `target_id` is in the browsing-context group `group` (a page's group is its own
    /// target id, or its opener's).
    pub fn set_group(&mut self, target_id: &str, group: String) {
        self.groups.insert(target_id.to_string(), group);
        self.changed = true;
    }

    /// Page `target_id` went away.
    pub fn remove_group(&mut self, target_id: &str) {
        self.changed |= self.groups.remove(target_id).is_some();
    }

    /// The browsing-context group of page `target_id`, when known.
    pub fn group_of(&self, target_id: &str) -> Option<&str> {
        self.groups.get(target_id).map(String::as_str)
    }

    /// True (once) when a change since the last call may have moved a session to another
    /// renderer.
    pub fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }
}

impl Core {
    /// What the dialog rule knows of the renderer behind document session `sid`
    /// ([`policy::Renderer`]); `None` for workers and sessions not tracked.
    pub(crate) fn renderer_of(&self, sid: &str) -> Option<Renderer> {
        let s = self.sessions.get(sid)?;
        if s.kind == SessionKind::Worker {
            return None;
        }
        let page = self.page_of_session(sid)?;
        let group = self.sessions.group_of(page).unwrap_or(page).to_string();
        let isolate = self.sessions.isolate(sid).map(str::to_string);
        let site = match s.kind {
            // Its frames are not tracked: the URL of its document, from its own events.
            SessionKind::Watched => self
                .pages
                .watched()
                .iter()
                .find(|p| p.session_id == sid)
                .and_then(|p| policy::site_key(&frames::origin_of(&p.url))),
            _ => self
                .frames
                .origin_of(&s.target_id)
                .and_then(policy::site_key),
        };
        Some(Renderer {
            isolate,
            group,
            site,
        })
    }

    /// The published `renderers` map: the renderer of every tracked document session.
    pub(super) fn renderers(&self) -> HashMap<String, Renderer> {
        self.sessions
            .iter()
            .filter_map(|(sid, _)| Some((sid.clone(), self.renderer_of(sid)?)))
            .collect()
    }

    /// Session `sid`'s own frame has a new document, perhaps in another renderer: what it runs
    /// in is unknown until a new `Runtime.getIsolateId` answers.
    pub(super) fn renderer_moved(&mut self, sid: &str) {
        let generation = self.sessions.document_moved(sid);
        let probe = session::isolate_probe(sid, generation);
        self.out.push(Outgoing::Command(probe));
    }

    /// The answer to a [`CallKind::IsolateId`]: recorded if it is about the session's current
    /// document; then in-flight calls are checked again against the dialogs open now.
    ///
    /// [`CallKind::IsolateId`]: super::CallKind::IsolateId
    pub(super) fn isolate_known(&mut self, session_id: &str, generation: u64, raw: &RawValue) {
        let Some(id) = serde_json::from_str::<Value>(raw.get())
            .ok()
            .and_then(|v| v.get("id")?.as_str().map(str::to_string))
        else {
            return;
        };
        if !self
            .sessions
            .isolate_known(session_id, generation, clip(id, 128))
        {
            return;
        }
        for pos in 0..self.dialogs.open().len() {
            self.fail_calls_blocked_by(pos, false);
        }
    }

    /// Clears `blocked` when it is about `session_id` (its `Page.enable` answered, or the
    /// session went away).
    pub(super) fn unblock(&mut self, session_id: &str, why: &str) {
        if self.blocked.is_some() && self.blocked_session.as_deref() == Some(session_id) {
            let frame = self.blocked.take().and_then(|b| b.frame_id);
            let what = self.blocked_what(session_id, frame.as_deref());
            self.blocked_session = None;
            info!("task {}: {what} {why}; no longer blocked", self.task_id);
        }
    }

    /// What a `blocked` about `session_id` is about, for the log: an iframe, a page the task
    /// follows, or its page.
    fn blocked_what(&self, session_id: &str, frame_id: Option<&str>) -> String {
        match (frame_id, self.sessions.get(session_id)) {
            (Some(f), _) => format!("iframe {f}"),
            (None, Some(s)) if s.kind == SessionKind::Popup => format!("page {}", s.target_id),
            (None, _) => "the page".into(),
        }
    }

    /// The verdict of a probe of a session whose calls stall (a [`CallKind::ProbeBlocked`]
    /// reply: the browser answered): when the session's own probe call still hangs, `blocked`
    /// says so, and a dialog in a page nobody watches fails the calls into its renderer.
    ///
    /// [`CallKind::ProbeBlocked`]: super::CallKind::ProbeBlocked
    pub(super) fn probe_verdict(&mut self, session_id: &str, blocked: Blocked) {
        let still_hangs = self.calls.values().any(
            |c| matches!(&c.kind, super::CallKind::Responds { session_id: s } if s == session_id),
        );
        if still_hangs && self.blocked.is_none() {
            warn!(
                "task {}: {} does not answer while the browser does: {}",
                self.task_id,
                self.blocked_what(session_id, blocked.frame_id.as_deref()),
                match blocked.reason {
                    BlockedReason::OrphanedDialog => {
                        "a dialog opened by a client that went away is blocking it"
                    }
                    BlockedReason::DialogInUnfollowedPage => {
                        "a dialog in a page the supervisor does not watch is \
                         blocking its renderer"
                    }
                    _ => "a busy script, or a dialog no client can answer",
                }
            );
            let frozen_renderer = blocked.reason == BlockedReason::DialogInUnfollowedPage;
            self.blocked = Some(blocked);
            self.blocked_session = Some(session_id.to_string());
            if frozen_renderer {
                self.fail_calls_in_renderer_of(session_id);
            }
        }
    }

    /// The task's page is attached on `session_id` (first attach, or again after a reconnect).
    pub(super) fn set_page_session(&mut self, session_id: &str, target_id: &str) {
        if self.page_session_id.as_deref() != Some(session_id) {
            if self.bridge_active {
                self.bridge_setup(session_id);
            }
            self.page_attached(target_id);
            // Like the bridge, only the reader knows whether it is on (the attach sequence sends
            // the page's default set-up).
            if self.settings.capture_console {
                let c = session::console_enable(session_id);
                self.out.push(Outgoing::Command(c));
            }
            self.page_session_id = Some(session_id.to_string());
            self.page_target_id = Some(target_id.to_string());
            if matches!(self.state, SupervisorState::Reconnecting { .. }) {
                // Re-attached after a reconnect: active again, and the pages clients created
                // are followed again.
                self.state = SupervisorState::Active;
                self.disconnect_reason = None;
                self.readopt_created();
                self.refollow_popups();
            }
            self.sessions.insert(
                session_id,
                Session {
                    target_id: target_id.to_string(),
                    kind: SessionKind::Page,
                    parent: None,
                },
            );
            self.sessions.set_group(target_id, target_id.to_string());
        }
    }
}

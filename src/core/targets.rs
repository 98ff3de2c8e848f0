//! Child targets and frame events in the state machine (SPEC §4.4, §7): sessions attached,
//! enabled and resumed; frames owned only by the sessions we track.

use log::{info, warn};
use serde_json::json;
use serde_json::value::RawValue;

use super::session::{self, SessionKind};
use super::sessions::Session;
use super::{CallKind, Command, Core, Outgoing, policy};
use crate::clock::Now;
use crate::error::Error;
use crate::protocol;

impl Core {
    pub(super) fn frame_event(
        &mut self,
        method: &str,
        session: &str,
        params: Option<&RawValue>,
        now: Now,
    ) {
        match method {
            "Page.frameAttached" => {
                if let Some(ev) = protocol::decode::<protocol::FrameAttached>(params) {
                    self.frames
                        .attached(session, &ev.frame_id, &ev.parent_frame_id);
                }
            }
            "Page.frameNavigated" => {
                if let Some(ev) = protocol::decode::<protocol::FrameNavigated>(params) {
                    let is_page = self.page_session_id.as_deref() == Some(session);
                    self.bridge_frame_gone(&ev.frame.id, now);
                    self.unanswerable_frame_gone(&ev.frame.id, now);
                    self.file_choosers_of_frame_gone(&ev.frame.id);
                    self.document_navigated(session, &ev.frame);
                    let applied = self.frames.navigated(session, &ev.frame, is_page);
                    // The session's own main frame has a new document: a new renderer.
                    let own_main = ev.frame.parent_id.is_none()
                        || self
                            .sessions
                            .get(session)
                            .is_some_and(|s| s.target_id == ev.frame.id);
                    if applied && own_main {
                        self.target_recovered(session);
                    }
                    if own_main {
                        self.renderer_moved(session);
                        self.page_navigated(session);
                    }
                }
            }
            "Page.navigatedWithinDocument" => {
                if let Some(ev) = protocol::decode::<protocol::NavigatedWithinDocument>(params) {
                    self.frames
                        .navigated_within_document(session, &ev.frame_id, &ev.url);
                }
            }
            "Inspector.targetCrashed" => self.target_crashed(session),
            "Inspector.targetReloadedAfterCrash" => {
                self.target_recovered(session);
                self.renderer_moved(session);
            }
            "Page.frameDetached" => {
                if let Some(ev) = protocol::decode::<protocol::FrameDetached>(params) {
                    if ev.reason.as_deref() != Some("swap") {
                        self.bridge_frame_gone(&ev.frame_id, now);
                        self.unanswerable_frame_gone(&ev.frame_id, now);
                        self.file_choosers_of_frame_gone(&ev.frame_id);
                    }
                    self.frames
                        .detached(session, &ev.frame_id, ev.reason.as_deref());
                }
            }
            "Runtime.executionContextCreated" => {
                if let Some(ev) = protocol::decode::<protocol::ExecutionContextCreated>(params)
                    && let Some(aux) = ev.context.aux_data
                    && aux.is_default
                    && let Some(frame_id) = aux.frame_id
                {
                    self.frames
                        .context_created(session, &frame_id, ev.context.id);
                }
            }
            "Runtime.executionContextDestroyed" => {
                if let Some(ev) = protocol::decode::<protocol::ExecutionContextDestroyed>(params) {
                    self.frames
                        .context_destroyed(session, ev.execution_context_id);
                }
            }
            "Runtime.executionContextsCleared" => {
                self.frames.contexts_cleared(session);
            }
            _ => {}
        }
    }

    pub(super) fn target_attached(
        &mut self,
        parent_session: Option<&str>,
        ev: protocol::AttachedToTarget,
    ) {
        let info = ev.target_info;
        if ev.session_id.is_empty() {
            return;
        }
        if parent_session.is_none() {
            // Browser-level: only the page we asked to attach to concerns us (it may arrive before
            // the attach reply).
            let ours = self.calls.values().any(|c| {
                matches!(&c.kind, CallKind::AttachPage { target_id } if *target_id == info.target_id)
            });
            if ours {
                self.set_page_session(&ev.session_id, &info.target_id);
            } else {
                self.browser_target_attached(protocol::AttachedToTarget {
                    target_info: info,
                    ..ev
                });
            }
            return;
        }
        let parent = parent_session.unwrap_or_default().to_string();
        let sid = ev.session_id;
        let room = self.sessions.len() < self.settings.limits.frames_max;
        if let Some(kind) = SessionKind::of_child(&info.kind).filter(|_| room) {
            self.sessions.insert(
                &sid,
                Session {
                    target_id: info.target_id.clone(),
                    kind,
                    parent: Some(parent),
                },
            );
            if kind == SessionKind::Iframe {
                self.frames.oopif_attached(
                    &sid,
                    &info.target_id,
                    &info.url,
                    info.parent_frame_id.as_deref(),
                );
            }
            // The bridge goes in before the frame resumes, so its first script sees it.
            self.set_up_session(&sid, kind);
        }
        // Always resume: a paused target that nobody resumes hangs its page.
        if ev.waiting_for_debugger || info.kind == "iframe" {
            self.out.push(Outgoing::Command(session::resume(&sid)));
        }
    }

    /// The tracked session that serves `target_id` (the page, or an OOPIF).
    pub(super) fn session_of_target(&self, target_id: &str) -> Option<String> {
        if target_id.is_empty() {
            return None;
        }
        if self.page_target_id.as_deref() == Some(target_id) {
            return self.page_session_id.clone();
        }
        self.sessions.of_target(target_id)
    }

    /// The renderer behind tracked session `sid` crashed: its frames are marked, and the
    /// callers waiting on it fail at once (it would never answer them).
    pub(super) fn target_crashed(&mut self, sid: &str) {
        if !self.sessions.mark_crashed(sid) {
            return;
        }
        let what = self.describe_session(sid);
        warn!(
            "task {}: the renderer of {what} crashed; reload the page to recover",
            self.task_id
        );
        self.frames.crashed(sid);
        for call in self.calls.values_mut() {
            if call.session_id.as_deref() == Some(sid)
                && call.awaited_by_caller()
                && let Some(err) = policy::crash_refusal(&what, &call.method)
                && let Some(tx) = call.reply.take()
            {
                self.deliveries.push((tx, Err(err)));
            }
        }
    }

    /// Session `sid` has a live renderer again (a reload or navigation after a crash).
    pub(super) fn target_recovered(&mut self, sid: &str) {
        if self.sessions.recovered(sid) {
            info!(
                "task {}: {} has a new renderer after its crash",
                self.task_id,
                self.describe_session(sid)
            );
            self.frames.recovered(sid);
        }
    }

    pub(super) fn target_detached(&mut self, ev: protocol::DetachedFromTarget, now: Now) {
        let Some(session) = self.sessions.remove(&ev.session_id) else {
            return;
        };
        let page_gone = self.page_session_id.as_deref() == Some(ev.session_id.as_str());
        // Sessions attached through this one die with it; Chromium does not always say so.
        let mut gone = vec![ev.session_id.clone()];
        let mut i = 0;
        while i < gone.len() {
            let parent = gone[i].clone();
            for c in self.sessions.children_of(&parent) {
                if let Some(s) = self.sessions.remove(&c)
                    && s.kind == SessionKind::Iframe
                {
                    self.frames.oopif_gone(&c, &s.target_id);
                }
                gone.push(c);
            }
            i += 1;
        }
        if session.kind == SessionKind::Iframe {
            self.frames
                .oopif_detached(&ev.session_id, &session.target_id);
        }
        self.file_choosers_of_sessions_gone(&gone);
        if session.kind == SessionKind::Popup {
            self.followed_page_gone(&session.target_id, &gone, now);
        }
        if session.kind == SessionKind::Watched {
            self.watched_page_gone(&session.target_id, &gone, now);
        }
        let reason = if page_gone {
            "the page target was closed or detached"
        } else {
            "target detached"
        };
        // Calls on sessions that went away will never be answered; every other call (the
        // browser-level `Target.closeTarget` that closed the page, say) still will be.
        let dead: Vec<u64> = self
            .calls
            .iter()
            .filter(|(_, c)| c.session_id.as_ref().is_some_and(|s| gone.contains(s)))
            .map(|(id, _)| *id)
            .collect();
        for id in dead {
            if let Some(call) = self.calls.remove(&id) {
                self.deliver(call, Err(Error::ConnectionLost(reason.into())));
            }
        }
        if page_gone {
            warn!(
                "task {}: the page target {} went away",
                self.task_id, session.target_id
            );
            self.page_gone = Some(reason.into());
            let browser_calls_waiting = self
                .calls
                .values()
                .any(|c| c.session_id.is_none() && c.reply.is_some());
            if browser_calls_waiting {
                // Their replies come after the detach (SPEC §11); one more round trip tells
                // when they have all arrived.
                self.out.push(Outgoing::Command(Command {
                    method: "Browser.getVersion".into(),
                    params: json!({}),
                    session_id: None,
                    kind: CallKind::PageGoneDrain,
                }));
            } else {
                self.finish_page_gone_if_drained();
            }
        }
    }
}

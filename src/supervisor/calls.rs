//! The dialog-aware call path (SPEC §8): routing a call to its session, refusing what a dialog,
//! a crash or the security policy blocks, and waiting for the reply with a deadline, a cancel
//! token and the grace rules for dialogs.

use std::time::Duration;

use log::debug;
use serde_json::{Value, json};

use super::Supervisor;
use super::main_world::NeedsContext;
use crate::cancel::CancelToken;
use crate::config::{DialogPolicy, MAX_CALL_TIMEOUT};
use crate::core::policy::{self, BRIDGE_REPLY_GRACE, DIALOG_GRACE};
use crate::core::{CallKind, CallResult, Command, MainWorld};
use crate::deadline::Deadline;
use crate::error::Error;
use crate::outbound::{Outbound, Reply};
use crate::security::isolation;

use super::stall::STALL_AFTER;
use crate::snapshot::Snapshot;

impl Supervisor {
    /// Sends a CDP command along `route` and waits up to `timeout` (clamped to 1 ms..300 s).
    pub fn call(
        &self,
        method: &str,
        params: Value,
        route: Route<'_>,
        timeout: Duration,
    ) -> Result<Value, Error> {
        self.call_routed(method, params, route, timeout)
            .map(|(v, _)| v)
    }

    /// Like [`Supervisor::call`], also returning the session the call went to.
    pub fn call_routed(
        &self,
        method: &str,
        params: Value,
        route: Route<'_>,
        timeout: Duration,
    ) -> Result<(Value, Option<String>), Error> {
        self.call_with(method, params, route, timeout, None)
    }

    /// Like [`Supervisor::call_routed`], but returns [`Error::Cancelled`] at once when `cancel`
    /// is cancelled (the late reply is then dropped).
    pub fn call_cancellable(
        &self,
        method: &str,
        params: Value,
        route: Route<'_>,
        timeout: Duration,
        cancel: &CancelToken,
    ) -> Result<(Value, Option<String>), Error> {
        self.call_with(method, params, route, timeout, Some(cancel))
    }

    /// The dialog-aware call (SPEC §8): a call into the page never waits for its deadline
    /// because of a dialog.
    ///
    /// * A dialog already pending that blocks the call: methods measured to hang fail at once
    ///   without being sent; methods measured to answer go through; any other method is sent
    ///   and fails after [`DIALOG_GRACE`] if no reply came while the dialog is still pending.
    /// * A dialog that opens while the call is in flight: the reader fails the call at once.
    ///
    /// A dialog the caller could not see yet when it looked (published between that look and
    /// the registration) is caught either by the second look after the write or by the reader,
    /// which drains registrations again after each publish: one of the two always sees it.
    fn call_with(
        &self,
        method: &str,
        mut params: Value,
        route: Route<'_>,
        timeout: Duration,
        cancel: Option<&CancelToken>,
    ) -> Result<(Value, Option<String>), Error> {
        self.ensure_alive()?;
        if method.is_empty() {
            return Err(Error::InvalidArgument("method must not be empty".into()));
        }
        if params.is_null() {
            params = json!({});
        }
        if !params.is_object() {
            return Err(Error::InvalidArgument(
                "params must be a JSON object".into(),
            ));
        }
        let isolate = self.config.security.isolate_tasks;
        crate::security::judge_task_call(
            &self.config.security,
            self.download_dir.as_deref(),
            &*self.snapshot(),
            method,
            &params,
        )?;
        let mut answer = self.call_admitted(method, params, route, timeout, cancel);
        if isolate && let Ok((result, _)) = &mut answer {
            isolation::filter_reply(&*self.snapshot(), method, result);
        }
        answer
    }

    /// [`Supervisor::call_with`] once the security policy has let the call through.
    fn call_admitted(
        &self,
        method: &str,
        mut params: Value,
        route: Route<'_>,
        timeout: Duration,
        cancel: Option<&CancelToken>,
    ) -> Result<(Value, Option<String>), Error> {
        if cancel.is_some_and(CancelToken::is_cancelled) {
            return Err(Error::Cancelled(method.to_string()));
        }
        let deadline = Deadline::after(timeout.clamp(Duration::from_millis(1), MAX_CALL_TIMEOUT));
        let snap = self.snapshot();
        let mut needs = None;
        let session = match route {
            Route::Browser => None,
            Route::Page => Some(session_for_page(&snap, method)?),
            Route::Target(t) => Some(session_for_target(&snap, t, method)?),
            Route::Frame(f) => {
                let (sid, need) = session_for_frame(&snap, f, method, &mut params)?;
                needs = need;
                Some(sid)
            }
        };
        drop(snap);
        let Some(sid) = session else {
            // Browser-level calls are never affected by dialogs.
            let reply = self
                .shared
                .start_call(Command::new(method.to_string(), params), deadline)?;
            return reply.wait_or_cancel(deadline, cancel).map(|v| (v, None));
        };
        if let Some(need) = needs {
            let ctx = self.main_world_context(&sid, &need, deadline, cancel)?;
            params[need.key] = json!(ctx);
        }
        self.call_on_session(sid, method, params, deadline, cancel, None)
    }

    /// The dialog-aware part of a call on session `sid` (see [`Supervisor::call_with`]);
    /// `main_world`: the call checks a frame's main-world context, recorded when it succeeds.
    pub(super) fn call_on_session(
        &self,
        sid: String,
        method: &str,
        params: Value,
        deadline: Deadline,
        cancel: Option<&CancelToken>,
        main_world: Option<MainWorld>,
    ) -> Result<(Value, Option<String>), Error> {
        let snap = self.snapshot();
        let watching = self.config.dialog_policy == DialogPolicy::MustRespond;
        let admitted = policy::admit(&snap, watching, &sid, method)?;
        let grace = admitted.grace.map(|d| (d, deadline.within(DIALOG_GRACE)));
        let kind = CallKind::Agent {
            known_dialogs: admitted.known.iter().map(|d| d.id.clone()).collect(),
            main_world,
        };
        let cmd = Command::new(method.to_string(), params)
            .on(sid.as_str())
            .kind(kind);
        let reply = self.shared.start_call(cmd, deadline)?;
        if watching {
            // The second look (see above).
            if let Some(e) = policy::opened_since(&self.snapshot(), &admitted.known, &sid, method) {
                return Err(e);
            }
        }
        if let Some((dialog, until)) = grace {
            match wait_agent_reply(&reply, until, cancel) {
                Err(Error::Timeout { .. }) if !deadline.passed() => {
                    if let Some(e) = policy::after_grace(&self.snapshot(), dialog, method) {
                        debug!(
                            "task {}: {method} got no reply within {DIALOG_GRACE:?} while dialog \
                             {} is pending",
                            self.task_id, dialog.id
                        );
                        return Err(e);
                    }
                }
                other => return other.map(|v| (v, Some(sid))),
            }
        }
        self.wait_in_renderer(&reply, deadline, cancel, &sid, method)
            .map(|v| (v, Some(sid)))
    }

    /// Waits for the reply of an agent call into session `sid` until `deadline`, in steps of
    /// [`STALL_AFTER`], then twice as long, and so on: after a step without a reply, if popups
    /// run unwatched by then, the renderer is probed for a dialog in a page the supervisor does
    /// not watch, which fails the call at once (`supervisor/stall.rs`; the watchdog's probe of
    /// the task's page usually has by then). A waiting caller's thread wakes a few times per
    /// call.
    fn wait_in_renderer(
        &self,
        reply: &Reply,
        deadline: Deadline,
        cancel: Option<&CancelToken>,
        sid: &str,
        method: &str,
    ) -> CallResult {
        let mut step = STALL_AFTER;
        loop {
            match wait_agent_reply(reply, deadline.within(step), cancel) {
                Err(Error::Timeout { .. }) if !deadline.passed() => {
                    if self.with_snapshot(|s| s.popups_let_go)
                        && let Some(e) = self.probe_stall(sid, method, deadline)
                    {
                        return Err(e);
                    }
                    step = step.saturating_mul(2);
                }
                other => return other,
            }
        }
    }
}

/// Waits for an agent call's reply until `until` (see [`Reply::wait_or_cancel`]); a block by a
/// bridge dialog still lets the call's own reply through for [`BRIDGE_REPLY_GRACE`].
fn wait_agent_reply(reply: &Reply, until: Deadline, cancel: Option<&CancelToken>) -> CallResult {
    let first = reply.wait_or_cancel(until, cancel);
    let Err(Error::BlockedByDialog { dialog, .. }) = &first else {
        return first;
    };
    if dialog.bridge_request_id.is_none() {
        return first;
    }
    match reply.wait_or_cancel(until.within(BRIDGE_REPLY_GRACE), cancel) {
        Err(Error::Timeout { .. }) | Err(Error::ConnectionLost(_)) => first,
        other => other,
    }
}

/// The session of followed page `target_id` (a popup the task's page opened; issue 14), or of
/// a watched one (a popup past `limits.pages_max`, SPEC §8).
fn followed_page_session(snap: &Snapshot, target_id: &str) -> Option<String> {
    snap.pages
        .iter()
        .skip(1)
        .chain(snap.watched_pages.iter())
        .find(|p| p.target_id == target_id && !p.session_id.is_empty())
        .map(|p| p.session_id.clone())
}

/// Refuses a call into a crashed renderer at once (SPEC §10), except the methods that recover it
/// ([`policy::crash_refusal`]).
fn refuse_if_crashed(crashed: bool, what: &str, method: &str) -> Result<(), Error> {
    if crashed && let Some(e) = policy::crash_refusal(what, method) {
        return Err(e);
    }
    Ok(())
}

fn session_for_page(snap: &Snapshot, method: &str) -> Result<String, Error> {
    let sid = snap
        .page_session_id
        .clone()
        .ok_or_else(|| Error::NoPage("the supervisor is not attached to a page yet".into()))?;
    refuse_if_crashed(snap.crashed, "the page", method)?;
    Ok(sid)
}

fn session_for_target(snap: &Snapshot, target_id: &str, method: &str) -> Result<String, Error> {
    if snap.page_target_id.as_deref() == Some(target_id) {
        let sid = snap
            .page_session_id
            .clone()
            .ok_or_else(|| Error::UnknownTarget(target_id.to_string()))?;
        refuse_if_crashed(snap.crashed, "the page", method)?;
        return Ok(sid);
    }
    if let Some(sid) = followed_page_session(snap, target_id) {
        let crashed = snap.frames.get(target_id).is_some_and(|r| r.crashed);
        refuse_if_crashed(crashed, &format!("page {target_id}"), method)?;
        return Ok(sid);
    }
    let rec = snap
        .frames
        .get(target_id)
        .filter(|r| r.session_id.is_some())
        .ok_or_else(|| Error::UnknownTarget(target_id.to_string()))?;
    refuse_if_crashed(rec.crashed, &format!("frame {target_id}"), method)?;
    Ok(rec.session_id.clone().unwrap_or_default())
}

/// The session of frame `frame_id`. A same-process frame's document runs on its parent's
/// session: `Runtime.evaluate` and `Runtime.callFunctionOn` without a context of their own are
/// given the frame's default context, or, when it is not known yet, what finding it needs
/// ([`NeedsContext`], `supervisor/main_world.rs`).
fn session_for_frame(
    snap: &Snapshot,
    frame_id: &str,
    method: &str,
    params: &mut Value,
) -> Result<(String, Option<NeedsContext>), Error> {
    let Some(rec) = snap.frames.get(frame_id) else {
        // Before the frame tree arrives, the main frame id (= page target id) still routes.
        if snap.page_target_id.as_deref() == Some(frame_id)
            || followed_page_session(snap, frame_id).is_some()
        {
            return Ok((session_for_target(snap, frame_id, method)?, None));
        }
        return Err(Error::UnknownFrame(frame_id.to_string()));
    };
    let page_frame = snap.page_session_id.as_deref() == Some(rec.owner_session.as_str());
    refuse_if_crashed(
        rec.crashed || (page_frame && snap.crashed),
        &format!("frame {frame_id}"),
        method,
    )?;
    let session_root = rec.is_oopif || rec.parent_frame_id.is_none();
    let mut needs = None;
    if !session_root {
        let key = match method {
            "Runtime.evaluate" => Some("contextId"),
            "Runtime.callFunctionOn" => Some("executionContextId"),
            _ => None,
        };
        if let Some(key) = key {
            let explicit = [
                "contextId",
                "executionContextId",
                "uniqueContextId",
                "objectId",
            ]
            .iter()
            .any(|k| params.get(k).is_some());
            if !explicit {
                match rec.default_context {
                    Some(ctx) => params[key] = json!(ctx),
                    None => {
                        needs = Some(NeedsContext {
                            frame_id: frame_id.to_string(),
                            document: rec.document,
                            key,
                        })
                    }
                }
            }
        }
    }
    Ok((rec.owner_session.clone(), needs))
}

/// Where a CDP call goes (SPEC §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<'a> {
    /// Browser-level (no `sessionId`).
    Browser,
    /// The page target or a tracked iframe target.
    Target(&'a str),
    /// A frame: an OOPIF's own session, or the owning session with the frame's context.
    Frame(&'a str),
    /// The task's page (its main frame's session).
    Page,
}

impl Route<'_> {
    /// How tool results name the route: `browser`, `target`, `frame` or `page`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Route::Browser => "browser",
            Route::Target(_) => "target",
            Route::Frame(_) => "frame",
            Route::Page => "page",
        }
    }

    /// The route of a call that names neither a frame nor a target (SPEC §8): methods of the
    /// domains the browser target serves (measured on Chromium: `crate::measured`) go to the
    /// browser, every other method to the page. Two served domains stay with the page:
    /// `Fetch` and `Security` mean "this page" on a page session but "every page of the
    /// browser" on the browser target (a `Fetch.enable` there would pause other tasks'
    /// requests too), so an agent that names no target gets the narrower one.
    pub fn by_domain(method: &str) -> Route<'static> {
        let page_scoped = matches!(method.split_once('.'), Some(("Fetch" | "Security", _)));
        if crate::measured::browser_domain(method) && !page_scoped {
            Route::Browser
        } else {
            Route::Page
        }
    }
}

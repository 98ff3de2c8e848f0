//! The attach sequence (SPEC §4 steps 1-3 and 5), run on a caller's thread at start and on a
//! short-lived thread after a reconnect — never on the reader thread, which must keep reading the
//! replies this sequence waits for.
//!
//! # Telling an orphaned dialog from a busy page (SPEC §4.5)
//!
//! When `Page.enable` on the page (or on an attached OOPIF's session) does not answer within
//! 2 s, the document is blocked by a dialog that no live client owns, or by a script that keeps
//! its main thread busy. Measured on Chromium 156 from a fresh client, the two look the same for
//! every renderer-side command tried (`Page.enable`, `Runtime.evaluate`, `Runtime.enable`,
//! `Page.getFrameTree`, `Debugger.*`, `DOM.getDocument`, `Page.captureScreenshot`,
//! `Page.createIsolatedWorld`, ...: all hang) and every browser-side one
//! (`Page.handleJavaScriptDialog` answers "No dialog is showing" for both,
//! `Target.getTargetInfo`, `Page.getNavigationHistory`, `Page.bringToFront` answer alike). One
//! differs: `Input.dispatchMouseEvent {type: "mouseMoved", x: -1, y: -1}`. While a dialog shows,
//! the browser drops input for the whole page and acknowledges at once (< 1 ms, also on an
//! OOPIF's session for a dialog inside that iframe); a busy renderer never acknowledges before
//! its script yields. So the probe is that mouse move, outside the viewport: answered within
//! [`INPUT_PROBE_WAIT`] while the browser answers too means `orphaned_dialog`; otherwise
//! `unresponsive`, whose hint (wait, then reload) is safe for both causes. The one side effect:
//! a busy page receives a `mousemove` at (-1, -1) once its script yields.

use std::time::Duration;

use serde_json::json;

use crate::cancel::CancelToken;
use crate::config::PageChoice;
use crate::core::{CallKind, Command, Extras, SessionKind, session_setup};
use crate::deadline::Deadline;
use crate::error::Error;
use crate::outbound::Outbound;
use crate::protocol;
use crate::quote::quoted;
use crate::shared::Shared;
use crate::snapshot::{Blocked, BlockedReason};

/// How long to wait for `Page.enable` before probing for an orphaned dialog (SPEC §4.5).
const PAGE_ENABLE_PROBE_AFTER: Duration = Duration::from_secs(2);

/// How long the input probe may take to count as "the browser dropped it because a dialog
/// shows" (measured: under 1 ms on loopback; a busy page never answers before its script ends).
const INPUT_PROBE_WAIT: Duration = Duration::from_secs(1);

/// How long to wait for `Target.setAutoAttach`'s reply, after which the iframes that already
/// exist have been attached (Chromium attaches them before it answers).
const AUTO_ATTACH_WAIT: Duration = Duration::from_secs(2);

/// Which page to attach to.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Choice<'a> {
    /// Exactly this target (the caller named it): missing is an error.
    Exactly(&'a str),
    /// After a reconnect: this target, the task's page, and never another (SPEC §3). Missing is
    /// [`Error::UnknownTarget`]: the endpoint gave a new browser (Browserless starts one per
    /// connection) or the page was closed, and the page is gone for good.
    Same(&'a str),
    /// After a reconnect, for a task whose page is its own (`StartOptions::own_page`): this
    /// target while it exists; a new `about:blank` (reported by the core as `page_replaced`)
    /// only when it is gone.
    SameOrNew(&'a str),
    /// The first page not among `taken` (pages other tasks own, with
    /// `security.isolate_tasks`), of those `choice` takes; a new `about:blank` when there is none.
    FirstPage {
        taken: &'a [String],
        choice: PageChoice,
    },
    /// Always a new `about:blank` page (the task's own).
    NewPage,
}

fn is_usable_page(t: &protocol::TargetInfo) -> bool {
    t.kind == "page"
        && !t.url.starts_with("devtools://")
        && !t.url.starts_with("chrome-extension://")
        && !t.url.starts_with("chrome://")
}

/// Chooses the page, attaches, enables the domains pipelined and seeds the frame tree, all by
/// `deadline`. Returns the page target id. A page wedged by an orphaned dialog returns `Ok` with
/// `blocked` published (the reader finishes attaching when the page answers again).
///
/// `cancel` (a start's [`CancelToken`]) ends every wait at once with [`Error::Cancelled`]. A
/// page this attach created (`Target.createTarget`) is closed again whenever it fails or is
/// cancelled, so a failed start never leaves a tab behind; a cancel that comes while
/// `Target.createTarget` is in flight waits for its answer (at most [`CLEANUP_WAIT`]) to close
/// the new tab.
pub(crate) fn attach_page(
    sh: &Shared,
    choice: Choice<'_>,
    deadline: Deadline,
    cancel: Option<&CancelToken>,
) -> Result<String, Error> {
    if matches!(choice, Choice::NewPage) {
        // No list to choose from: `Target.getTargets` would only cost a reply that grows with
        // every page the browser holds (issue 24).
        return attach_new_page(sh, deadline, cancel);
    }
    let targets = call(
        sh,
        Command::new("Target.getTargets", json!({})),
        deadline,
        cancel,
    )?;
    let targets: protocol::GetTargets = serde_json::from_value(targets).unwrap_or_default();
    let find = |id: &str| targets.target_infos.iter().find(|t| t.target_id == id);
    let chosen = match choice {
        Choice::Exactly(id) => Some(
            find(id)
                .ok_or_else(|| {
                    Error::NoPage(format!("the browser has no target with id {}", quoted(id)))
                })?
                .target_id
                .clone(),
        ),
        Choice::Same(id) => Some(
            find(id)
                .ok_or_else(|| Error::UnknownTarget(id.to_string()))?
                .target_id
                .clone(),
        ),
        Choice::SameOrNew(id) => find(id).map(|t| t.target_id.clone()),
        Choice::FirstPage { taken, choice } => {
            let candidates = targets.target_infos.iter().filter(|t| {
                !taken.contains(&t.target_id)
                    && match choice {
                        PageChoice::FirstListed => t.kind == "page",
                        _ => is_usable_page(t),
                    }
            });
            if choice == PageChoice::FirstListed {
                return attach_first_listed(sh, candidates, deadline, cancel);
            }
            candidates.map(|t| t.target_id.clone()).next()
        }
        Choice::NewPage => None,
    };
    let Some(target_id) = chosen else {
        return attach_new_page(sh, deadline, cancel);
    };
    attach_to(sh, &target_id, deadline, cancel).map(|()| target_id)
}

/// [`PageChoice::FirstListed`]: the first of `candidates` that `Target.attachToTarget` still
/// finds (one it refuses with a CDP error was closed since it was listed: nothing of it was
/// attached, so the next is tried on the same connection); a new page when none is left.
fn attach_first_listed<'t>(
    sh: &Shared,
    candidates: impl Iterator<Item = &'t protocol::TargetInfo>,
    deadline: Deadline,
    cancel: Option<&CancelToken>,
) -> Result<String, Error> {
    for t in candidates {
        match attach_to(sh, &t.target_id, deadline, cancel) {
            Ok(()) => return Ok(t.target_id.clone()),
            Err(Error::Cdp { method, .. }) if method == "Target.attachToTarget" => {
                log::debug!(
                    "page {} went away before the attach; trying the next",
                    t.target_id
                );
            }
            Err(e) => return Err(e),
        }
    }
    attach_new_page(sh, deadline, cancel)
}

/// Creates a page and attaches to it; the page is closed again when the attach fails.
fn attach_new_page(
    sh: &Shared,
    deadline: Deadline,
    cancel: Option<&CancelToken>,
) -> Result<String, Error> {
    let created = create_page(sh, deadline, cancel)?;
    match attach_to(sh, &created, deadline, cancel) {
        Ok(()) => Ok(created),
        Err(e) => {
            close_target(sh, &created);
            Err(e)
        }
    }
}

/// How long cleaning up after a failed or cancelled attach may wait for the browser: the
/// answer to an in-flight `Target.createTarget`, then `Target.closeTarget`'s.
pub(crate) const CLEANUP_WAIT: Duration = Duration::from_secs(1);

/// `Target.createTarget {url: "about:blank", background: true, newWindow: true}`: the new
/// page's target id. The page gets a window of its own: Chromium shows one tab per window, and
/// a tab that is not its window's front tab is hidden (measured on headless Chromium 156: a
/// `background` tab in a shared window reports `visibilityState` "hidden", never runs
/// `requestAnimationFrame`, its `Page.captureScreenshot` waits for a frame: 2 s, 16 s or past
/// a 60 s deadline, against 20–50 ms in a window of its own; and each later tab in that window
/// hides the one before). `background` keeps the new window from taking the focus. The window
/// costs the browser about 100 ms more than a tab.
fn create_page(
    sh: &Shared,
    deadline: Deadline,
    cancel: Option<&CancelToken>,
) -> Result<String, Error> {
    let reply = sh.start_call(
        Command::new(
            "Target.createTarget",
            json!({"url": "about:blank", "background": true, "newWindow": true}),
        ),
        deadline,
    )?;
    let created = match reply.wait(deadline, cancel) {
        Err(Error::Cancelled(method)) => {
            // The tab may be created all the same: wait for the answer to close it.
            if let Ok(v) = reply.wait(deadline.within(CLEANUP_WAIT), None)
                && let Some(t) = v["targetId"].as_str()
            {
                close_target(sh, t);
            }
            return Err(Error::Cancelled(method));
        }
        other => other?,
    };
    Ok(created["targetId"]
        .as_str()
        .ok_or_else(|| Error::NoPage("Target.createTarget returned no targetId".into()))?
        .to_string())
}

/// Closes a page this attach created, best effort, within [`CLEANUP_WAIT`] (not cancellable:
/// it is the clean-up of a cancel). One `Target.closeTarget` is enough here: the page is the
/// `about:blank` it was created with, and only a close that meets its first navigation's commit
/// is lost (`close_own_page` in `crate::supervisor`); nobody navigates it before the start
/// returns.
fn close_target(sh: &Shared, target_id: &str) {
    let c = Command::new("Target.closeTarget", json!({ "targetId": target_id }))
        .kind(CallKind::Automatic);
    if let Err(e) = sh.round_trip(c, Deadline::after(CLEANUP_WAIT)) {
        log::debug!("closing the page {target_id} this start created failed: {e}");
    }
}

/// A call of the attach sequence: [`Shared::round_trip`], ended at once by `cancel`.
fn call(
    sh: &Shared,
    cmd: Command,
    deadline: Deadline,
    cancel: Option<&CancelToken>,
) -> Result<serde_json::Value, Error> {
    sh.start_call(cmd, deadline)?.wait(deadline, cancel)
}

/// Attaches to `target_id` and sets its session up (SPEC §4 steps 2, 3 and 5).
fn attach_to(
    sh: &Shared,
    target_id: &str,
    deadline: Deadline,
    cancel: Option<&CancelToken>,
) -> Result<(), Error> {
    let attached = call(
        sh,
        Command::new(
            "Target.attachToTarget",
            json!({"targetId": target_id, "flatten": true}),
        )
        .kind(CallKind::AttachPage {
            target_id: target_id.to_string(),
        }),
        deadline,
        cancel,
    )?;
    let session = attached["sessionId"]
        .as_str()
        .ok_or_else(|| Error::NoPage("Target.attachToTarget returned no sessionId".into()))?
        .to_string();
    // Pipelined: none of these waits for the previous one. The bridge and `Runtime.enable` are
    // not in this list: the reader sends them on the page the moment it learns the session
    // (`Core::set_page_session`), since only the reader knows whether they are on.
    let (mut page_enable, mut tree, mut auto_attach) = (None, None, None);
    for c in session_setup(&session, SessionKind::Page, Extras::default()) {
        let slot = match c.kind {
            CallKind::Responds { .. } => &mut page_enable,
            CallKind::SeedFrameTree { .. } => &mut tree,
            CallKind::Plain => &mut auto_attach,
            _ => {
                sh.send_command(c, None, Deadline::NEVER)?;
                continue;
            }
        };
        *slot = Some(sh.start_call(c, deadline)?);
    }
    let (Some(page_enable), Some(tree), Some(auto_attach)) = (page_enable, tree, auto_attach)
    else {
        // `session_setup`'s tests pin the page's list: this cannot happen.
        return Err(Error::NoPage(
            "the page's set-up lacks a command the attach waits for".into(),
        ));
    };
    match page_enable.reply_by(deadline.within(PAGE_ENABLE_PROBE_AFTER), cancel) {
        Some(r) => {
            r?;
            tree.wait(deadline, cancel)?;
            match auto_attach.reply_by(deadline.within(AUTO_ATTACH_WAIT), cancel) {
                Some(Ok(_)) => probe_frames(sh, deadline, cancel),
                Some(Err(e @ Error::Cancelled(_))) => Err(e),
                _ => Ok(()),
            }
        }
        None => {
            // The page does not answer. If the browser does, the reader publishes `blocked`
            // and we return instead of hanging (SPEC §4.5).
            match probe_blocked(sh, &session, Probed::Page(target_id), deadline, cancel) {
                Ok(true) => Ok(()),
                Ok(false) => match page_enable.reply_by(deadline, cancel) {
                    Some(r) => r.map(|_| ()),
                    None => Err(Error::StartTimeout(
                        deadline.budget(),
                        "Page.enable did not answer".into(),
                    )),
                },
                Err(e @ Error::Cancelled(_)) => Err(e),
                Err(e) => Err(Error::StartTimeout(
                    deadline.budget(),
                    format!("neither the page nor the browser answers: {e}"),
                )),
            }
        }
    }
}

/// Checks that every attached OOPIF answers `Page.enable` (SPEC §4.5): a dialog left open in
/// a cross-origin iframe by a client that went away blocks only that iframe's process. Returns
/// once each has answered, or once one was found blocked (published as `blocked` naming the
/// frame), or at the probe bound.
fn probe_frames(
    sh: &Shared,
    deadline: Deadline,
    cancel: Option<&CancelToken>,
) -> Result<(), Error> {
    let snap = sh.snapshot.load();
    let mut oopifs: Vec<(String, String)> = snap
        .frames
        .values()
        .filter(|f| f.is_oopif)
        .filter_map(|f| Some((f.frame_id.clone(), f.session_id.clone()?)))
        .collect();
    oopifs.sort();
    let mut enables = Vec::with_capacity(oopifs.len());
    for (frame_id, session_id) in oopifs {
        // A second `Page.enable` on the session (the reader sent the first, fire-and-forget):
        // harmless when it is enabled already, and queued behind the first when it hangs.
        let kind = CallKind::Responds {
            session_id: session_id.clone(),
        };
        let cmd = Command::new("Page.enable", json!({}))
            .on(session_id.as_str())
            .kind(kind);
        let reply = sh.start_call(cmd, deadline)?;
        enables.push((frame_id, session_id, reply));
    }
    let probe_at = deadline.within(PAGE_ENABLE_PROBE_AFTER);
    for (frame_id, session_id, reply) in enables {
        match reply.reply_by(probe_at, cancel) {
            Some(Err(e @ Error::Cancelled(_))) => return Err(e),
            Some(_) => {}
            None => {
                if probe_blocked(sh, &session_id, Probed::Frame(&frame_id), deadline, cancel)? {
                    break; // `blocked` holds one document; the page itself answers.
                }
            }
        }
    }
    Ok(())
}

/// What [`probe_blocked`] probes.
#[derive(Clone, Copy)]
enum Probed<'a> {
    /// The task's page, this target.
    Page(&'a str),
    /// An out-of-process iframe of it.
    Frame(&'a str),
}

/// How long asking for the pages the task's page opened may take, once a dialog is proven in
/// its renderer.
const POPUPS_WAIT: Duration = Duration::from_secs(1);

/// Probes a session whose `Page.enable` hangs (module doc) and has the reader publish the
/// verdict as `blocked` if `Page.enable` there still hangs. Returns whether `blocked` is
/// published; an error when the browser does not answer either.
///
/// A dialog proven in the page's renderer may be in a page it opened that shares that renderer
/// (a same-site popup, one opened from `about:blank`), frozen before the task came: then
/// `blocked` names those pages (`target_ids`, from `Target.getTargets`) and its hint says to
/// close them first, where reloading the page would not help.
fn probe_blocked(
    sh: &Shared,
    session_id: &str,
    probed: Probed<'_>,
    deadline: Deadline,
    cancel: Option<&CancelToken>,
) -> Result<bool, Error> {
    let frame_id = match probed {
        Probed::Frame(f) => Some(f),
        Probed::Page(_) => None,
    };
    let input = sh.start_call(
        Command::new(
            "Input.dispatchMouseEvent",
            json!({"type": "mouseMoved", "x": -1, "y": -1}),
        )
        .on(session_id),
        deadline,
    )?;
    call(
        sh,
        Command::new("Browser.getVersion", json!({})),
        deadline,
        cancel,
    )?;
    let answered = input.reply_by(deadline.within(INPUT_PROBE_WAIT), cancel);
    if let Some(Err(e @ Error::Cancelled(_))) = answered {
        return Err(e);
    }
    let dialog = matches!(answered, Some(Ok(_)));
    let popups = match probed {
        Probed::Page(page) if dialog => {
            let list = Command::new("Target.getTargets", json!({}));
            match call(sh, list, deadline.within(POPUPS_WAIT), cancel) {
                Ok(targets) => crate::supervisor::pages_opened_by(&targets, |id| id == page),
                Err(e @ Error::Cancelled(_)) => return Err(e),
                Err(_) => Vec::new(),
            }
        }
        _ => Vec::new(),
    };
    let (reason, hint) = match (dialog, frame_id) {
        (true, None) if !popups.is_empty() => (
            BlockedReason::OrphanedDialog,
            crate::core::ORPHAN_OR_POPUP_HINT,
        ),
        (true, None) => (BlockedReason::OrphanedDialog, crate::core::ORPHAN_HINT),
        (true, Some(_)) => (
            BlockedReason::OrphanedDialog,
            crate::core::ORPHAN_FRAME_HINT,
        ),
        (false, _) => (BlockedReason::Unresponsive, crate::core::UNRESPONSIVE_HINT),
    };
    let blocked = Blocked {
        reason,
        hint: hint.into(),
        frame_id: frame_id.map(str::to_string),
        target_ids: popups,
    };
    let kind = CallKind::ProbeBlocked {
        session_id: session_id.to_string(),
        blocked,
    };
    call(
        sh,
        Command::new("Browser.getVersion", json!({})).kind(kind),
        deadline,
        cancel,
    )?;
    Ok(sh.snapshot.load().blocked.is_some())
}

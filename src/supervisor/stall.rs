//! A renderer of the task that stops answering while popups run unwatched (SPEC §8 "No
//! silent wedge", issue 28 item 9): the probe that tells a dialog in a page the supervisor no
//! longer watches from a busy page, when it runs, and the `blocked` it publishes.
//!
//! Past `limits.pages_max` + `limits.watched_pages_max` popups are let go; one of them that
//! shares the task's renderer (a same-site popup, an `about:blank` one) and raises a dialog
//! freezes every page of that renderer, and no event says so: nobody has `Page` enabled on it.
//! Nothing can be learnt without asking. So the question is asked
//! * about the task's page, about once a second ([`crate::watchdog::PROBE_EVERY`]), from the
//!   moment the core lets a popup go past both caps (`Outgoing::Watchdog(WatchRenderer)`, from
//!   `core/pages.rs`) until no page the task opened and lets go is left (`Target.getTargets`)
//!   or the task stops: [`Ticker`], run by the watchdog thread, never by the reader. A task that
//!   never went past the caps never asks, and its threads never wake;
//! * by a call into any session of the task that has waited [`STALL_AFTER`] (then twice as
//!   long, and so on up to its deadline) once popups were let go (`Snapshot::popups_let_go`).
//!
//! Measured on Chromium 156 (`tests/it/measure_unwatched.rs`, `renderer_probes_idle_busy_and_frozen`),
//! on the task's page and on the popup, idle / in a 2 s script loop / in a 2 s synchronous XHR /
//! while an unwatched `about:blank` popup shows an alert:
//! * `Performance.getMetrics` is answered idle (3-8 ms) and *in the middle of the script loop*
//!   (4-73 ms: Chromium runs it in a V8 interrupt), and hangs in the XHR and in the dialog; the
//!   other renderer calls (`Runtime.getIsolateId`, `Runtime.evaluate`, `Page.getLayoutMetrics`,
//!   ...) hang in all three. The browser answers (`Browser.getVersion`) throughout. A page cannot
//!   see `Performance.getMetrics` (no script runs, nothing is enabled);
//! * `Input.dispatchMouseEvent {mouseMoved, x: -1, y: -1}` is acknowledged at once (1-3 ms) in the
//!   dialog, on every page of that renderer, and never delivered: neither page saw an event and
//!   `:hover` stayed. Idle, after the loop and after the XHR it is delivered, and the page sees
//!   the pointer leave (`pointerrawupdate`, `pointerout`/`pointerleave`, `mouseout`/
//!   `mouseleave`, `:hover` lost; no `mousemove` or `pointermove`). Key events behave the same;
//!   wheel, touch, drag and IME input hang in the dialog like renderer calls.
//! * a fresh client's `Page.handleJavaScriptDialog` on the popup answers "No dialog is
//!   showing": that dialog cannot be answered over CDP, and nothing tells which page shows it;
//!   `Target.closeTarget` on it unfreezes the renderer at once (the opener answered 9-35 ms
//!   later);
//! * such a dialog is Chromium's own (no client has `Page` enabled there): a new tab or window of
//!   the browser may dismiss it (the opener answered 4–130 ms after `Target.createTarget`), so
//!   the freeze may end by itself; `blocked` then goes as the probe's renderer call answers.
//!
//! So the probe asks in two steps. First `Performance.getMetrics`, which the page cannot see:
//! answered within [`ALIVE_WAIT`], the renderer is alive or busy in a script, and that is all.
//! Only when it is not (the renderer is held outside any script: a dialog, or a synchronous
//! XHR) does the mouse move go: acknowledged at once while the browser answers and
//! `Performance.getMetrics` still does not, with no dialog the supervisor knows of to explain
//! it, it proves a dialog in a page the supervisor does not watch, and the page never sees it.
//! Its one visible trace is after a stall that was not a dialog (a synchronous XHR or other
//! native work of more than [`ALIVE_WAIT`]): the pointer leaves the page once; one mouse move
//! per unanswered `Performance.getMetrics`, never one a second.
//!
//! The verdict goes to the reader as a [`CallKind::ProbeBlocked`], which publishes
//! `blocked {reason: "dialog_in_unfollowed_page", target_ids}` (the pages the task opened and
//! does not watch, from `Target.getTargets`: closing the one that shows the dialog clears it)
//! and fails the calls in flight into that renderer; later calls there are refused at once
//! (`policy::admit`). The probe's `Performance.getMetrics` stays registered as a
//! [`CallKind::Responds`]: its answer, when the renderer answers again, clears `blocked`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use log::{debug, warn};
use serde_json::{Value, json};

use super::Supervisor;
use crate::core::policy::{self, UNANSWERED_PAGE_HINT, UNFOLLOWED_HINT};
use crate::core::{CallKind, Command};
use crate::deadline::Deadline;
use crate::error::Error;
use crate::outbound::{Outbound, Reply};
use crate::shared::Shared;
use crate::snapshot::{Blocked, BlockedReason, Snapshot, SupervisorState};

/// How long a call into the renderer waits, while popups run unwatched, before it probes.
pub(super) const STALL_AFTER: Duration = Duration::from_secs(1);

/// The probe's renderer call: answered by a renderer that is idle or busy in a script, not by
/// one held in a dialog; invisible to the page (module doc).
const ALIVE_METHOD: &str = "Performance.getMetrics";

/// How long the renderer has to answer [`ALIVE_METHOD`] before the input step.
const ALIVE_WAIT: Duration = Duration::from_millis(500);

/// How long the input step waits for the acknowledgement and for the browser.
const INPUT_WAIT: Duration = Duration::from_millis(300);

/// How long the verdict's own round trips (`Target.getTargets`, `ProbeBlocked`) may take.
const VERDICT_WAIT: Duration = Duration::from_millis(500);

/// Candidate pages listed in `blocked.target_ids`.
const CANDIDATES_MAX: usize = 16;

/// Bound of an opener chain walked in `Target.getTargets`.
const MAX_CHAIN: usize = 64;

/// Whether `blocked` already says that a dialog in a page nobody watches froze `sid`'s renderer.
fn frozen(snap: &Snapshot, sid: &str) -> Option<Error> {
    let b = snap.blocked.as_ref()?;
    (b.reason == BlockedReason::DialogInUnfollowedPage
        && (snap.blocked_session.as_deref()).is_some_and(|s| policy::in_renderer_of(snap, s, sid)))
    .then(|| policy::blocked_error(b))
}

/// The probe's calls into one session still unanswered, kept from one probe to the next (by
/// the [`Ticker`]): a renderer that has not answered since stays under question without a
/// second call, and gets at most one mouse move.
struct Unanswered {
    /// The session asked.
    sid: String,
    /// Its [`ALIVE_METHOD`].
    alive: Reply,
    /// Its mouse move, once sent and while not acknowledged.
    input: Option<Reply>,
}

/// Whether a call has been answered by now (without waiting).
fn answered(r: &Reply) -> bool {
    r.reply_by(Deadline::after(Duration::ZERO), None).is_some()
}

/// The probe (module doc) of the renderer of session `sid`: the error for calls into it when a
/// dialog in a page the supervisor does not watch froze it (and `blocked` says so by then),
/// `None` otherwise. `why` names who asks (for the log); `open` keeps the calls a previous
/// probe left unanswered; `let_go` is the pages to name when the ticker has just listed them;
/// no wait goes past `until` (a waiting call's deadline).
fn probe(
    shared: &Shared,
    task_id: &str,
    sid: &str,
    why: &str,
    open: &mut Option<Unanswered>,
    let_go: Option<Vec<String>>,
    until: Deadline,
) -> Option<Error> {
    let within = |d: Duration| Deadline::after(d).earliest(until);
    let snap = shared.snapshot.load_full();
    if let Some(e) = frozen(&snap, sid) {
        return Some(e);
    }
    let explained = snap.blocked.is_some()
        || (snap.pending_dialogs.iter())
            .chain(snap.unanswerable.iter())
            .any(|d| policy::within_dialogs_reach(&*snap, d, sid, ALIVE_METHOD));
    if explained {
        *open = None;
        return None;
    }
    let mut asked = match open.take() {
        Some(u) if u.sid == sid && !answered(&u.alive) => u,
        _ => {
            let cmd = Command::new(ALIVE_METHOD, json!({}))
                .on(sid)
                .kind(CallKind::Responds {
                    session_id: sid.to_string(),
                });
            let alive = shared.start_call(cmd, within(ALIVE_WAIT)).ok()?;
            if alive.reply_by(within(ALIVE_WAIT), None).is_some() {
                return None; // idle, or busy in a script
            }
            Unanswered {
                sid: sid.to_string(),
                alive,
                input: None,
            }
        }
    };
    // Held outside any script: a dialog drops input at once, anything else queues it.
    let input = match asked.input.take() {
        Some(earlier) if !answered(&earlier) => {
            asked.input = Some(earlier); // still queued: no second mouse move
            *open = Some(asked);
            return None;
        }
        _ => {
            let cmd = Command::new(
                "Input.dispatchMouseEvent",
                json!({"type": "mouseMoved", "x": -1, "y": -1}),
            )
            .on(sid);
            shared.start_call(cmd, within(INPUT_WAIT)).ok()?
        }
    };
    let browser = Command::new("Browser.getVersion", json!({}));
    let browser_answers = shared.round_trip(browser, within(INPUT_WAIT)).is_ok();
    let dropped = matches!(input.reply_by(within(INPUT_WAIT), None), Some(Ok(_)));
    if answered(&asked.alive) {
        return None;
    }
    if !(browser_answers && dropped) {
        asked.input = (!dropped).then_some(input);
        *open = Some(asked);
        return None;
    }
    let target_ids = match let_go {
        Some(ids) => ids,
        None => {
            let targets = Command::new("Target.getTargets", json!({}));
            match shared.round_trip(targets, within(VERDICT_WAIT)) {
                Ok(t) => unwatched_pages(&snap, &t),
                Err(_) => Vec::new(),
            }
        }
    };
    warn!(
        "task {task_id}: {why}: its renderer is frozen by a dialog in a page the supervisor does \
         not watch (popups past limits.pages_max + limits.watched_pages_max); candidates: \
         {target_ids:?}"
    );
    let blocked = Blocked {
        reason: BlockedReason::DialogInUnfollowedPage,
        hint: UNFOLLOWED_HINT.into(),
        frame_id: None,
        target_ids,
    };
    let verdict = Command::new("Browser.getVersion", json!({})).kind(CallKind::ProbeBlocked {
        session_id: sid.to_string(),
        blocked,
    });
    shared.round_trip(verdict, within(VERDICT_WAIT)).ok()?;
    frozen(&shared.snapshot.load(), sid)
}

impl Supervisor {
    /// The probe (module doc) for a call of `method` on session `sid` that got no reply within
    /// its stall step: the error to fail it with when a dialog in a page the supervisor does
    /// not watch froze the renderer, `None` to let it wait on (until `deadline`, the call's).
    pub(super) fn probe_stall(&self, sid: &str, method: &str, deadline: Deadline) -> Option<Error> {
        let why = format!("{method} got no reply");
        probe(
            &self.shared,
            &self.task_id,
            sid,
            &why,
            &mut None,
            None,
            deadline,
        )
    }
}

/// The probe of the task's page while popups it let go past both caps are open (module doc):
/// what the watchdog thread runs about once a second once the core has let one go.
pub(crate) struct Ticker {
    shared: Arc<Shared>,
    task_id: String,
    /// What the last tick left unanswered.
    open: Option<Unanswered>,
}

impl Ticker {
    /// A ticker for the task whose threads share `shared`.
    pub(crate) fn new(shared: Arc<Shared>, task_id: String) -> Ticker {
        Ticker {
            shared,
            task_id,
            open: None,
        }
    }

    /// One probe of the task's page; false when there is nothing left to watch (no page the
    /// task let go is open any more, or the task is stopping or has ended).
    pub(crate) fn tick(&mut self) -> bool {
        if self.shared.stop_requested() {
            return false;
        }
        let snap = self.shared.snapshot.load_full();
        if snap.handover.is_held() {
            return true; // no automatic command while a person holds the task: ask again later
        }
        match snap.state {
            SupervisorState::Active => {}
            SupervisorState::Reconnecting { .. } => return true,
            SupervisorState::Stopped | SupervisorState::Dead { .. } => return false,
        }
        let targets = Command::new("Target.getTargets", json!({}));
        let Ok(targets) = self
            .shared
            .round_trip(targets, Deadline::after(VERDICT_WAIT))
        else {
            return true; // ask again next time
        };
        let let_go = unwatched_pages(&snap, &targets);
        if let_go.is_empty() {
            debug!(
                "task {}: no page it let go is open any more; the renderer probe stops",
                self.task_id
            );
            self.open = None;
            return false;
        }
        if let Some(sid) = snap.page_session_id.as_deref() {
            probe(
                &self.shared,
                &self.task_id,
                sid,
                "the idle probe of its page got no answer",
                &mut self.open,
                Some(let_go),
                Deadline::NEVER,
            );
        }
        true
    }
}

impl crate::watchdog::Probes for Ticker {
    fn tick(&mut self) -> bool {
        Ticker::tick(self)
    }

    /// [`crate::watchdog::ANSWER_WITHIN`] after the task followed page `target_id` on
    /// `session_id`: when that page's `Page.enable` still has no answer while the browser
    /// answers, `blocked {reason: "unresponsive", target_ids: [target_id]}` says so (the
    /// verdict is the reader's: [`CallKind::ProbeBlocked`], published only when the
    /// `Page.enable` still hangs when its reply comes), and its answer, when it comes, clears it.
    ///
    /// Without this a popup another client let run before the task's `Page.enable` reached
    /// the browser (Browserless's own connection resumes every new page: measured in
    /// `tests/it/e2e_browserless.rs`) and that opened a dialog then stays frozen with nothing
    /// said. Nothing is asked while `blocked` says something already, while a dialog is
    /// pending (it may be what holds the answer back), while a person holds the task, or for a
    /// page no longer followed on that session.
    fn check_answers(&mut self, session_id: &str, target_id: &str) {
        if self.shared.stop_requested() {
            return;
        }
        let snap = self.shared.snapshot.load_full();
        let followed = snap.pages.iter().any(|p| p.session_id == session_id);
        if !followed
            || snap.blocked.is_some()
            || !snap.pending_dialogs.is_empty()
            || snap.handover.is_held()
            || snap.state != SupervisorState::Active
        {
            return;
        }
        let blocked = Blocked {
            reason: BlockedReason::Unresponsive,
            hint: UNANSWERED_PAGE_HINT.into(),
            frame_id: None,
            target_ids: vec![target_id.to_string()],
        };
        let verdict = Command::new("Browser.getVersion", json!({})).kind(CallKind::ProbeBlocked {
            session_id: session_id.to_string(),
            blocked,
        });
        if let Err(e) = self
            .shared
            .round_trip(verdict, Deadline::after(VERDICT_WAIT))
        {
            debug!(
                "task {}: the check of page {target_id} got no verdict: {e}",
                self.task_id
            );
        }
    }
}

/// The pages of `Target.getTargets`'s reply `targets` that the task opened (their chain of
/// openers reaches one of its pages) and does not follow or watch, in the browser's order, at
/// most [`CANDIDATES_MAX`].
pub(super) fn unwatched_pages(snap: &Snapshot, targets: &Value) -> Vec<String> {
    pages_opened_by(targets, |id| {
        snap.page_target_id.as_deref() == Some(id)
            || snap.pages.iter().any(|p| p.target_id == id)
            || snap.watched_pages.iter().any(|p| p.target_id == id)
    })
}

/// The pages of `Target.getTargets`'s reply `targets` whose chain of openers reaches a page
/// `watched` says yes to, and that it says no to, in the browser's order, at most
/// [`CANDIDATES_MAX`].
pub(crate) fn pages_opened_by(targets: &Value, watched: impl Fn(&str) -> bool) -> Vec<String> {
    let infos = targets["targetInfos"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let opener: HashMap<&str, &str> = infos
        .iter()
        .filter_map(|t| Some((t["targetId"].as_str()?, t["openerId"].as_str()?)))
        .collect();
    let opened_by_task = |id: &str| {
        let mut cur = id;
        for _ in 0..MAX_CHAIN {
            match opener.get(cur) {
                Some(o) if watched(o) => return true,
                Some(o) => cur = o,
                None => return false,
            }
        }
        false
    };
    infos
        .iter()
        .filter(|t| t["type"] == "page")
        .filter_map(|t| t["targetId"].as_str())
        .filter(|id| !watched(id) && opened_by_task(id))
        .take(CANDIDATES_MAX)
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::PageInfo;
    use std::sync::Arc;

    #[test]
    fn the_candidates_are_the_pages_the_task_opened_and_does_not_watch() {
        let mut snap = Snapshot::empty("t", "ws://x");
        snap.page_target_id = Some("MAIN".into());
        let page = |id: &str| PageInfo {
            target_id: id.into(),
            ..PageInfo::default()
        };
        snap.pages = Arc::from(vec![page("MAIN"), page("FOLLOWED")]);
        snap.watched_pages = Arc::from(vec![page("WATCHED")]);
        let targets = json!({"targetInfos": [
            {"targetId": "LET-GO", "type": "page", "openerId": "MAIN"},
            {"targetId": "ITS-CHILD", "type": "page", "openerId": "LET-GO"},
            {"targetId": "OF-WATCHED", "type": "page", "openerId": "WATCHED"},
            {"targetId": "FOLLOWED", "type": "page", "openerId": "MAIN"},
            {"targetId": "OTHER", "type": "page"},
            {"targetId": "OTHERS-POPUP", "type": "page", "openerId": "OTHER"},
            {"targetId": "LOOP-A", "type": "page", "openerId": "LOOP-B"},
            {"targetId": "LOOP-B", "type": "page", "openerId": "LOOP-A"},
            {"targetId": "FRAME", "type": "iframe", "openerId": "MAIN"},
            {"targetId": "MAIN", "type": "page"},
        ]});
        assert_eq!(
            unwatched_pages(&snap, &targets),
            ["LET-GO", "ITS-CHILD", "OF-WATCHED"]
        );
        assert!(unwatched_pages(&snap, &json!({})).is_empty());
    }
}

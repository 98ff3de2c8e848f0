//! A call into the task's renderer that stops answering while popups run unwatched (SPEC §8
//! "No silent wedge", issue 28): the probe that tells a dialog in a page the supervisor no
//! longer watches from a busy script, and the `blocked` it publishes.
//!
//! Past `limits.pages_max` + `limits.watched_pages_max` popups are let go; one of them that
//! shares the task's renderer (a same-site popup, an `about:blank` one) and raises a dialog
//! freezes every page of that renderer, and no event says so: nobody has `Page` enabled on it.
//! Nothing can be learnt without asking, and asking on a timer would wake an idle supervisor.
//! So the question is asked only by a call that waits: once the snapshot says popups were let
//! go (`Snapshot::popups_let_go`), a call into a session that has not answered after
//! [`STALL_AFTER`] (then twice as long, and so on up to its deadline) probes that session's
//! renderer. Measured on Chromium 156 (`tests/it/measure_unwatched.rs`), while an unwatched
//! `about:blank` popup shows an alert:
//! * a renderer-side call (`Runtime.getIsolateId`, `Page.enable`, `Runtime.evaluate`) hangs on
//!   every page of its renderer, while the browser answers (`Browser.getVersion`);
//! * `Input.dispatchMouseEvent {mouseMoved, x: -1, y: -1}` is acknowledged at once (< 2 ms) on
//!   every page of that renderer, the opener included: the browser drops input while the
//!   renderer is held in a dialog; a busy renderer acknowledges only once its script yields;
//! * a fresh client's `Page.handleJavaScriptDialog` on the popup answers "No dialog is
//!   showing": that dialog cannot be answered over CDP, and nothing tells which page shows it;
//!   `Target.closeTarget` on it unfreezes the renderer at once (the opener answered 9 ms later);
//! * such a dialog is Chromium's own (no client has `Page` enabled there): a new tab or window of
//!   the browser dismisses it (the opener answered 4–130 ms after `Target.createTarget`), so the
//!   freeze may end by itself; `blocked` then goes as the probe's renderer call answers.
//!
//! So: the input acknowledged at once, `Runtime.getIsolateId` unanswered, the browser answering,
//! and no dialog the supervisor knows of that explains it, prove a dialog in a page it does not
//! watch. The verdict goes to the reader as a [`CallKind::ProbeBlocked`], which publishes
//! `blocked {reason: "dialog_in_unfollowed_page", target_ids}` (the pages the task opened and
//! does not watch, from `Target.getTargets`: closing the one that shows the dialog clears it)
//! and fails the other calls into that renderer; later calls there are refused at once
//! (`policy::admit`). The probe's `Runtime.getIsolateId` stays registered as a
//! [`CallKind::Responds`]: its answer, when the renderer answers again, clears `blocked`.
//!
//! The probe's one side effect is the one of SPEC §4.5's: a page of the renderer receives a
//! `mousemove` at (-1, -1).

use std::collections::HashMap;
use std::time::Duration;

use log::warn;
use serde_json::{Value, json};

use super::Supervisor;
use crate::core::policy::{self, UNFOLLOWED_HINT};
use crate::core::{CallKind, Command};
use crate::deadline::Deadline;
use crate::error::Error;
use crate::outbound::Outbound;
use crate::snapshot::{Blocked, BlockedReason, Snapshot};

/// How long a call into the renderer waits, while popups run unwatched, before it probes.
pub(super) const STALL_AFTER: Duration = Duration::from_secs(1);

/// How long the probe waits for the input acknowledgement and for the renderer.
const PROBE_WAIT: Duration = Duration::from_millis(500);

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

impl Supervisor {
    /// The probe (module doc) for a call of `method` on session `sid` that got no reply within
    /// its stall step: the error to fail it with when a dialog in a page the supervisor does
    /// not watch froze the renderer, `None` to let it wait on.
    pub(super) fn probe_stall(&self, sid: &str, method: &str) -> Option<Error> {
        let snap = self.snapshot();
        if let Some(e) = frozen(&snap, sid) {
            return Some(e);
        }
        let explained = snap.blocked.is_some()
            || (snap.pending_dialogs.iter())
                .chain(snap.unanswerable.iter())
                .any(|d| policy::dialog_blocks(&*snap, d, sid, method));
        if explained {
            return None;
        }
        let wait = Deadline::after(PROBE_WAIT);
        let alive = Command::new("Runtime.getIsolateId", json!({}))
            .on(sid)
            .kind(CallKind::Responds {
                session_id: sid.to_string(),
            });
        let alive = self.shared.start_call(alive, wait).ok()?;
        let input = Command::new(
            "Input.dispatchMouseEvent",
            json!({"type": "mouseMoved", "x": -1, "y": -1}),
        )
        .on(sid);
        let input = self.shared.start_call(input, wait).ok()?;
        let browser = Command::new("Browser.getVersion", json!({}));
        self.shared.round_trip(browser, wait).ok()?;
        if !matches!(input.reply_by(wait), Some(Ok(_))) || alive.reply_by(wait).is_some() {
            return None; // a busy script, or a renderer that answers
        }
        let targets = Command::new("Target.getTargets", json!({}));
        let target_ids = match self.shared.round_trip(targets, Deadline::after(PROBE_WAIT)) {
            Ok(t) => unwatched_pages(&snap, &t),
            Err(_) => Vec::new(),
        };
        warn!(
            "task {}: {method} into a renderer frozen by a dialog in a page the supervisor does \
             not watch (popups past limits.pages_max + limits.watched_pages_max); candidates: \
             {target_ids:?}",
            self.task_id
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
        self.shared
            .round_trip(verdict, Deadline::after(PROBE_WAIT))
            .ok()?;
        frozen(&self.snapshot(), sid)
    }
}

/// The pages of `Target.getTargets`'s reply `targets` that the task opened (their chain of
/// openers reaches one of its pages) and does not follow or watch, in the browser's order, at
/// most [`CANDIDATES_MAX`].
pub(super) fn unwatched_pages(snap: &Snapshot, targets: &Value) -> Vec<String> {
    let infos = targets["targetInfos"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let opener: HashMap<&str, &str> = infos
        .iter()
        .filter_map(|t| Some((t["targetId"].as_str()?, t["openerId"].as_str()?)))
        .collect();
    let watched = |id: &str| {
        snap.page_target_id.as_deref() == Some(id)
            || snap.pages.iter().any(|p| p.target_id == id)
            || snap.watched_pages.iter().any(|p| p.target_id == id)
    };
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

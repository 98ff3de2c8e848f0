//! The call rules, in one place: which dialog blocks which call (SPEC §8), which crash refuses
//! which call (SPEC §10), and what the caller is told (SPEC §4.5, §11). Two users, each
//! through its own view of the sessions ([`SessionView`]: the live state, or a published
//! [`Snapshot`]):
//!
//! * the state machine, for calls in flight: a call registered on a crashed session
//!   ([`crash_refusal`]), a dialog that opens or becomes unanswerable while calls wait
//!   ([`fails_in_flight`]), a renderer that crashes under waiting calls;
//! * the call path (`supervisor/calls.rs`), for a call made while a dialog is already pending or
//!   the page is `blocked`: [`admit`] before it is sent, [`opened_since`] right after,
//!   [`after_grace`] when a method nobody measured got no reply within [`DIALOG_GRACE`].
//!
//! # A dialog blocks its renderer, not its session
//!
//! A native dialog stops the main thread of its renderer process, and Chromium puts several
//! CDP sessions in one process. Measured on Chromium 156 (`tests/it/measure_renderers.rs`; the
//! table is in `crate::measured` and the README): an alert in a page blocks every session whose
//! document runs in that page's renderer, and no other. Sessions share a renderer exactly when
//! their documents are **same-site** (scheme-less eTLD+1; the port does not count) **and in one
//! browsing-context group**: a page, its same-site iframes (an A frame inside a B iframe inside
//! an A page is its own OOPIF session in A's process), the popups it opened without `noopener`
//! (`TargetInfo.canAccessOpener: true`) and theirs in turn. A `noopener` popup (`window.open(..,
//! 'noopener')`, `rel=noopener`) starts a group of its own although `openerId` still names its
//! opener; pages a client opens (`Target.createTarget`) are separate groups; a cross-site popup
//! or iframe runs elsewhere; a sandboxed iframe gets a process of its own.
//!
//! What CDP says that predicts it exactly: `Runtime.getIsolateId`, one V8 isolate per renderer
//! main thread (equal ids ⇔ blocked together, every measured pair). The supervisor asks each
//! page and OOPIF session for it when the session is set up, and again after each new document
//! of the session's own frame (a cross-site navigation moves a page to another process). Until
//! the answer is there (and it never comes while that renderer shows a dialog), the structural
//! rule stands in: same group and same [`site_key`]. It is deliberately coarse (the last two
//! labels of the host, scheme and port ignored, an unknown or opaque site matching any): it may
//! call two renderers one for a moment (a refused call that could have gone through), never the
//! other way round (a call that waits for its deadline). That is why it needs no public suffix
//! list: the isolate id decides whenever it is known.
//!
//! # Which methods a dialog holds up: measured
//!
//! Whether Chromium still answers a method while a dialog blocks its session was measured, method
//! by method (`crate::measured`). [`with_dialog_pending`] reads that table for a call made while
//! the dialog is pending (send it, refuse it unsent, or send it and give up after
//! [`DIALOG_GRACE`]), [`blocks_in_flight`] for a call already in flight when the dialog opens.
//!
//! # Crashes
//!
//! A crashed renderer answers nothing but the two methods that replace it
//! ([`answered_when_crashed`]): every other call into it fails at once ([`crash_refusal`]).
//!
//! # `blocked`
//!
//! What the snapshot's `blocked` says and what it costs a caller: the hint texts published with
//! each [`BlockedReason`], the error `respond_to_dialog` gives when only `blocked` is left
//! ([`blocked_error`]), and which calls it refuses by itself ([`admit`]: a dialog proved
//! orphaned refuses the calls that would hang; a merely unresponsive page refuses nothing, it
//! may answer again).

use std::time::Duration;

use crate::error::Error;
pub(crate) use crate::snapshot::Renderer;
use crate::snapshot::{Blocked, BlockedReason, DialogKind, PendingDialog, Snapshot};

// ---------------------------------------------------------------- the renderer rule

/// Whether two sessions run in one renderer process (module doc).
pub(crate) fn same_renderer(a: &Renderer, b: &Renderer) -> bool {
    match (&a.isolate, &b.isolate) {
        (Some(x), Some(y)) => x == y,
        _ => {
            a.group == b.group
                && match (&a.site, &b.site) {
                    (Some(x), Some(y)) => x == y,
                    _ => true,
                }
        }
    }
}

/// A key no finer than Chromium's site of `origin` (module doc): for a domain its last two
/// labels, for an IP address the address; `None` for an opaque or unparsable origin.
pub(crate) fn site_key(origin: &str) -> Option<String> {
    let url = url::Url::parse(origin).ok()?;
    match url.host()? {
        url::Host::Domain(d) => {
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            if d.is_empty() {
                return None;
            }
            let labels: Vec<&str> = d.rsplitn(3, '.').collect();
            Some(match labels.as_slice() {
                [tld, sld, ..] => format!("{sld}.{tld}"),
                _ => d,
            })
        }
        url::Host::Ipv4(ip) => Some(ip.to_string()),
        url::Host::Ipv6(ip) => Some(format!("[{ip}]")),
    }
}

/// What [`within_dialogs_reach`] needs to know about the sessions.
pub(crate) trait SessionView {
    /// The session that owns `frame_id`'s document, when the frame is known.
    fn owner_of(&self, frame_id: &str) -> Option<&str>;
    /// The renderer behind document session `sid` (`None`: a worker, or not tracked).
    fn renderer(&self, sid: &str) -> Option<Renderer>;
    /// The page whose page session is `sid` (the task's, a followed or a watched one).
    fn page_of_page_session(&self, sid: &str) -> Option<&str>;
    /// The task's page.
    fn task_page(&self) -> Option<&str>;
    /// The task's page session.
    fn task_page_session(&self) -> Option<&str>;
}

/// Whether a call of `method` on session `sid` is within `dialog`'s reach: the call's session
/// runs in the renderer that shows the dialog (module doc), or the call is an input event on the
/// dialog's page (the browser drops input for the whole page while it shows a dialog, whichever
/// frame raised it). Whether the call is then held up is decided apart, by the method
/// ([`with_dialog_pending`], [`blocks_in_flight`]).
pub(crate) fn within_dialogs_reach(
    view: &impl SessionView,
    dialog: &PendingDialog,
    sid: &str,
    method: &str,
) -> bool {
    let owner = dialog
        .frame_id
        .as_deref()
        .and_then(|f| view.owner_of(f))
        .unwrap_or(dialog.session_id.as_str());
    if owner == sid {
        return true;
    }
    if method.starts_with("Input.") {
        let dialog_page = Some(dialog.target_id.as_str())
            .filter(|t| !t.is_empty())
            .or_else(|| view.task_page());
        if view.page_of_page_session(sid).is_some() && view.page_of_page_session(sid) == dialog_page
        {
            return true;
        }
    }
    match (view.renderer(owner), view.renderer(sid)) {
        (Some(a), Some(b)) => same_renderer(&a, &b),
        _ => false,
    }
}

/// Whether a call on session `sid` runs in the renderer of session `blocked_sid`: the same
/// session, or one the renderer rule puts with it (for a `blocked` that freezes a renderer).
pub(crate) fn in_renderer_of(view: &impl SessionView, blocked_sid: &str, sid: &str) -> bool {
    sid == blocked_sid
        || matches!(
            (view.renderer(blocked_sid), view.renderer(sid)),
            (Some(a), Some(b)) if same_renderer(&a, &b)
        )
}

/// The live state as a [`SessionView`], for calls in flight.
impl SessionView for super::Core {
    fn owner_of(&self, frame_id: &str) -> Option<&str> {
        self.frames.owner_of(frame_id)
    }

    fn renderer(&self, sid: &str) -> Option<Renderer> {
        self.renderer_of(sid)
    }

    fn page_of_page_session(&self, sid: &str) -> Option<&str> {
        if !self.is_page_session(sid) {
            return None;
        }
        self.sessions.get(sid).map(|s| s.target_id.as_str())
    }

    fn task_page(&self) -> Option<&str> {
        self.page_target_id.as_deref()
    }

    fn task_page_session(&self) -> Option<&str> {
        self.page_session_id.as_deref()
    }
}

/// A published snapshot as a [`SessionView`], for the call path.
impl SessionView for Snapshot {
    fn owner_of(&self, frame_id: &str) -> Option<&str> {
        self.frames.get(frame_id).map(|r| r.owner_session.as_str())
    }

    fn renderer(&self, sid: &str) -> Option<Renderer> {
        self.renderers.get(sid).cloned()
    }

    fn page_of_page_session(&self, sid: &str) -> Option<&str> {
        if self.page_session_id.as_deref() == Some(sid) {
            return self.page_target_id.as_deref();
        }
        self.pages
            .iter()
            .skip(1)
            .chain(self.watched_pages.iter())
            .find(|p| p.session_id == sid)
            .map(|p| p.target_id.as_str())
    }

    fn task_page(&self) -> Option<&str> {
        self.page_target_id.as_deref()
    }

    fn task_page_session(&self) -> Option<&str> {
        self.page_session_id.as_deref()
    }
}

// ---------------------------------------------------------------- which methods a dialog holds up

/// What a call of `method` does when a dialog that blocks it is already pending (SPEC §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WithDialog {
    /// Chromium answers it with a dialog open: send it.
    Send,
    /// Chromium does not answer it (or drops it) while the dialog is open: fail at once, unsent.
    Refuse,
    /// Not measured: send it, and fail after [`DIALOG_GRACE`] without a reply.
    Grace,
}

/// How long a call of a method whose behaviour under a dialog was not measured may wait for
/// its reply while a dialog that blocks it is pending.
pub const DIALOG_GRACE: Duration = Duration::from_millis(250);

/// How long a call told that a bridge dialog blocks it still takes its own reply: the bridge's
/// request reaches the supervisor by another path through the browser than the call's reply,
/// and can overtake the reply of the very call that scheduled it (seen on Chromium).
pub const BRIDGE_REPLY_GRACE: Duration = Duration::from_millis(100);

/// [`WithDialog`] for `method`, from what was measured on Chromium (`crate::measured`).
/// `Input.*` events are refused although Chromium answers them: it drops the event (the page
/// never sees the click or key), so "success" would be a lie.
pub fn with_dialog_pending(method: &str) -> WithDialog {
    if method.starts_with("Input.") {
        return WithDialog::Refuse;
    }
    match crate::measured::answered_with_dialog_open(method) {
        Some(true) => WithDialog::Send,
        Some(false) => WithDialog::Refuse,
        None => WithDialog::Grace,
    }
}

/// Whether a call of `method` that is in flight when a `dialog_kind` dialog opens on its
/// session waits on that dialog. Methods measured to answer while a dialog is open carry on,
/// except input events (the click whose handler opened the dialog answers only once the dialog
/// is gone) and `Page.navigate`/`Page.close` under the `beforeunload` dialog they raised (their
/// reply waits for the answer; `Page.reload`'s does not: measured).
pub fn blocks_in_flight(dialog_kind: &DialogKind, method: &str) -> bool {
    if method.starts_with("Input.") {
        return true;
    }
    match crate::measured::answered_with_dialog_open(method) {
        Some(true) => {
            *dialog_kind == DialogKind::BeforeUnload
                && matches!(method, "Page.navigate" | "Page.close")
        }
        _ => true,
    }
}

// ---------------------------------------------------------------- calls in flight (the core)

/// Whether `dialog` fails a call of `method` on `sid` that is in flight when the dialog opens (or
/// becomes unanswerable). `holds` says whether the dialog holds calls up at all: it waits for
/// the agent (`must_respond`, no Closed event yet) or CDP can no longer answer it; a dialog the
/// policy answers at once holds nothing.
pub(crate) fn fails_in_flight(
    view: &impl SessionView,
    dialog: &PendingDialog,
    holds: bool,
    sid: &str,
    method: &str,
) -> bool {
    holds
        && within_dialogs_reach(view, dialog, sid, method)
        && blocks_in_flight(&dialog.kind, method)
}

// ---------------------------------------------------------------- calls made while a dialog is pending

/// What the call path does with a call that [`admit`] lets through.
#[derive(Debug)]
pub(crate) struct Admission<'a> {
    /// The pending dialogs that block it, which the caller has now seen (the state machine
    /// does not fail the call again for them).
    pub known: Vec<&'a PendingDialog>,
    /// A method nobody measured, sent while `known[0]` blocks it: it fails if no reply came
    /// within [`DIALOG_GRACE`] and the dialog is still pending then ([`after_grace`]).
    pub grace: Option<&'a PendingDialog>,
}

/// Whether a call of `method` on session `sid` may be sent, judged on the published `snap`
/// (SPEC §8): a `blocked` that proved a dialog on its session, a dialog CDP can no longer answer
/// in its renderer, or (`must_respond`) a pending dialog there refuse the methods measured to
/// hang; methods not measured go with a grace ([`Admission::grace`]).
pub(crate) fn admit<'a>(
    snap: &'a Snapshot,
    must_respond: bool,
    sid: &str,
    method: &str,
) -> Result<Admission<'a>, Error> {
    // No dialog a call could wait on, none that cannot be answered, nothing blocked: as for
    // almost every call, nothing below could refuse it or hold it up.
    if snap.blocked.is_none()
        && snap.unanswerable.is_empty()
        && (!must_respond || snap.pending_dialogs.is_empty())
    {
        return Ok(Admission {
            known: Vec::new(),
            grace: None,
        });
    }
    let with_dialog = with_dialog_pending(method);
    // A dialog nobody can answer over CDP (an orphan, or one the browser stopped letting CDP
    // answer) blocks its renderer as surely as a pending one: a call that would hang fails at
    // once; `Page.reload`/`Page.navigate`, which clear it, go through.
    if let Some(b) = &snap.blocked
        && b.reason == BlockedReason::OrphanedDialog
        && blocked_owner(snap, b) == Some(sid)
        && with_dialog == WithDialog::Refuse
    {
        return Err(blocked_error(b));
    }
    // A dialog in a page the supervisor does not watch froze this renderer (a probe proved it):
    // everything but the methods Chromium answers with a dialog open would hang.
    if let Some(b) = &snap.blocked
        && b.reason == BlockedReason::DialogInUnfollowedPage
        && with_dialog != WithDialog::Send
        && (snap.blocked_session.as_deref()).is_some_and(|s| in_renderer_of(snap, s, sid))
    {
        return Err(blocked_error(b));
    }
    if with_dialog != WithDialog::Send
        && let Some(d) = snap
            .unanswerable
            .iter()
            .find(|d| within_dialogs_reach(snap, d, sid, method))
    {
        return Err(dialog_error(d, true, method));
    }
    let known: Vec<&PendingDialog> = if must_respond {
        snap.pending_dialogs
            .iter()
            .filter(|d| within_dialogs_reach(snap, d, sid, method))
            .collect()
    } else {
        Vec::new()
    };
    let mut grace = None;
    if let Some(d) = known.first() {
        match with_dialog {
            WithDialog::Send => {}
            WithDialog::Refuse => return Err(dialog_error(d, false, method)),
            WithDialog::Grace => grace = Some(*d),
        }
    }
    Ok(Admission { known, grace })
}

/// The second look, once the call is registered and written: a dialog published since `snap`
/// was read for [`admit`], not among `known`, that the call now waits on. (The state machine
/// catches those published later.)
pub(crate) fn opened_since(
    snap: &Snapshot,
    known: &[&PendingDialog],
    sid: &str,
    method: &str,
) -> Option<Error> {
    snap.pending_dialogs
        .iter()
        .find(|d| {
            !known.iter().any(|k| k.id == d.id)
                && within_dialogs_reach(snap, d, sid, method)
                && blocks_in_flight(&d.kind, method)
        })
        .map(|d| dialog_error(d, false, method))
}

/// A call [`admit`] sent with a grace got no reply within [`DIALOG_GRACE`]: it fails if `dialog`
/// is still pending on `snap` (or CDP can no longer answer it); `None` lets it wait on for its
/// own deadline (the dialog has gone, its reply may still come).
pub(crate) fn after_grace(snap: &Snapshot, dialog: &PendingDialog, method: &str) -> Option<Error> {
    if let Some(d) = snap.unanswerable.iter().find(|d| d.id == dialog.id) {
        return Some(dialog_error(d, true, method));
    }
    snap.pending_dialogs
        .iter()
        .any(|d| d.id == dialog.id)
        .then(|| dialog_error(dialog, false, method))
}

// ---------------------------------------------------------------- what the caller is told

/// The error of a call of `method` that `dialog` blocks: [`Error::BlockedByDialog`] naming it,
/// or, for a dialog CDP can no longer answer (`unanswerable`), [`Error::DialogUnanswerable`]
/// (the caller must reload, not answer).
pub(crate) fn dialog_error(dialog: &PendingDialog, unanswerable: bool, method: &str) -> Error {
    if unanswerable {
        Error::DialogUnanswerable {
            id: dialog.id.clone(),
            frame_id: dialog.frame_id.clone(),
        }
    } else {
        Error::BlockedByDialog {
            dialog: Box::new(dialog.clone()),
            method: method.to_string(),
        }
    }
}

/// The error for what `blocked` reports, when no pending dialog is left to answer
/// (`respond_to_dialog`) or when it refuses a call ([`admit`]). Only a probe that proved a
/// dialog says "orphaned dialog"; a busy page is not one.
pub(crate) fn blocked_error(b: &Blocked) -> Error {
    match b.reason {
        BlockedReason::OrphanedDialog => Error::OrphanedDialog,
        BlockedReason::UnanswerableDialog => Error::DialogUnanswerable {
            id: String::new(),
            frame_id: b.frame_id.clone(),
        },
        BlockedReason::Unresponsive => Error::PageUnresponsive,
        BlockedReason::DialogInUnfollowedPage => Error::DialogInUnfollowedPage {
            target_ids: b.target_ids.clone(),
        },
    }
}

/// The session whose document `blocked` is about: the iframe's owner, or the page's.
fn blocked_owner<'a>(view: &'a impl SessionView, b: &Blocked) -> Option<&'a str> {
    match &b.frame_id {
        Some(f) => view.owner_of(f),
        None => view.task_page_session(),
    }
}

// ---------------------------------------------------------------- crashes

/// Whether a call of `method` still gets an answer from a page whose renderer crashed. Measured
/// on Chromium 156: `Page.navigate` and `Page.reload` answer at once and bring a new renderer;
/// everything else on the crashed session waits until then, and is answered "Target crashed".
pub fn answered_when_crashed(method: &str) -> bool {
    matches!(method, "Page.navigate" | "Page.reload")
}

/// The error of a call of `method` into `what` (`the page`, `frame <id>`, ...), whose renderer
/// crashed: it fails at once unless the method recovers the renderer (SPEC §10).
pub(crate) fn crash_refusal(what: &str, method: &str) -> Option<Error> {
    (!answered_when_crashed(method)).then(|| Error::TargetCrashed {
        what: what.to_string(),
        method: method.to_string(),
    })
}

// ---------------------------------------------------------------- `blocked` hints

/// The hint published with `blocked` when a probe proved a dialog on the page (SPEC §4.5, §11).
pub const ORPHAN_HINT: &str = "A JavaScript dialog opened by a CDP client that has disconnected is \
blocking this page. It cannot be answered over CDP (the browser replies 'No dialog is showing'). \
Reload or navigate the page (browser_cdp Page.reload or Page.navigate) to clear it; the supervisor \
then finishes attaching by itself.";

/// The hint published with `blocked` when a probe proved a dialog in the page's renderer and
/// the page has opened pages that may share it (`target_ids`).
pub const ORPHAN_OR_POPUP_HINT: &str = "A JavaScript dialog that no CDP client can answer (the \
browser replies 'No dialog is showing') blocks this page's renderer. It is in this page or in a \
page it opened that shares its renderer (a same-site popup, or one opened from about:blank): \
target_ids names the pages it opened. Close those first (browser_cdp Target.closeTarget with each \
targetId): if the dialog was in one of them, this page answers again at once and blocked \
disappears. If it stays, reload or navigate this page (browser_cdp Page.reload or Page.navigate); \
the supervisor then finishes attaching by itself.";

/// The hint published with `blocked` when a probe proved a dialog in an out-of-process iframe.
pub const ORPHAN_FRAME_HINT: &str = "A JavaScript dialog opened by a CDP client that has \
disconnected is blocking the cross-origin iframe named by frame_id (the rest of the page still \
answers). It cannot be answered over CDP (the browser replies 'No dialog is showing'). Reload the \
page (browser_cdp Page.reload, without frame_id) to clear it.";

/// The hint published with `blocked` for a dialog CDP can no longer answer (SPEC §5, §11).
pub const UNANSWERABLE_HINT: &str = "A JavaScript dialog in the frame named by frame_id still \
blocks it, but the browser no longer lets CDP answer it ('No dialog is showing'; Chromium does this to \
an iframe's dialog raised while another dialog was open). Reload the page (browser_cdp Page.reload) to \
clear it.";

/// The hint published with `blocked` when a dialog in a page the supervisor does not watch
/// freezes the renderer of the task's pages (SPEC §8 "No silent wedge").
pub const UNFOLLOWED_HINT: &str = "A JavaScript dialog in a page this task opened but the \
supervisor does not watch (a popup past limits.pages_max + limits.watched_pages_max) blocks the \
renderer this page shares with it: calls into it would hang, and that dialog cannot be answered \
from here. Close the page that shows it: browser_cdp Target.closeTarget with a targetId from \
blocked.target_ids (closing the others does no harm); the page answers again at once, and blocked \
disappears. Raising limits.watched_pages_max keeps such popups watched.";

/// The hint published with `blocked` when a page the task follows (a popup, a page a client of
/// its endpoint created) never answered its set-up (`crate::supervisor::stall`).
pub const UNANSWERED_PAGE_HINT: &str = "The page named by target_ids, which this task follows (a \
popup, or a page a client created), has not answered CDP since the supervisor attached to it, \
while the browser does: either a script keeps it busy, or it opened a JavaScript dialog before \
the supervisor could watch it (another client of the browser, such as Browserless's own \
connection or a driver connected straight to the browser, let it run first). Such a dialog \
cannot be answered over CDP (the browser replies 'No dialog is showing'). The task's own page is \
not affected unless it shares that page's renderer. Close that page (browser_cdp \
Target.closeTarget with its targetId) or reload it (browser_cdp Page.reload with its target_id); \
blocked then disappears.";

/// The hint published with `blocked` when the page (or the iframe named by `frame_id`) does not
/// answer and no probe proved a dialog: safe for both causes.
pub const UNRESPONSIVE_HINT: &str = "The page (or the iframe named by frame_id) does not answer CDP \
while the browser does: either a script keeps it busy, or a JavaScript dialog opened by a CDP \
client that went away blocks it. Wait a few seconds first: a busy page answers again by itself and \
blocked then disappears (the supervisor finishes attaching by itself). If it stays blocked, reload \
the page (browser_cdp Page.reload), which clears both causes but loses the page's state.";

#[cfg(test)]
mod tests;

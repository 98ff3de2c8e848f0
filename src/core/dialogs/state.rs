//! What the supervisor knows of dialogs: the open ones (with the answers on their way to each),
//! the ring of recent closed ones, the id counter and the cap. [`Dialogs`] owns it: every change
//! goes through its methods, which mark what the snapshot shows as changed, and
//! [`Dialogs::take_published`] hands the core what to publish. *When* a dialog opens or closes,
//! and who closed it, is decided in `crate::core::dialogs`.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::config::Limits;
use crate::snapshot::{ClosedBy, ClosedDialog, PendingDialog};

/// An answer written and not yet acknowledged.
#[derive(Debug)]
pub(crate) struct AnswerInFlight {
    /// Its call id.
    pub call_id: u64,
    /// What it said: (accept, prompt text).
    pub said: (bool, String),
    /// The dialog it was meant for. It differs from the dialog that holds it when the events
    /// showed that the named one was closed by something else and the browser will apply the
    /// answer to the dialog it shows now (SPEC §5).
    pub named: String,
}

/// A dialog that has opened and not yet been recorded as closed.
#[derive(Debug)]
pub(crate) struct OpenDialog {
    /// The dialog as `pending_dialogs` shows it.
    pub public: PendingDialog,
    /// When it opened (for the proxy signature in `auto` bridge mode).
    pub opened: std::time::Instant,
    /// Answers that will land on this dialog, written and not yet acknowledged.
    pub answers_in_flight: Vec<AnswerInFlight>,
    /// `javascriptDialogClosed` arrived while an answer was in flight; the ack decides who closed it.
    pub closed_event: Option<(bool, String)>,
    /// False for a native dialog that opened past `limits.pending_dialogs_max`: the supervisor
    /// dismisses it at once and never lists it as pending.
    pub shown: bool,
    /// The browser refused an answer with "No dialog is showing" although no Closed event came:
    /// the dialog still blocks its frame but CDP can no longer answer it (SPEC §5, §11). It is
    /// out of `pending_dialogs` and reported through `blocked` until a Closed event or a new
    /// document of its frame (a reload) ends it.
    pub unanswerable: bool,
}

impl OpenDialog {
    /// Listed in `pending_dialogs`: shown, answerable, and no Closed event yet.
    pub(crate) fn is_pending(&self) -> bool {
        self.shown && !self.unanswerable && self.closed_event.is_none()
    }
}

/// A published list of dialogs.
pub(crate) type DialogList = Arc<[PendingDialog]>;

/// What [`Dialogs::take_published`] hands over: each part only when it changed.
#[derive(Debug)]
pub(crate) struct PublishedDialogs {
    /// `pending_dialogs` and `unanswerable`.
    pub open: Option<(DialogList, DialogList)>,
    /// `recent_dialogs`.
    pub recent: Option<Arc<[Arc<ClosedDialog>]>>,
}

/// The dialogs of one supervisor. Owned by the reader thread.
#[derive(Debug)]
pub(crate) struct Dialogs {
    open: Vec<OpenDialog>,
    /// Closed dialogs, newest last, at most `recent_max`.
    recent: VecDeque<Arc<ClosedDialog>>,
    /// The number of the last dialog (`d-N`); kept across reconnects.
    next_id: u64,
    /// `limits.pending_dialogs_max`.
    pending_max: usize,
    /// `limits.recent_dialogs_max`.
    recent_max: usize,
    /// A bridge request was refused for the pending-dialog cap and not yet logged.
    cap_logged: bool,
    /// The published `pending_dialogs`/`unanswerable` are out of date.
    open_changed: bool,
    /// The published `recent_dialogs` is out of date.
    recent_changed: bool,
}

impl Dialogs {
    /// No dialog yet.
    pub fn new(limits: &Limits) -> Dialogs {
        Dialogs {
            open: Vec::new(),
            recent: VecDeque::new(),
            next_id: 0,
            pending_max: limits.pending_dialogs_max,
            recent_max: limits.recent_dialogs_max,
            cap_logged: false,
            open_changed: true,
            recent_changed: true,
        }
    }

    /// The open dialogs, oldest first.
    pub fn open(&self) -> &[OpenDialog] {
        &self.open
    }

    /// Where open dialog `id` is in [`Dialogs::open`].
    pub fn position(&self, id: &str) -> Option<usize> {
        self.open.iter().position(|d| d.public.id == id)
    }

    /// Whether `limits.pending_dialogs_max` dialogs are open.
    pub fn at_cap(&self) -> bool {
        self.open.len() >= self.pending_max
    }

    /// A bridge request was refused for the cap: true the first time since the count was last
    /// under it (log it then).
    pub fn note_cap_refusal(&mut self) -> bool {
        !std::mem::replace(&mut self.cap_logged, true)
    }

    /// The id of the next dialog: `d-1`, `d-2`, ...
    pub fn next_id(&mut self) -> String {
        self.next_id += 1;
        format!("d-{}", self.next_id)
    }

    /// Records a dialog that opened; returns its position.
    pub fn push(&mut self, dialog: OpenDialog) -> usize {
        self.open.push(dialog);
        self.open_changed = true;
        self.open.len() - 1
    }

    /// Attaches an answer being written to the dialog it will land on: the one it names while
    /// that is open; for a native answer (on `session`) to a dialog already closed, the dialog
    /// that session shows now (`crate::core::dialogs`).
    pub fn track_answer(&mut self, flight: AnswerInFlight, native: bool, session: Option<&str>) {
        let pos = self.position(&flight.named).or_else(|| {
            let sid = session.filter(|_| native)?;
            self.open.iter().rposition(|d| {
                d.public.session_id == sid
                    && d.public.bridge_request_id.is_none()
                    && d.closed_event.is_none()
            })
        });
        if let Some(pos) = pos {
            self.open[pos].answers_in_flight.push(flight);
        }
    }

    /// The acknowledgement of answer `call_id` came: the dialog that held it, and what it said.
    pub fn take_answer(&mut self, call_id: u64) -> Option<(usize, Option<(bool, String)>)> {
        let pos = self
            .open
            .iter()
            .position(|d| d.answers_in_flight.iter().any(|a| a.call_id == call_id))?;
        let flights = &mut self.open[pos].answers_in_flight;
        let said = flights
            .iter()
            .position(|a| a.call_id == call_id)
            .map(|i| flights.remove(i).said);
        Some((pos, said))
    }

    /// The answers still on their way to the dialog at `pos`, taken away (they carry over to
    /// the dialog that follows it).
    pub fn take_answers(&mut self, pos: usize) -> Vec<AnswerInFlight> {
        std::mem::take(&mut self.open[pos].answers_in_flight)
    }

    /// `javascriptDialogClosed` came for the dialog at `pos` while an answer is on its way:
    /// no longer pending, and the acknowledgement decides who closed it.
    pub fn set_closed_event(&mut self, pos: usize, closed: (bool, String)) {
        self.open[pos].closed_event = Some(closed);
        self.open_changed = true;
    }

    /// The Closed event's account of the dialog at `pos`, taken to record it.
    pub fn take_closed_event(&mut self, pos: usize) -> Option<(bool, String)> {
        let closed = self.open[pos].closed_event.take();
        self.open_changed |= closed.is_some();
        closed
    }

    /// The dialog at `pos` can no longer be answered over CDP: out of `pending_dialogs`, into
    /// `unanswerable`.
    pub fn mark_unanswerable(&mut self, pos: usize) {
        self.open[pos].unanswerable = true;
        self.open_changed = true;
    }

    /// Whether any open dialog is unanswerable.
    pub fn any_unanswerable(&self) -> bool {
        self.open.iter().any(|d| d.unanswerable)
    }

    /// Records the dialog at `pos` as closed by `by` at `closed_at` (with the browser's account
    /// `closed`, when it gave one) in the recent ring. Returns whether CDP could no longer
    /// answer it.
    pub fn close(
        &mut self,
        pos: usize,
        by: ClosedBy,
        closed: Option<(bool, String)>,
        closed_at: f64,
    ) -> bool {
        let d = self.open.remove(pos);
        while self.recent.len() >= self.recent_max {
            self.recent.pop_front();
        }
        let (accepted, user_input) = match closed {
            Some((a, u)) => (Some(a), Some(u)),
            None => (None, None),
        };
        self.recent.push_back(Arc::new(ClosedDialog {
            dialog: d.public,
            closed_at,
            closed_by: by,
            accepted,
            user_input,
        }));
        if self.open.len() < self.pending_max {
            self.cap_logged = false;
        }
        self.open_changed = true;
        self.recent_changed = true;
        d.unanswerable
    }

    /// The latest closed record of dialog `id` still in the ring.
    pub fn recent(&self, id: &str) -> Option<&ClosedDialog> {
        self.recent
            .iter()
            .rev()
            .find(|c| c.dialog.id == id)
            .map(|c| &**c)
    }

    /// What changed since the last call, as published.
    pub fn take_published(&mut self) -> PublishedDialogs {
        PublishedDialogs {
            open: std::mem::take(&mut self.open_changed).then(|| self.published_open()),
            recent: std::mem::take(&mut self.recent_changed).then(|| self.published_recent()),
        }
    }

    /// `pending_dialogs` (shown, answerable, no Closed event yet) and `unanswerable`.
    pub fn published_open(&self) -> (DialogList, DialogList) {
        let pending = self.open.iter().filter(|d| d.is_pending());
        let unanswerable = self.open.iter().filter(|d| d.unanswerable);
        (
            pending.map(|d| d.public.clone()).collect(),
            unanswerable.map(|d| d.public.clone()).collect(),
        )
    }

    /// `recent_dialogs`, oldest first.
    pub fn published_recent(&self) -> Arc<[Arc<ClosedDialog>]> {
        self.recent.iter().cloned().collect()
    }
}

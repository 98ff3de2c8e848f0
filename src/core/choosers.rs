//! File choosers the task's pages open (issue 31): [`Choosers`] owns the pending ones and the
//! last refusal, and publishes them; `Page.fileChooserOpened` is decoded here.
//!
//! Every page, popup and OOPIF session intercepts its file choosers
//! (`Page.setInterceptFileChooserDialog`, in `core/session.rs`): without it, CDP says nothing of
//! a chooser (measured on Chromium 148: headless Chromium cancels it, and the page gets a
//! `cancel` event). With `security.allow_file_access` a chooser is pending until it is answered
//! with files (`DOM.setFileInputFiles` on the session it came from, by the supervisor, within
//! `security.upload_dirs`) or dismissed; without it the chooser is left unanswered (the page
//! gets no file) and the snapshot says a chooser was refused and which option allows it. A
//! chooser also goes when its frame gets a new document or goes away, or its session does.

use std::sync::Arc;

use log::{info, warn};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::Core;
use crate::clock::Now;
use crate::protocol;
use crate::snapshot::{ChooserMode, ChooserRefused, FileChooser};

/// The pending choosers and the last refusal.
#[derive(Debug)]
pub(crate) struct Choosers {
    pending: Vec<FileChooser>,
    refused: Option<ChooserRefused>,
    /// The next id's number (`fc-N`).
    next: u64,
    /// At most this many pending at once (`limits.pending_dialogs_max`).
    max: usize,
    /// Whether choosers are answerable (`security.allow_file_access`).
    answerable: bool,
    changed: bool,
}

/// `Page.fileChooserOpened`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Opened {
    frame_id: Option<String>,
    mode: String,
    backend_node_id: Option<i64>,
}

impl Choosers {
    /// None pending; `answerable` is `security.allow_file_access`.
    pub fn new(max: usize, answerable: bool) -> Choosers {
        Choosers {
            pending: Vec::new(),
            refused: None,
            next: 1,
            max,
            answerable,
            changed: true,
        }
    }

    /// Sets whether choosers are answerable (`security.allow_file_access`).
    pub fn set_answerable(&mut self, answerable: bool) {
        self.answerable = answerable;
    }

    /// When it changed: the pending choosers and the last refusal, as published.
    pub fn take_published(&mut self) -> Option<(Arc<[FileChooser]>, Option<ChooserRefused>)> {
        std::mem::take(&mut self.changed)
            .then(|| (self.pending.iter().cloned().collect(), self.refused.clone()))
    }

    /// Drops the pending choosers `gone` says are gone; returns whether any was.
    fn remove_where(&mut self, gone: impl Fn(&FileChooser) -> bool) -> bool {
        let before = self.pending.len();
        self.pending.retain(|c| !gone(c));
        let removed = self.pending.len() != before;
        self.changed |= removed;
        removed
    }

    /// Every pending chooser is gone (a new connection).
    pub fn clear(&mut self) {
        self.remove_where(|_| true);
    }
}

impl Core {
    /// `Page.fileChooserOpened` on a tracked document session.
    pub(super) fn file_chooser_opened(
        &mut self,
        session: &str,
        params: Option<&RawValue>,
        now: Now,
    ) {
        let kind = self.sessions.get(session).map(|s| s.kind);
        if !kind.is_some_and(|k| k.shows_documents()) {
            return;
        }
        let Some(ev) = protocol::decode::<Opened>(params) else {
            return;
        };
        let mode = ChooserMode::from_cdp(&ev.mode);
        let c = &mut self.choosers;
        let Some(node) = ev.backend_node_id.filter(|_| c.answerable) else {
            let count = c.refused.as_ref().map_or(0, |r| r.count) + 1;
            warn!(
                "task {}: the page opened a file chooser; it stays unanswered (set {} = true to \
                 let the agent answer it with files)",
                self.task_id,
                ChooserRefused::OPTION
            );
            c.refused = Some(ChooserRefused {
                frame_id: ev.frame_id,
                mode,
                at: now.epoch,
                count,
            });
            c.changed = true;
            return;
        };
        if c.pending.len() >= c.max {
            warn!(
                "task {}: a file chooser past the cap of {} pending is left unanswered",
                self.task_id, c.max
            );
            return;
        }
        let id = format!("fc-{}", c.next);
        c.next += 1;
        info!(
            "task {}: file chooser {id} ({}) is pending",
            self.task_id,
            mode.as_str()
        );
        let target_id = self
            .page_of_session(session)
            .map(str::to_string)
            .unwrap_or_default();
        let c = &mut self.choosers;
        c.pending.push(FileChooser {
            id,
            frame_id: ev.frame_id,
            mode,
            backend_node_id: node,
            opened_at: now.epoch,
            target_id,
            session_id: session.to_string(),
        });
        c.changed = true;
    }

    /// Chooser `id` was answered or dismissed: it is no longer pending.
    pub(super) fn file_chooser_done(&mut self, id: &str) {
        self.choosers.remove_where(|c| c.id == id);
    }

    /// Frame `frame_id` got a new document or went away: its choosers went with it.
    pub(super) fn file_choosers_of_frame_gone(&mut self, frame_id: &str) {
        self.choosers
            .remove_where(|c| c.frame_id.as_deref() == Some(frame_id));
    }

    /// Sessions `gone` went away: their choosers went with them.
    pub(super) fn file_choosers_of_sessions_gone(&mut self, gone: &[String]) {
        self.choosers.remove_where(|c| gone.contains(&c.session_id));
    }
}

//! The `with_*` setters of [`Limits`] (the `[limits]` section).

use super::Limits;

impl Limits {
    /// Sets [`frame_tree_max_entries`](Limits::frame_tree_max_entries).
    pub fn with_frame_tree_max_entries(mut self, n: usize) -> Limits {
        self.frame_tree_max_entries = n;
        self
    }

    /// Sets [`frame_tree_max_oopif_depth`](Limits::frame_tree_max_oopif_depth).
    pub fn with_frame_tree_max_oopif_depth(mut self, n: usize) -> Limits {
        self.frame_tree_max_oopif_depth = n;
        self
    }

    /// Sets [`recent_dialogs_max`](Limits::recent_dialogs_max).
    pub fn with_recent_dialogs_max(mut self, n: usize) -> Limits {
        self.recent_dialogs_max = n;
        self
    }

    /// Sets [`console_errors_max`](Limits::console_errors_max).
    pub fn with_console_errors_max(mut self, n: usize) -> Limits {
        self.console_errors_max = n;
        self
    }

    /// Sets [`max_message_bytes`](Limits::max_message_bytes).
    pub fn with_max_message_bytes(mut self, n: usize) -> Limits {
        self.max_message_bytes = n;
        self
    }

    /// Sets [`frames_max`](Limits::frames_max).
    pub fn with_frames_max(mut self, n: usize) -> Limits {
        self.frames_max = n;
        self
    }

    /// Sets [`pending_dialogs_max`](Limits::pending_dialogs_max).
    pub fn with_pending_dialogs_max(mut self, n: usize) -> Limits {
        self.pending_dialogs_max = n;
        self
    }

    /// Sets [`pages_max`](Limits::pages_max).
    pub fn with_pages_max(mut self, n: usize) -> Limits {
        self.pages_max = n;
        self
    }

    /// Sets [`watched_pages_max`](Limits::watched_pages_max).
    pub fn with_watched_pages_max(mut self, n: usize) -> Limits {
        self.watched_pages_max = n;
        self
    }
}

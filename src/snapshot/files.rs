//! What the snapshot says about files crossing between the page and the local machine
//! (issue 31): the task's downloads, the file choosers its pages open, and the last chooser the
//! security policy refused. Their JSON is in `snapshot/json.rs`.

use std::path::PathBuf;

/// Where a download is (CDP's `Browser.downloadProgress` states).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DownloadState {
    /// Bytes are still arriving.
    InProgress,
    /// Done: the file is at [`Download::path`].
    Completed,
    /// Cancelled or failed (the browser reports an interrupted download as cancelled).
    Canceled,
}

impl DownloadState {
    /// `in_progress`, `completed` or `canceled` (SPEC §10).
    pub fn as_str(self) -> &'static str {
        match self {
            DownloadState::InProgress => "in_progress",
            DownloadState::Completed => "completed",
            DownloadState::Canceled => "canceled",
        }
    }

    /// `Completed` or `Canceled`.
    pub fn is_final(self) -> bool {
        self != DownloadState::InProgress
    }
}

impl std::fmt::Display for DownloadState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One download of the task's pages (newest last in [`crate::Snapshot::downloads`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Download {
    /// The browser's id for it.
    pub guid: String,
    /// Where it comes from.
    pub url: String,
    /// The file name the page (or the server) suggested.
    pub suggested_filename: String,
    /// In progress, completed or cancelled.
    pub state: DownloadState,
    /// Bytes received so far.
    pub received_bytes: u64,
    /// The size, when the server said it.
    pub total_bytes: Option<u64>,
    /// Once completed: the file, in the task's download directory (`[downloads] dir`), named
    /// after the suggested file name (made unique).
    pub path: Option<PathBuf>,
    /// The frame that started it, when known.
    pub frame_id: Option<String>,
    /// Unix epoch seconds.
    pub started_at: f64,
    /// Unix epoch seconds, once completed or cancelled.
    pub ended_at: Option<f64>,
}

/// Whether a file chooser takes one file or several (`Page.fileChooserOpened`'s `mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChooserMode {
    /// `<input type=file>`: exactly one file.
    Single,
    /// `<input type=file multiple>`: one file or more.
    Multiple,
}

impl ChooserMode {
    /// `single` or `multiple`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChooserMode::Single => "single",
            ChooserMode::Multiple => "multiple",
        }
    }

    /// Reads CDP's `selectSingle` / `selectMultiple` (anything else: single).
    pub(crate) fn from_cdp(mode: &str) -> ChooserMode {
        if mode == "selectMultiple" {
            ChooserMode::Multiple
        } else {
            ChooserMode::Single
        }
    }
}

/// A file chooser a page opened, waiting for files (with `security.allow_file_access`). The
/// JSON lists it among `pending_dialogs` with `type: "file_chooser"`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct FileChooser {
    /// `fc-1`, `fc-2`, ... per supervisor.
    pub id: String,
    /// The frame of the file input.
    pub frame_id: Option<String>,
    /// One file or several.
    pub mode: ChooserMode,
    /// The `<input type=file>` element (`DOM.BackendNodeId`).
    pub backend_node_id: i64,
    /// Unix epoch seconds.
    pub opened_at: f64,
    /// The page (the task's, or a popup it follows) whose frame opened it.
    pub target_id: String,
    /// The session it arrived on, where its answer goes (not in the JSON).
    pub(crate) session_id: String,
}

/// The last file chooser the security policy kept from the agent (without
/// `security.allow_file_access`): it was not answered, and the page got no file.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ChooserRefused {
    /// The frame of the file input.
    pub frame_id: Option<String>,
    /// One file or several.
    pub mode: ChooserMode,
    /// Unix epoch seconds.
    pub at: f64,
    /// How many choosers were refused so far.
    pub count: u64,
}

impl ChooserRefused {
    /// The option that would let the agent answer.
    pub const OPTION: &'static str = "security.allow_file_access";
}

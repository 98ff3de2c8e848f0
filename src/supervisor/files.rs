//! Files between the page and the machine (issue 31): waiting for a download of the task's, and
//! answering the file choosers its pages open. The state is the published snapshot's
//! (`core/downloads.rs`, `core/choosers.rs`); this is the caller's side.

use crate::sync;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use super::Supervisor;
use crate::core::{CallKind, Command, FilesSettings};
use crate::deadline::Deadline;
use crate::error::Error;
use crate::outbound::Outbound;
use crate::quote::quoted;
use crate::snapshot::{ChooserMode, ChooserRefused, Download, FileChooser, Snapshot};

/// How long [`Supervisor::wait_for_download`] waits for a download to begin when none is under
/// way (a click's download may be announced a moment after the click returns).
pub const DOWNLOAD_BEGIN_GRACE: Duration = Duration::from_secs(2);

impl Supervisor {
    /// The task's download directory (under `[downloads] dir`), where completed downloads are;
    /// the browser makes it when the first download lands there.
    pub fn download_dir(&self) -> Option<&std::path::Path> {
        self.download_dir.as_deref()
    }

    /// Waits for the next download of the task's that no earlier call returned: one under way
    /// or finished already, or, when there is none, one that begins within
    /// [`DOWNLOAD_BEGIN_GRACE`] (or `timeout`, if shorter); then until it ends, within
    /// `timeout` in all. Returns it once completed or cancelled (its `state` says which; a
    /// completed one's `path` is in the task's download directory). None began:
    /// [`Error::NoDownload`]; it did not end in time: [`Error::Timeout`].
    pub fn wait_for_download(&self, timeout: Duration) -> Result<Download, Error> {
        self.ensure_alive()?;
        let deadline = Deadline::after(timeout);
        let grace = deadline.earliest(Deadline::after(DOWNLOAD_BEGIN_GRACE));
        let taken = sync::lock(&self.downloads_taken).clone();
        let next = |s: &Snapshot| {
            s.downloads
                .iter()
                .find(|d| !taken.contains(&d.guid))
                .map(|d| d.guid.clone())
        };
        let Some(guid) = self
            .shared
            .wait_for(grace, |s| next(s).is_some())
            .and_then(|s| next(&s))
        else {
            self.ensure_alive()?;
            return Err(Error::NoDownload {
                waited: grace.budget(),
            });
        };
        let ended = |s: &Snapshot| {
            s.downloads
                .iter()
                .find(|d| d.guid == guid && d.state.is_final())
                .map(|d| Download::clone(d))
        };
        let Some(download) = self
            .shared
            .wait_for(deadline, |s| ended(s).is_some())
            .and_then(|s| ended(&s))
        else {
            self.ensure_alive()?;
            return Err(Error::Timeout {
                method: format!("download {guid}"),
                after: deadline.budget(),
            });
        };
        sync::lock(&self.downloads_taken).insert(guid);
        Ok(download)
    }

    /// Answers a pending file chooser with `files` (SPEC §10): `chooser_id` may be left out when
    /// one is pending. Needs `security.allow_file_access` ([`Error::Refused`] naming it); each
    /// file's real path (symlinks resolved) must be inside `security.upload_dirs`
    /// ([`Error::Refused`] naming that option and the file); a single-file chooser takes one.
    /// The page's input then holds the files (`DOM.setFileInputFiles`) and fires its `change`.
    pub fn respond_to_file_chooser(
        &self,
        files: &[PathBuf],
        chooser_id: Option<&str>,
    ) -> Result<FileChooser, Error> {
        self.ensure_alive()?;
        if !self.config.security.allow_file_access {
            return Err(Error::Refused {
                method: "DOM.setFileInputFiles".into(),
                option: ChooserRefused::OPTION.into(),
                detail: format!(
                    "answering a file chooser hands local files to the page; set {} = true \
                     (and list the allowed directories in security.upload_dirs) to allow it",
                    ChooserRefused::OPTION
                ),
            });
        }
        let snap = self.snapshot();
        let chooser = pick(&snap, chooser_id)?.clone();
        let files = crate::local_files::upload_files(files, &self.config.security.upload_dirs)?;
        if chooser.mode == ChooserMode::Single && files.len() > 1 {
            return Err(Error::InvalidArgument(format!(
                "file chooser {} takes one file, not {}",
                chooser.id,
                files.len()
            )));
        }
        let paths: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        let cmd = Command::new(
            "DOM.setFileInputFiles",
            json!({"files": paths, "backendNodeId": chooser.backend_node_id}),
        )
        .on(chooser.session_id.as_str())
        .kind(CallKind::ChooserDone {
            id: chooser.id.clone(),
        });
        self.shared
            .round_trip(cmd, Deadline::after(self.config.call_timeout))?;
        Ok(chooser)
    }

    /// Dismisses a pending file chooser: the page gets no file, and it is no longer pending.
    pub fn dismiss_file_chooser(&self, chooser_id: Option<&str>) -> Result<FileChooser, Error> {
        self.ensure_alive()?;
        let snap = self.snapshot();
        let chooser = pick(&snap, chooser_id)?.clone();
        // The reader drops it when this round trip is answered (it owns the state).
        let cmd = Command::new("Browser.getVersion", json!({})).kind(CallKind::ChooserDone {
            id: chooser.id.clone(),
        });
        self.shared
            .round_trip(cmd, Deadline::after(self.config.call_timeout))?;
        Ok(chooser)
    }
}

/// The task's download directory (named now; the browser makes it with the first download),
/// and what its core does with files: the supervisor's own `Browser.setDownloadBehavior` that
/// points the browser there (the security policy's download-path rule lets a task's own
/// directory through, for raw calls too: `security::check_for_task`; like every command of the
/// supervisor's own, it is not subject to `cdp_deny`/`cdp_allow`), and whether file choosers
/// wait for the agent (`security.allow_file_access`).
pub(super) fn files_settings(
    task_id: &str,
    config: &crate::config::Config,
) -> (Option<std::path::PathBuf>, FilesSettings) {
    let dir = crate::local_files::task_dir(&config.downloads, task_id);
    let params = json!({
        "behavior": "allowAndName",
        "downloadPath": dir.display().to_string(),
        "eventsEnabled": true,
    });
    let files = FilesSettings {
        download_dir: Some(dir.clone()),
        download_behavior: Some(params),
        answer_file_choosers: config.security.allow_file_access,
    };
    (Some(dir), files)
}

/// The pending chooser `id` names, or the only one.
fn pick<'a>(snap: &'a Snapshot, id: Option<&str>) -> Result<&'a FileChooser, Error> {
    let pending = &snap.file_choosers;
    let known = || {
        pending
            .iter()
            .map(|c| c.id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match id {
        Some(id) => pending
            .iter()
            .find(|c| c.id == id)
            .ok_or_else(|| Error::UnknownDialog {
                id: id.to_string(),
                known: known(),
            }),
        None => match pending.len() {
            0 => Err(Error::InvalidArgument(match &snap.file_chooser_refused {
                Some(_) => format!(
                    "no file chooser is pending: the page's chooser was refused (set {} = true)",
                    ChooserRefused::OPTION
                ),
                None => "no file chooser is pending".to_string(),
            })),
            1 => Ok(&pending[0]),
            n => Err(Error::AmbiguousDialog {
                count: n,
                pending: pending
                    .iter()
                    .map(|c| format!("{} (file_chooser: {})", c.id, quoted(c.mode.as_str())))
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        },
    }
}

//! The task's downloads (issue 31): [`Downloads`] owns the list and publishes it; the events
//! that feed it are decoded here.
//!
//! Which downloads are the task's: one whose `Page.downloadWillBegin` arrives on a session the
//! task tracks, or whose `Browser.downloadWillBegin` names a frame of the task's. Chromium sends
//! the `Browser.*` events to every connection that turned them on (`eventsEnabled`), for every
//! download of the browser; only the guids the task owns are followed.
//!
//! Where the file goes. `Browser.setDownloadBehavior` is one setting per browser context, not
//! per page: the last client to set it decides the directory of every download in that context
//! (measured on Chromium 148: task A's download landed in task B's directory when B set its
//! behaviour after A). So every task asks for `allowAndName` (the file is written under its guid)
//! into its own directory, and when one of its downloads completes, wherever Chromium put it
//! (`Browser.downloadProgress`'s `filePath`), the file is moved into the task's directory under
//! its suggested name, made unique among the task's files. The move is an
//! [`Outgoing::MoveDownload`] that the reader carries out (a rename) before it publishes, and it
//! tells the core when the rename failed ([`Core::download_move_failed`]): the file then stays
//! where Chromium wrote it, and that is the path published.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use log::{info, warn};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::{Core, MAX_TEXT, Outgoing, clip};
use crate::clock::Now;
use crate::protocol;
use crate::snapshot::{Download, DownloadState};

/// What a task does with files (issue 31), set once after [`Core::new`] by
/// [`Core::set_files`]; the default: no download directory, choosers not answerable.
#[derive(Debug, Clone, Default)]
pub struct FilesSettings {
    /// The task's download directory, where completed downloads are moved.
    pub download_dir: Option<PathBuf>,
    /// The params of the `Browser.setDownloadBehavior` sent whenever the page is attached
    /// (already judged by the security policy).
    pub download_behavior: Option<Value>,
    /// `security.allow_file_access`: file choosers wait for the agent's files.
    pub answer_file_choosers: bool,
}

/// Downloads kept in the list; past it the oldest finished one goes.
pub(crate) const DOWNLOADS_MAX: usize = 100;

/// The longest file name (in bytes) a download is given in the task's directory.
const NAME_MAX: usize = 200;

/// The list, oldest first. Each entry is shared between snapshots.
#[derive(Debug)]
pub(crate) struct Downloads {
    list: Vec<Arc<Download>>,
    /// The task's download directory (`None`: downloads are not set up for this task).
    dir: Option<PathBuf>,
    /// The names given to files in `dir` so far.
    names: HashSet<String>,
    /// The published list is out of date.
    changed: bool,
}

/// `Page/Browser.downloadWillBegin`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct WillBegin {
    frame_id: Option<String>,
    guid: String,
    url: String,
    suggested_filename: String,
}

/// `Page/Browser.downloadProgress`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Progress {
    guid: String,
    total_bytes: f64,
    received_bytes: f64,
    state: String,
    file_path: Option<String>,
}

impl Downloads {
    /// No download yet; files go to `dir`.
    pub fn new(dir: Option<PathBuf>) -> Downloads {
        Downloads {
            list: Vec::new(),
            dir,
            names: HashSet::new(),
            changed: true,
        }
    }

    /// When it changed: the list as published.
    pub fn take_published(&mut self) -> Option<Arc<[Arc<Download>]>> {
        std::mem::take(&mut self.changed).then(|| self.list.iter().cloned().collect())
    }

    fn position(&self, guid: &str) -> Option<usize> {
        self.list.iter().position(|d| d.guid == guid)
    }

    fn push(&mut self, d: Download) {
        if self.list.len() >= DOWNLOADS_MAX {
            let drop_at = self
                .list
                .iter()
                .position(|d| d.state.is_final())
                .unwrap_or(0);
            self.list.remove(drop_at);
        }
        self.list.push(Arc::new(d));
        self.changed = true;
    }

    fn update(&mut self, pos: usize, f: impl FnOnce(&mut Download)) {
        let mut d = Download::clone(&self.list[pos]);
        f(&mut d);
        if d != *self.list[pos] {
            self.list[pos] = Arc::new(d);
            self.changed = true;
        }
    }

    /// A file name for `suggested` in the task's directory, unique among the names given.
    fn unique_name(&mut self, suggested: &str, guid: &str) -> String {
        let base = safe_file_name(suggested).unwrap_or_else(|| safe_name_or(guid));
        let (stem, ext) = match base.rfind('.') {
            Some(i) if i > 0 => (&base[..i], &base[i..]),
            _ => (base.as_str(), ""),
        };
        let mut name = base.clone();
        let mut n = 1;
        while self.names.contains(&name) {
            name = format!("{stem} ({n}){ext}");
            n += 1;
        }
        self.names.insert(name.clone());
        name
    }
}

impl Core {
    /// Sets what the task does with files (issue 31): where its downloads go, and whether file
    /// choosers wait for its files. Called once, before the first message.
    pub fn set_files(&mut self, files: FilesSettings) {
        self.downloads = Downloads::new(files.download_dir);
        self.download_behavior = files.download_behavior;
        self.choosers.set_answerable(files.answer_file_choosers);
    }

    /// Brings the published downloads and file choosers up to date; whether they changed.
    pub(super) fn refresh_files(&mut self) -> bool {
        let mut changed = false;
        if let Some(downloads) = self.downloads.take_published() {
            self.published.downloads = downloads;
            changed = true;
        }
        if let Some((pending, refused)) = self.choosers.take_published() {
            self.published.file_choosers = pending;
            self.published.file_chooser_refused = refused;
            changed = true;
        }
        changed
    }

    /// `Page.downloadWillBegin` on `session`, or `Browser.downloadWillBegin` (no session): a
    /// download of the task's when it arrives on a tracked session or names a frame of the
    /// task's.
    pub(super) fn download_will_begin(
        &mut self,
        session: Option<&str>,
        params: Option<&RawValue>,
        now: Now,
    ) {
        let Some(ev) = protocol::decode::<WillBegin>(params) else {
            return;
        };
        let ours = match session {
            Some(s) => self.sessions.contains(s),
            None => ev
                .frame_id
                .as_deref()
                .is_some_and(|f| self.frames.owner_of(f).is_some()),
        };
        if !ours || ev.guid.is_empty() || self.downloads.position(&ev.guid).is_some() {
            return;
        }
        info!(
            "task {}: download {} of {} began",
            self.task_id,
            ev.guid,
            crate::quote::quoted(&ev.suggested_filename)
        );
        self.downloads.push(Download {
            guid: clip(ev.guid, MAX_TEXT),
            url: clip(ev.url, MAX_TEXT),
            suggested_filename: clip(ev.suggested_filename, MAX_TEXT),
            state: DownloadState::InProgress,
            received_bytes: 0,
            total_bytes: None,
            path: None,
            frame_id: ev.frame_id,
            started_at: now.epoch,
            ended_at: None,
        });
    }

    /// `Page.downloadProgress` or `Browser.downloadProgress` for a download of the task's. The
    /// file is moved into the task's directory once the browser-level event says where it is.
    pub(super) fn download_progress(&mut self, params: Option<&RawValue>, now: Now) {
        let Some(ev) = protocol::decode::<Progress>(params) else {
            return;
        };
        let Some(pos) = self.downloads.position(&ev.guid) else {
            return;
        };
        if self.downloads.list[pos].state.is_final() {
            return;
        }
        let total = (ev.total_bytes > 0.0).then_some(ev.total_bytes as u64);
        let received = ev.received_bytes.max(0.0) as u64;
        match ev.state.as_str() {
            "canceled" => {
                info!("task {}: download {} was canceled", self.task_id, ev.guid);
                self.downloads.update(pos, |d| {
                    d.state = DownloadState::Canceled;
                    d.received_bytes = received;
                    d.total_bytes = total.or(d.total_bytes);
                    d.ended_at = Some(now.epoch);
                });
            }
            // Only the browser-level event says where the file is (`filePath`).
            "completed" if ev.file_path.is_some() => {
                let from = PathBuf::from(ev.file_path.unwrap_or_default());
                let suggested = self.downloads.list[pos].suggested_filename.clone();
                let to = match self.downloads.dir.clone() {
                    Some(dir) => dir.join(self.downloads.unique_name(&suggested, &ev.guid)),
                    None => from.clone(),
                };
                if to != from {
                    self.out.push(Outgoing::MoveDownload {
                        guid: ev.guid.clone(),
                        from: from.clone(),
                        to: to.clone(),
                    });
                }
                info!(
                    "task {}: download {} completed: {}",
                    self.task_id,
                    ev.guid,
                    to.display()
                );
                self.downloads.update(pos, |d| {
                    d.state = DownloadState::Completed;
                    d.received_bytes = received;
                    d.total_bytes = total.or(d.total_bytes).or(Some(received));
                    d.path = Some(to);
                    d.ended_at = Some(now.epoch);
                });
            }
            _ => self.downloads.update(pos, |d| {
                d.received_bytes = received;
                d.total_bytes = total.or(d.total_bytes);
            }),
        }
    }

    /// The reader could not move download `guid`'s file into the task's directory: it stays at
    /// `from`, where the browser wrote it, which is the path published.
    pub fn download_move_failed(&mut self, guid: &str, from: &Path, why: &str) {
        warn!(
            "task {}: download {guid} stays at {} (moving it into the task's download \
             directory failed: {why})",
            self.task_id,
            from.display()
        );
        if let Some(pos) = self.downloads.position(guid) {
            let from = from.to_path_buf();
            self.downloads.update(pos, |d| d.path = Some(from));
        }
    }
}

/// `suggested` as a file name that stays inside a directory: no separators, no control
/// characters, not `.`/`..`, not hidden, at most [`NAME_MAX`] bytes; `None` when nothing is left.
pub(crate) fn safe_file_name(suggested: &str) -> Option<String> {
    let last = suggested.rsplit(['/', '\\']).next().unwrap_or("");
    let cleaned: String = last
        .chars()
        .map(|c| if c.is_control() || c == ':' { '_' } else { c })
        .collect();
    let cleaned = cleaned.trim().trim_start_matches('.').trim().to_string();
    if cleaned.is_empty() {
        return None;
    }
    let mut cut = cleaned.len().min(NAME_MAX);
    while !cleaned.is_char_boundary(cut) {
        cut -= 1;
    }
    Some(cleaned[..cut].to_string())
}

fn safe_name_or(guid: &str) -> String {
    safe_file_name(guid).unwrap_or_else(|| "download".into())
}

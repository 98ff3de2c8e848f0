//! The published state: an immutable [`Snapshot`] that the reader thread builds and any thread
//! reads wait-free through arc-swap. Its JSON form (SPEC §10) is `snapshot/json.rs`.
//!
//! Every collection is behind its own `Arc`, so publishing a new snapshot after one kind of change
//! (say, a console error) shares the untouched parts with the previous snapshot instead of copying
//! them.

use std::collections::HashMap;
use std::sync::Arc;

mod files;
mod json;

pub use files::{ChooserMode, ChooserRefused, Download, DownloadState, FileChooser};

/// Who closed a dialog (SPEC §5). Exactly one per dialog, decided by the reader thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClosedBy {
    /// The caller's answer was delivered.
    Agent,
    /// `auto_dismiss` / `auto_accept`.
    AutoPolicy,
    /// The `must_respond` time-out.
    Watchdog,
    /// Anything else: the browser, a proxy, another CDP client, a navigation.
    Remote,
    /// The connection dropped while it was pending. If the browser still shows it after the
    /// reconnect, the page is reported through `blocked` (SPEC §4.5).
    ConnectionLost,
    /// A client of the task's CDP endpoint answered it (`Page.handleJavaScriptDialog` sent
    /// through the endpoint, SPEC §18).
    Client,
    /// A person answered it ([`Supervisor::respond_as_human`](crate::Supervisor::respond_as_human):
    /// the supervisor page, SPEC §20).
    Human,
}

impl ClosedBy {
    /// `agent`, `auto_policy`, `watchdog`, `remote`, `connection_lost`, `client` or `human`.
    pub fn as_str(self) -> &'static str {
        match self {
            ClosedBy::Agent => "agent",
            ClosedBy::AutoPolicy => "auto_policy",
            ClosedBy::Watchdog => "watchdog",
            ClosedBy::Remote => "remote",
            ClosedBy::ConnectionLost => "connection_lost",
            ClosedBy::Client => "client",
            ClosedBy::Human => "human",
        }
    }
}

/// What kind of dialog the page opened (CDP's `type`). Parsed leniently: a kind this crate does
/// not know is kept as [`DialogKind::Other`] with the browser's word.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DialogKind {
    /// `alert`.
    Alert,
    /// `confirm`.
    Confirm,
    /// `prompt`.
    Prompt,
    /// `beforeunload`.
    BeforeUnload,
    /// Any other `type` the browser sends, as sent.
    Other(String),
}

impl DialogKind {
    /// `alert`, `confirm`, `prompt`, `beforeunload`, or the browser's word.
    pub fn as_str(&self) -> &str {
        match self {
            DialogKind::Alert => "alert",
            DialogKind::Confirm => "confirm",
            DialogKind::Prompt => "prompt",
            DialogKind::BeforeUnload => "beforeunload",
            DialogKind::Other(s) => s,
        }
    }
}

impl From<String> for DialogKind {
    fn from(s: String) -> DialogKind {
        match s.as_str() {
            "alert" => DialogKind::Alert,
            "confirm" => DialogKind::Confirm,
            "prompt" => DialogKind::Prompt,
            "beforeunload" => DialogKind::BeforeUnload,
            _ => DialogKind::Other(s),
        }
    }
}

impl From<&str> for DialogKind {
    fn from(s: &str) -> DialogKind {
        DialogKind::from(s.to_string())
    }
}

impl std::fmt::Display for DialogKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for DialogKind {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for DialogKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for DialogKind {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

/// Why the page (or one of its frames) cannot be used: `blocked.reason` (SPEC §4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BlockedReason {
    /// A probe proved a dialog that no live CDP client owns.
    OrphanedDialog,
    /// The page does not answer CDP: a busy script, or such a dialog; the probe could not tell.
    Unresponsive,
    /// A dialog the browser no longer lets CDP answer (SPEC §11).
    UnanswerableDialog,
    /// A dialog in a page the supervisor does not watch (a popup past `limits.pages_max` +
    /// `limits.watched_pages_max`) freezes the renderer it shares with the task's pages (SPEC
    /// §8 "No silent wedge"): `target_ids` lists the candidates to close.
    DialogInUnfollowedPage,
}

impl BlockedReason {
    /// `orphaned_dialog`, `unresponsive`, `unanswerable_dialog` or
    /// `dialog_in_unfollowed_page`.
    pub fn as_str(self) -> &'static str {
        match self {
            BlockedReason::OrphanedDialog => "orphaned_dialog",
            BlockedReason::Unresponsive => "unresponsive",
            BlockedReason::UnanswerableDialog => "unanswerable_dialog",
            BlockedReason::DialogInUnfollowedPage => "dialog_in_unfollowed_page",
        }
    }
}

impl std::fmt::Display for BlockedReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for BlockedReason {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// Where a supervisor is in its life: the snapshot's `state` (SPEC §10). One enum, written only
/// by the reader thread, instead of flags that could disagree.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SupervisorState {
    /// Connected and attached to its page.
    Active,
    /// The connection dropped: reconnect attempt `attempt` of `of` is under way (waiting out
    /// its back-off, connecting, or re-attaching to the page). Calls fail at once meanwhile.
    Reconnecting {
        /// 1-based.
        attempt: u32,
        /// `supervisor.reconnect_attempts`.
        of: u32,
    },
    /// Stopped on purpose (`stop`, a rebind, shutdown).
    Stopped,
    /// Ended by itself and will not come back; the registry replaces it on the next start.
    Dead {
        /// Why, for a person: the reconnect budget is spent, the page is gone, ...
        reason: String,
    },
}

impl SupervisorState {
    /// `active`, `reconnecting`, `stopped` or `dead`.
    pub fn as_str(&self) -> &'static str {
        match self {
            SupervisorState::Active => "active",
            SupervisorState::Reconnecting { .. } => "reconnecting",
            SupervisorState::Stopped => "stopped",
            SupervisorState::Dead { .. } => "dead",
        }
    }

    /// `Stopped` or `Dead`: the reader's last publish; nothing is published after it.
    pub(crate) fn is_final(&self) -> bool {
        matches!(
            self,
            SupervisorState::Stopped | SupervisorState::Dead { .. }
        )
    }
}

impl std::fmt::Display for ClosedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A dialog waiting for an answer.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PendingDialog {
    /// `d-1`, `d-2`, ... per supervisor.
    pub id: String,
    /// `alert`, `confirm`, `prompt` or `beforeunload`.
    pub kind: DialogKind,
    /// The dialog's text.
    pub message: String,
    /// The prompt's default text (empty for other kinds).
    pub default_prompt: String,
    /// Unix epoch seconds.
    pub opened_at: f64,
    /// The frame that raised it, when known.
    pub frame_id: Option<String>,
    /// URL of the frame that raised it.
    pub url: String,
    /// Security origin of the frame that raised it, from the frame map when the dialog opened
    /// (empty when unknown), so an agent can tell the page's own prompt from an embedded
    /// ad's (SPEC §10).
    pub origin: String,
    /// The page target (the task's page, or a popup it follows) whose frame raised it.
    pub target_id: String,
    /// The CDP session the dialog arrived on, where its answer must go (not in the JSON).
    pub(crate) session_id: String,
    /// For a bridge dialog (SPEC §6): the paused request to fulfil (not in the JSON).
    pub(crate) bridge_request_id: Option<String>,
}

/// A dialog that has closed, as kept in `recent_dialogs`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ClosedDialog {
    /// The dialog as it was pending.
    pub dialog: PendingDialog,
    /// Unix epoch seconds.
    pub closed_at: f64,
    /// Who closed it.
    pub closed_by: ClosedBy,
    /// Whether it was accepted, when the browser said so.
    pub accepted: Option<bool>,
    /// What a prompt returned, when the browser said so.
    pub user_input: Option<String>,
}

/// One frame as the supervisor knows it (the full map, for routing).
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct FrameRecord {
    /// Frame id (an OOPIF's equals its target id).
    pub frame_id: String,
    /// Parent frame (none for the main frame).
    pub parent_frame_id: Option<String>,
    /// URL.
    pub url: String,
    /// Security origin (`null` for opaque origins).
    pub origin: String,
    /// Frame name attribute.
    pub name: Option<String>,
    /// True when the frame runs in its own process with its own session.
    pub is_oopif: bool,
    /// The OOPIF's own session (only set on OOPIFs).
    pub session_id: Option<String>,
    /// The session that owns the frame's document (its own for an OOPIF, the parent's otherwise).
    pub(crate) owner_session: String,
    /// The frame's default execution context on `owner_session`, when known.
    pub(crate) default_context: Option<i64>,
    /// The number of the document the frame shows (a new one per navigation; see
    /// `core/frames.rs`): a context found for an older document is not this one's.
    pub(crate) document: u64,
    /// The renderer that owns the frame's document crashed (`Inspector.targetCrashed`); calls
    /// into the frame fail at once until a navigation or reload brings a new document.
    pub crashed: bool,
}

/// One entry of `frame_tree` (what the snapshot shows).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct FrameEntry {
    /// Frame id.
    pub frame_id: String,
    /// URL.
    pub url: String,
    /// Origin.
    pub origin: String,
    /// Out-of-process iframe?
    pub is_oopif: bool,
    /// OOPIF session.
    pub session_id: Option<String>,
    /// Parent frame.
    pub parent_frame_id: Option<String>,
    /// Name attribute.
    pub name: Option<String>,
    /// Its renderer crashed (shown as `"crashed": true`, only when true).
    pub crashed: bool,
}

impl FrameEntry {
    /// A frame of the full map ([`Snapshot::frames`]) as `frame_tree` shows it (an empty name
    /// is none).
    pub fn from_record(r: &FrameRecord) -> FrameEntry {
        FrameEntry {
            frame_id: r.frame_id.clone(),
            url: r.url.clone(),
            origin: r.origin.clone(),
            is_oopif: r.is_oopif,
            session_id: r.session_id.clone(),
            parent_frame_id: r.parent_frame_id.clone(),
            name: r.name.clone().filter(|n| !n.is_empty()),
            crashed: r.crashed,
        }
    }
}

/// `frame_tree` of the snapshot (SPEC §7).
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct FrameTree {
    /// The page's main frame (none before the first frame tree arrives).
    pub top: Option<FrameEntry>,
    /// Other frames, breadth-first, capped.
    pub children: Vec<FrameEntry>,
    /// True when frames were left out.
    pub truncated: bool,
}

/// One console error/warning or uncaught exception (SPEC §13).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ConsoleEntry {
    /// Unix epoch seconds.
    pub ts: f64,
    /// `error`, `assert`, `warning` or `exception`.
    pub level: String,
    /// The text.
    pub text: String,
    /// Where it came from, when known.
    pub url: String,
    /// The frame whose JavaScript logged it, when known.
    pub frame_id: Option<String>,
}

/// Why the page (or one of its frames) cannot be used (SPEC §4.5).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Blocked {
    /// Why (see [`BlockedReason`]).
    pub reason: BlockedReason,
    /// What the caller can do about it (safe for every cause `reason` allows).
    pub hint: String,
    /// The out-of-process iframe that does not answer; `None` when it is the page itself.
    pub frame_id: Option<String>,
    /// For `dialog_in_unfollowed_page`: the open pages the task opened but no longer watches,
    /// one of which shows the dialog (closing it clears the block). For `unresponsive`: the page
    /// the task follows (a popup, a page a client created) that has not answered since it was
    /// attached, when it is that page and not the task's own (`crate::supervisor::stall`). For
    /// `orphaned_dialog` on the page: the pages it opened, which may share its renderer and
    /// show that dialog (`crate::attach`; close them first). Empty otherwise.
    pub target_ids: Vec<String>,
}

/// An immutable view of one supervisor's state. Cheap to read from any thread.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Snapshot {
    /// The task this supervisor serves.
    pub task_id: String,
    /// The CDP URL, credentials redacted.
    pub cdp_url: String,
    /// Active, reconnecting (attempt n of m), stopped or dead (with the reason).
    pub state: SupervisorState,
    /// The page target the supervisor attached to.
    pub page_target_id: Option<String>,
    /// The page target's session.
    pub page_session_id: Option<String>,
    /// Dialogs waiting for an answer, oldest first.
    pub pending_dialogs: Arc<[PendingDialog]>,
    /// The last closed dialogs, newest last. Each entry is shared between snapshots, so
    /// publishing a change costs reference counts, not copies.
    pub recent_dialogs: Arc<[Arc<ClosedDialog>]>,
    /// The capped tree shown to agents.
    pub frame_tree: Arc<FrameTree>,
    /// Every known frame, for lookups and routing.
    pub frames: Arc<HashMap<String, FrameRecord>>,
    /// Console ring, newest last (entries shared between snapshots, like `recent_dialogs`).
    pub console_errors: Arc<[Arc<ConsoleEntry>]>,
    /// Set when the page is wedged by an orphaned dialog.
    pub blocked: Option<Blocked>,
    /// The session whose document `blocked` is about (its renderer is the one it blocks).
    pub(crate) blocked_session: Option<String>,
    /// The page's renderer crashed (`"crashed": true`); calls into the page fail at once, except
    /// `Page.navigate` and `Page.reload`, which recover it.
    pub crashed: bool,
    /// Why the connection ended, while it is down (reconnecting) and after the end.
    pub disconnect_reason: Option<String>,
    /// The pages the task follows, the task's own page first (issue 14); empty when
    /// `browser.follow_popups` is off.
    pub pages: Arc<[PageInfo]>,
    /// Some popups were not followed because of `limits.pages_max`.
    pub pages_truncated: bool,
    /// The task's downloads, newest last (at most 100; issue 31).
    pub downloads: Arc<[Arc<Download>]>,
    /// File choosers the task's pages opened and that wait for files (with
    /// `security.allow_file_access`); the JSON lists them among `pending_dialogs`.
    pub file_choosers: Arc<[FileChooser]>,
    /// The last file chooser the security policy kept from the agent, when one was.
    pub file_chooser_refused: Option<ChooserRefused>,
    /// Set when the task's own page was gone after a reconnect and a new one was made
    /// (`StartOptions::own_page`): the page target that was lost.
    pub page_replaced: Option<String>,
    /// Whether a person holds the task, since when, and how long it was held before
    /// ([`Supervisor::hand_over`](crate::Supervisor::hand_over), SPEC §20).
    pub handover: Handover,
    /// Increases with every publish.
    pub version: u64,
    /// The task's page's current document: what a navigation waits for.
    pub(crate) document: Option<MainDocument>,
    /// Popups past `limits.pages_max` that the supervisor watches for dialogs only (up to
    /// `limits.watched_pages_max`): their dialogs are pending like any other, with their
    /// `target_id`, and a call routed to one goes to its watch session (SPEC §8 "No silent
    /// wedge").
    pub(crate) watched_pages: Arc<[PageInfo]>,
    /// Dialogs CDP can no longer answer that still block their renderer (SPEC §5, §11): out of
    /// `pending_dialogs`, reported through `blocked`; the call path refuses calls into them.
    pub(crate) unanswerable: Arc<[PendingDialog]>,
    /// The renderer behind each page and OOPIF session, for the dialog rule
    /// (`crate::core::policy`).
    pub(crate) renderers: Arc<HashMap<String, Renderer>>,
    /// The pages the task created through raw calls (`Target.createTarget`), oldest first, for
    /// `security.isolate_tasks` (`crate::security::isolation`).
    pub(crate) created_targets: Arc<[String]>,
    /// The browser contexts it created (`Target.createBrowserContext`), likewise.
    pub(crate) created_contexts: Arc<[String]>,
    /// Popups were let go past `limits.pages_max` + `limits.watched_pages_max`: a dialog in one
    /// of them may freeze the task's renderer unseen, which a call into it that stops answering
    /// then probes for (`crate::supervisor`, SPEC §8 "No silent wedge").
    pub(crate) popups_let_go: bool,
}

/// Who holds the task: the agent, or a person it was handed over to (SPEC §20). While a person
/// holds it, no dialog policy or watchdog answers a dialog, no automatic command reaches its
/// pages, and the agent's calls fail with [`Error::HeldByHuman`](crate::Error::HeldByHuman).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub struct Handover {
    /// When the current hold began (Unix epoch seconds); `None` while the agent has the task.
    pub held_since: Option<f64>,
    /// The seconds of the holds that have ended (the current one not included: add
    /// `now - held_since` for the live total, as [`Handover::held_total_s`] does).
    pub ended_holds_s: f64,
    /// How many times the task has been handed over.
    pub holds: u32,
}

impl Handover {
    /// True while a person holds the task.
    pub fn is_held(&self) -> bool {
        self.held_since.is_some()
    }

    /// The total time the task has been held, the current hold up to `now_epoch` (Unix epoch
    /// seconds) included.
    pub fn held_total_s(&self, now_epoch: f64) -> f64 {
        self.ended_holds_s + self.held_since.map_or(0.0, |t| (now_epoch - t).max(0.0))
    }
}

/// What is known of the renderer process behind one page or OOPIF session: the input of the
/// rule "a dialog blocks every session of its renderer" (`crate::core::policy`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Renderer {
    /// `Runtime.getIsolateId` of the session's current document, once answered.
    pub isolate: Option<String>,
    /// The browsing-context group: the target id of the first page of the chain of openers
    /// that can script each other (`canAccessOpener`).
    pub group: String,
    /// `crate::core::policy::site_key` of the session's own document; `None` when unknown or
    /// opaque.
    pub site: Option<String>,
}

/// The task's page's main-frame document, as the last `Page.frameNavigated` and
/// `Page.loadEventFired` of its session said.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct MainDocument {
    /// The navigation that brought it (`loaderId`).
    pub loader_id: String,
    /// Its `load` event fired.
    pub loaded: bool,
}

/// A page the task follows: its own page, or one that it (or a page it follows) opened.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct PageInfo {
    /// The page target.
    pub target_id: String,
    /// Its main frame's URL.
    pub url: String,
    /// Its title, when known (empty: not tracked yet, see `src/core/pages.rs`).
    pub title: String,
    /// The page that opened it (`None` for the task's own page).
    pub opener_target_id: Option<String>,
    /// Its session (not in the JSON).
    pub(crate) session_id: String,
}

impl Snapshot {
    /// The empty snapshot of a supervisor that is starting (active: it attaches before `start`
    /// returns).
    pub fn empty(task_id: &str, cdp_url: &str) -> Snapshot {
        Snapshot {
            task_id: task_id.to_string(),
            cdp_url: cdp_url.to_string(),
            state: SupervisorState::Active,
            page_target_id: None,
            page_session_id: None,
            pending_dialogs: Arc::from(Vec::new()),
            recent_dialogs: Arc::from(Vec::new()),
            frame_tree: Arc::new(FrameTree::default()),
            frames: Arc::new(HashMap::new()),
            console_errors: Arc::from(Vec::new()),
            blocked: None,
            blocked_session: None,
            crashed: false,
            disconnect_reason: None,
            pages: Arc::from(Vec::new()),
            pages_truncated: false,
            downloads: Arc::from(Vec::new()),
            file_choosers: Arc::from(Vec::new()),
            file_chooser_refused: None,
            page_replaced: None,
            handover: Handover::default(),
            version: 0,
            document: None,
            watched_pages: Arc::from(Vec::new()),
            unanswerable: Arc::from(Vec::new()),
            renderers: Arc::new(HashMap::new()),
            created_targets: Arc::from(Vec::new()),
            created_contexts: Arc::from(Vec::new()),
            popups_let_go: false,
        }
    }

    /// True while the connection is up and the supervisor is attached to its page: exactly
    /// when `state` is [`SupervisorState::Active`] (the JSON says `"state": "active"`).
    pub fn is_active(&self) -> bool {
        self.state == SupervisorState::Active
    }

    /// The `loaderId` of the navigation that brought the page's current main document, when
    /// known (what [`Navigation::loader_id`](crate::Navigation::loader_id) names).
    pub fn document_loader(&self) -> Option<&str> {
        self.document.as_ref().map(|d| d.loader_id.as_str())
    }

    /// Whether the page's current main document has fired its `load` event.
    pub fn document_loaded(&self) -> bool {
        self.document.as_ref().is_some_and(|d| d.loaded)
    }

    /// The most recent closed record of dialog `id`, if it is still in the ring.
    pub fn closed_dialog(&self, id: &str) -> Option<&ClosedDialog> {
        self.recent_dialogs
            .iter()
            .rev()
            .find(|c| c.dialog.id == id)
            .map(|c| &**c)
    }
}

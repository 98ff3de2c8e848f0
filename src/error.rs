//! The crate's one error type: every failure a caller can see, with a message a user can act on.
//!
//! Messages never contain credentials: every URL that reaches an error has gone through
//! [`crate::redact::redact_url`] first. A value the caller (or the page) chose is shown through
//! [`crate::quote`]: at most 64 characters of it, escaped, so no message grows with its input.

use std::time::Duration;

use crate::quote::{clipped, quoted};
use crate::snapshot::{ClosedBy, PendingDialog};

/// Everything that can go wrong between a caller and the browser.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The CDP URL could not be parsed or has a scheme we do not speak.
    #[error("invalid CDP URL {url}: {reason}")]
    InvalidUrl {
        /// The URL, redacted.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// TCP connect, TLS or the WebSocket handshake failed.
    #[error("could not connect to {url}: {reason}")]
    Connect {
        /// The URL, redacted.
        url: String,
        /// What failed.
        reason: String,
    },
    /// The WebSocket closed or broke; pending calls fail with this at once.
    #[error("connection lost: {0}")]
    ConnectionLost(String),
    /// A CDP call got no reply before its deadline (a late reply is dropped silently).
    #[error("CDP call {} timed out after {after:?}", clipped(.method))]
    Timeout {
        /// The CDP method.
        method: String,
        /// The deadline that passed.
        after: Duration,
    },
    /// The browser answered a call with a CDP error.
    #[error("CDP error from {}: {message} (code {code})", clipped(.method))]
    Cdp {
        /// The CDP method.
        method: String,
        /// The CDP error code (e.g. -32602).
        code: i64,
        /// The CDP error message.
        message: String,
    },
    /// `start` did not attach within `start_timeout_s`.
    #[error("attaching to the page did not finish within {0:?}: {1}")]
    StartTimeout(Duration, String),
    /// The browser has no page target we can use, or the caller named one that does not exist.
    #[error("{0}")]
    NoPage(String),
    /// The supervisor has stopped or lost its connection (or was stopped while it was
    /// starting). Carries the task id.
    #[error(
        "the browser supervisor for task {} has stopped (or lost its connection for good); connect again",
        quoted(.0)
    )]
    NotActive(String),
    /// `respond_to_dialog` with no dialog pending.
    #[error("no dialog is open")]
    NoDialog,
    /// `respond_to_dialog` named a dialog id that is not pending.
    #[error("unknown dialog_id {}; pending dialogs: [{known}]", quoted(.id))]
    UnknownDialog {
        /// The id the caller gave.
        id: String,
        /// Comma-separated ids of the pending dialogs.
        known: String,
    },
    /// Several dialogs are pending and the caller did not say which one.
    #[error("{count} dialogs are pending ({pending}); pass dialog_id to choose one")]
    AmbiguousDialog {
        /// How many are pending.
        count: usize,
        /// Comma-separated ids (with their types and messages).
        pending: String,
    },
    /// The dialog was already gone when the answer arrived.
    #[error("dialog {id} was already closed ({closed_by}) before the answer arrived: {detail}")]
    DialogAlreadyClosed {
        /// The dialog id.
        id: String,
        /// Who closed it, as recorded in `recent_dialogs`.
        closed_by: ClosedBy,
        /// The browser's words.
        detail: String,
    },
    /// The page is wedged by a dialog that belongs to no live CDP client (SPEC §4.5, §11).
    #[error(
        "the page is blocked by a JavaScript dialog opened by a CDP client that has disconnected; \
         such a dialog cannot be answered over CDP (the browser answers 'No dialog is showing'). \
         Reload or navigate the page (browser_cdp Page.reload or Page.navigate) to clear it"
    )]
    OrphanedDialog,
    /// No dialog is pending and the page does not answer CDP; a probe could not prove a dialog
    /// (SPEC §4.5): a script may be keeping the page busy.
    #[error(
        "no dialog is pending, and the page does not answer CDP: a script may be keeping it busy, \
         or a JavaScript dialog opened by a client that went away may be blocking it. Wait a few \
         seconds and retry; if it stays blocked, reload the page (browser_cdp Page.reload)"
    )]
    PageUnresponsive,
    /// A dialog in a page the supervisor does not watch (a popup past `limits.pages_max` +
    /// `limits.watched_pages_max`) freezes the renderer the call needs (SPEC §8 "No silent
    /// wedge"); closing the page that shows it (one of `target_ids`) clears it.
    #[error(
        "a JavaScript dialog in a page the supervisor does not watch (a popup past \
         limits.pages_max + limits.watched_pages_max) blocks this page's renderer, so the call \
         would hang; close the page that shows it (browser_cdp Target.closeTarget{}) to clear it",
        if target_ids.is_empty() { String::new() } else { format!(" with one of {}", target_ids.join(", ")) }
    )]
    DialogInUnfollowedPage {
        /// The pages the task opened and no longer watches, one of which shows the dialog.
        target_ids: Vec<String>,
    },
    /// The browser applied the answer to a different dialog than the one it named (SPEC §5):
    /// Chromium answers whichever dialog the session shows, and the named one had already been
    /// closed by something else when the answer arrived. `recent_dialogs` records the named
    /// dialog as `remote` and `received` as closed by this answer.
    #[error(
        "the answer meant for dialog {named} was applied to dialog {id} ({kind} {message}) \
         instead: {named} had already been closed by something else (see recent_dialogs), and \
         the page had opened {id}, which received this answer",
        id = received.id,
        kind = received.kind,
        message = quoted(&received.message)
    )]
    AnswerAppliedToOtherDialog {
        /// The dialog the caller answered.
        named: String,
        /// The dialog that received the answer.
        received: Box<PendingDialog>,
    },
    /// The browser refused the answer ("No dialog is showing") although the dialog was never
    /// closed: it still blocks its frame, and CDP can no longer answer it (SPEC §5, §11). It is
    /// reported through `blocked`; reloading the page clears it.
    #[error(
        "{} can no longer be answered over CDP (the browser says 'No dialog is showing') \
         but it still blocks frame {}; reload the page (browser_cdp Page.reload) to clear it",
        if id.is_empty() { "a dialog".to_string() } else { format!("dialog {id}") },
        frame_id.as_deref().unwrap_or("?")
    )]
    DialogUnanswerable {
        /// The dialog (empty when only `blocked` says it exists).
        id: String,
        /// The frame it blocks.
        frame_id: Option<String>,
    },
    /// A frame id the supervisor does not know.
    #[error(
        "unknown frame_id {}: read frame_tree from browser_snapshot for the current frame ids",
        quoted(.0)
    )]
    UnknownFrame(String),
    /// A target id the supervisor does not track.
    #[error(
        "unknown target_id {}: only the page target, the popups it opened (pages in the snapshot) and tracked iframe targets can be addressed",
        quoted(.0)
    )]
    UnknownTarget(String),
    /// A configuration value is invalid.
    #[error("invalid configuration: {key} is {value}; expected {allowed}")]
    Config {
        /// The key, e.g. `browser.dialog_policy`; an item of a list names its position, e.g.
        /// `security.cdp_deny[2]`.
        key: String,
        /// The value given, as the message shows it: a string quoted (at most 64 characters of
        /// it, escaped, then its length), a number or boolean as written, or the kind of a value
        /// of the wrong kind (`a list`, `a table`: never its contents).
        value: String,
        /// What is allowed.
        allowed: String,
    },
    /// The configuration cannot be read as a whole: its file does not exist, or it is not TOML.
    /// (A readable configuration with an invalid value is an [`Error::Config`].)
    #[error("{0}")]
    InvalidConfig(String),
    /// Something else about the caller's input.
    #[error("{0}")]
    InvalidArgument(String),
    /// An I/O error outside the CDP connection (launching a browser, reading a file).
    #[error("{0}")]
    Io(String),
    /// A JavaScript dialog blocks the page this call needs (SPEC §8): it opened while the call
    /// was in flight, or was already pending and the browser cannot answer this method while it
    /// is open. Answer the dialog, then retry if the call did not already take effect.
    #[error(
        "{} is blocked by a{an} {kind} dialog {id} ({message}); answer it with browser_dialog",
        clipped(.method),
        an = if dialog.kind.as_str().starts_with(['a', 'e', 'i', 'o', 'u']) { "n" } else { "" },
        kind = dialog.kind,
        id = dialog.id,
        message = quoted(&dialog.message)
    )]
    BlockedByDialog {
        /// The dialog that blocks the call (as in `pending_dialogs`).
        dialog: Box<PendingDialog>,
        /// The CDP method of the blocked call.
        method: String,
    },
    /// The `[security]` configuration refuses this call (SPEC §14).
    #[error("{} refused by {option}: {detail}", clipped(.method))]
    Refused {
        /// The CDP method.
        method: String,
        /// The option that refused it, e.g. `security.allow_file_urls`.
        option: String,
        /// Why.
        detail: String,
    },
    /// The renderer behind the page or frame the call is for has crashed (SPEC §10): the call is
    /// refused at once instead of waiting for a renderer that will never answer.
    #[error(
        "{} cannot run: the renderer of {what} has crashed; reload the page \
         (browser_cdp Page.reload, or Page.navigate) to recover",
        clipped(.method)
    )]
    TargetCrashed {
        /// `the page` or `frame <id>`.
        what: String,
        /// The CDP method of the refused call.
        method: String,
    },
    /// The browser answered, but its reply could not be decoded (for instance, a value nested
    /// deeper than the JSON decoder's 128 levels). The call did run in the browser.
    #[error(
        "the reply to {} could not be decoded: {reason}; the call ran in the browser, but \
         replies nested deeper than 128 levels are not supported (return a flatter value, e.g. \
         JSON.stringify it in the page)",
        clipped(.method)
    )]
    UndecodableReply {
        /// The CDP method.
        method: String,
        /// What the decoder said.
        reason: String,
    },
    /// A navigation of the task's page failed (`Supervisor::navigate`): the browser's network
    /// error (`net::ERR_NAME_NOT_RESOLVED`, `net::ERR_CONNECTION_REFUSED`, ...) or why the page
    /// stayed.
    #[error("navigating to {} failed: {error}", quoted(.url))]
    NavigationFailed {
        /// The URL asked for.
        url: String,
        /// What the browser said.
        error: String,
    },
    /// `Supervisor::wait_for_download`: no download of the task's was under way or began within
    /// the wait.
    #[error("no pending download: none was under way and none began within {waited:?}")]
    NoDownload {
        /// How long it waited for one to begin.
        waited: Duration,
    },
    /// The caller cancelled the call (a [`crate::CancelToken`]); its late reply is dropped.
    #[error("CDP call {} was cancelled", clipped(.0))]
    Cancelled(String),
    /// The caller cancelled a start ([`crate::SupervisorRegistry::get_or_start_cancellable`]):
    /// it stopped where it was and left nothing behind (no supervisor, no threads, no page it
    /// had created).
    #[error(
        "the start of task {} was cancelled while {during}; nothing of it was kept \
         (no supervisor, no page it created)",
        quoted(.task_id)
    )]
    StartCancelled {
        /// The task.
        task_id: String,
        /// What the start was doing: `connecting`, `attaching`, ...
        during: String,
    },
    /// A start on a registry that was closed ([`crate::SupervisorRegistry::close`]). Carries
    /// the task id.
    #[error("the registry is closed and starts no supervisor (task {}): make a new registry", quoted(.0))]
    RegistryClosed(String),
}

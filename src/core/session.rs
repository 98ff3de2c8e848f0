//! What a new CDP session is sent (SPEC §4 steps 3 and 4, §6, §19): one list per kind of
//! session, used both by the attach sequence for the task's page (`crate::attach`) and by the
//! state machine for the sessions auto-attach hands it (OOPIFs, workers) and the popups it
//! follows. By default only commands a page cannot observe (measured with the detection page:
//! `tests/it/measure_stealth.rs`); the opt-ins that a page can observe are [`Extras`].

use serde_json::{Value, json};

use super::{CallKind, Command};

/// What a CDP session is attached to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionKind {
    /// The task's page, attached by the attach sequence.
    Page,
    /// A page the task's page opened: a popup or new tab it follows (issue 14).
    Popup,
    /// An out-of-process iframe.
    Iframe,
    /// A dedicated, shared or service worker: tracked for its console only.
    Worker,
    /// A popup past `limits.pages_max`, watched for its dialogs only (SPEC §8 "No silent
    /// wedge"): no frames, console, iframes or bridge.
    Watched,
}

impl SessionKind {
    /// The kind of a child session that auto-attach hands over, from its `targetInfo.type`;
    /// `None` for a target that is not tracked (it is only resumed).
    pub fn of_child(target_type: &str) -> Option<SessionKind> {
        match target_type {
            "iframe" => Some(SessionKind::Iframe),
            "worker" | "shared_worker" | "service_worker" => Some(SessionKind::Worker),
            _ => None,
        }
    }

    /// Whether the session shows documents the supervisor follows: the dialog bridge is
    /// installed there.
    pub fn shows_documents(self) -> bool {
        matches!(
            self,
            SessionKind::Page | SessionKind::Popup | SessionKind::Iframe
        )
    }
}

/// `Target.setAutoAttach` params: every new child (or, browser-level, every new page) is
/// attached paused, on this connection.
pub fn auto_attach_params() -> Value {
    json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true})
}

/// The dialog bridge on one session (SPEC §6): the script, then the narrow Fetch interception.
pub fn bridge_commands(session_id: &str) -> [Command; 2] {
    let sid = Some(session_id.to_string());
    [
        automatic(
            "Page.addScriptToEvaluateOnNewDocument",
            crate::bridge::add_script_params(),
            sid.clone(),
        ),
        automatic("Fetch.enable", crate::bridge::fetch_enable_params(), sid),
    ]
}

/// What a session's set-up adds to the default one, which a page cannot observe (SPEC §19;
/// measured: `tests/it/measure_stealth.rs`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Extras {
    /// The dialog bridge (SPEC §6), on sessions that show documents: a page sees its script.
    pub bridge: bool,
    /// `Runtime.enable`, for the console ring (`browser.capture_console`): a page sees it too.
    pub console: bool,
}

/// The commands that set up a new session of `kind`, in the order to send them:
///
/// * page and popup: `Page.enable`, `Page.getFrameTree`, `Target.setAutoAttach` (SPEC §4 step 3);
/// * OOPIF: `Page.enable`, `Target.setAutoAttach`, `Page.getFrameTree` (step 4; its nested OOPIFs
///   attach before the seed);
/// * page, popup and OOPIF then `Page.setInterceptFileChooserDialog` (issue 31: file choosers are
///   reported, and answered only with `security.allow_file_access`; measured invisible to the
///   detection page);
/// * worker: nothing (it is tracked, and resumed by the caller);
/// * watched page (a popup past `limits.pages_max`): `Page.enable` only, for its dialogs.
///
/// Every session that shows a document then asks `Runtime.getIsolateId` (a
/// [`CallKind::IsolateId`]): which renderer it runs in decides which dialogs block its calls
/// (`crate::core::policy`). None of these is visible to the page: no `Runtime.enable` (Chromium
/// would serialise the page's console arguments for us, which a page detects), no script, no
/// binding. `extras` adds what the configuration opted into: `Runtime.enable` after
/// `Page.enable` on every kind but the watched page (`console`), and the dialog bridge's
/// commands last on sessions that show documents (`bridge`).
///
/// `Page.enable` is a [`CallKind::Responds`] (its answer proves the document is not wedged:
/// SPEC §4.5) and `Page.getFrameTree` a [`CallKind::SeedFrameTree`]. The attach sequence waits
/// for the replies to the task's page's commands except the isolate probe, so its
/// `Target.setAutoAttach` is [`CallKind::Plain`]; everything else is [`CallKind::Automatic`].
///
/// Nothing here resumes a paused target: the caller sends `Runtime.runIfWaitingForDebugger`
/// after these (the rule "always resume" covers targets that are not tracked too), so the
/// bridge is in before the first script runs.
pub fn session_setup(session_id: &str, kind: SessionKind, extras: Extras) -> Vec<Command> {
    let sid = Some(session_id.to_string());
    let page_enable = Command {
        method: "Page.enable".into(),
        params: json!({}),
        session_id: sid.clone(),
        kind: CallKind::Responds {
            session_id: session_id.to_string(),
        },
    };
    let frame_tree = Command {
        method: "Page.getFrameTree".into(),
        params: json!({}),
        session_id: sid.clone(),
        kind: CallKind::SeedFrameTree {
            session_id: session_id.to_string(),
        },
    };
    let auto_attach = Command {
        kind: if kind == SessionKind::Page {
            CallKind::Plain
        } else {
            CallKind::Automatic
        },
        ..automatic("Target.setAutoAttach", auto_attach_params(), sid.clone())
    };
    let isolate = isolate_probe(session_id, 0);
    // Invisible to the page; without it CDP says nothing of a chooser (`core/choosers.rs`).
    let choosers = automatic(
        "Page.setInterceptFileChooserDialog",
        json!({"enabled": true}),
        sid.clone(),
    );
    let mut out = match kind {
        SessionKind::Page | SessionKind::Popup => {
            vec![page_enable, frame_tree, auto_attach, isolate, choosers]
        }
        SessionKind::Iframe => vec![page_enable, auto_attach, frame_tree, isolate, choosers],
        SessionKind::Worker => Vec::new(),
        SessionKind::Watched => vec![automatic("Page.enable", json!({}), sid), isolate],
    };
    if extras.console && kind != SessionKind::Watched {
        let at = usize::from(kind != SessionKind::Worker);
        out.insert(at, console_enable(session_id));
    }
    if extras.bridge && kind.shows_documents() {
        out.extend(bridge_commands(session_id));
    }
    out
}

/// `Runtime.enable` on `session_id`, for the console ring (`browser.capture_console`): the one
/// command of the set-up a page can detect (SPEC §19).
pub fn console_enable(session_id: &str) -> Command {
    automatic("Runtime.enable", json!({}), Some(session_id.to_string()))
}

/// `Runtime.getIsolateId` on `session_id`, for its document number `generation` (the renderer
/// behind a session changes with a cross-site navigation: `crate::core::policy`).
pub fn isolate_probe(session_id: &str, generation: u64) -> Command {
    Command {
        method: "Runtime.getIsolateId".into(),
        params: json!({}),
        session_id: Some(session_id.to_string()),
        kind: CallKind::IsolateId {
            session_id: session_id.to_string(),
            generation,
        },
    }
}

/// `Runtime.runIfWaitingForDebugger` on `session_id`: a paused target that nobody resumes hangs
/// its page.
pub fn resume(session_id: &str) -> Command {
    automatic(
        "Runtime.runIfWaitingForDebugger",
        json!({}),
        Some(session_id.to_string()),
    )
}

fn automatic(method: &'static str, params: Value, session_id: Option<String>) -> Command {
    Command {
        method: method.into(),
        params,
        session_id,
        kind: CallKind::Automatic,
    }
}

//! What a new CDP session is sent (SPEC §4 steps 3 and 4, §6): one list per kind of session,
//! used both by the attach sequence for the task's page (`crate::attach`) and by the state
//! machine for the sessions auto-attach hands it (OOPIFs, workers) and the popups it follows.

use super::*;

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

    /// Whether the session shows documents: the dialog bridge is installed there.
    pub fn shows_documents(self) -> bool {
        self != SessionKind::Worker
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

/// The commands that set up a new session of `kind`, in the order to send them, with the dialog
/// bridge's last when `bridge` is set (and the session shows documents):
///
/// * page and popup: `Page.enable`, `Runtime.enable`, `Page.getFrameTree`, `Target.setAutoAttach`
///   (SPEC §4 step 3);
/// * OOPIF: `Page.enable`, `Runtime.enable`, `Target.setAutoAttach`, `Page.getFrameTree` (step 4;
///   its nested OOPIFs attach before the seed);
/// * worker: `Runtime.enable`.
///
/// `Page.enable` is a [`CallKind::PageEnable`] (its answer proves the document is not wedged:
/// SPEC §4.5) and `Page.getFrameTree` a [`CallKind::SeedFrameTree`]. The attach sequence waits
/// for the replies to the task's page's commands except `Runtime.enable`, so its
/// `Target.setAutoAttach` is [`CallKind::Plain`]; everything else is [`CallKind::Automatic`].
///
/// Nothing here resumes a paused target: the caller sends `Runtime.runIfWaitingForDebugger`
/// after these (the rule "always resume" covers targets that are not tracked too), so the
/// bridge is in before the first script runs.
pub fn session_setup(session_id: &str, kind: SessionKind, bridge: bool) -> Vec<Command> {
    let sid = Some(session_id.to_string());
    let page_enable = Command {
        method: "Page.enable".into(),
        params: json!({}),
        session_id: sid.clone(),
        kind: CallKind::PageEnable {
            session_id: session_id.to_string(),
        },
    };
    let runtime_enable = automatic("Runtime.enable", json!({}), sid.clone());
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
        ..automatic("Target.setAutoAttach", auto_attach_params(), sid)
    };
    let mut out = match kind {
        SessionKind::Page | SessionKind::Popup => {
            vec![page_enable, runtime_enable, frame_tree, auto_attach]
        }
        SessionKind::Iframe => vec![page_enable, runtime_enable, auto_attach, frame_tree],
        SessionKind::Worker => vec![runtime_enable],
    };
    if bridge && kind.shows_documents() {
        out.extend(bridge_commands(session_id));
    }
    out
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

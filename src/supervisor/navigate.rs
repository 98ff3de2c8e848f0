//! Navigating the task's page (issue 31, SPEC §10 `browser_navigate`): a navigation that never
//! waits on a dialog.
//!
//! [`Supervisor::navigate`] judges the URL by the security policy, brings the page to the front
//! (`Target.activateTarget`), sends `Page.navigate` through the dialog-aware call path, and then
//! waits on published snapshots, not on a reply, until the page's main document is the one the
//! navigation brought (`commit`) and has loaded (`load`): `core/document.rs` publishes both. Any
//! dialog that opens in the page before then and waits for the agent ends the wait at once with
//! [`Error::BlockedByDialog`] naming it, whether it blocks `Page.navigate`'s reply (a
//! `beforeunload` of the page being left: the call path fails the call in flight) or the load
//! (an `alert` or `prompt` while the new page loads). Dialogs already pending when the
//! navigation starts are not the navigation's: the navigation closes them.
//!
//! The supervisor remembers its latest navigation, so once the dialog is answered
//! [`Supervisor::wait_for_navigation`] waits for the same one again and completes. When
//! `Page.navigate`'s reply was lost to a `beforeunload` dialog, the navigation is known by the
//! document it replaces: any newer main document is it. A `beforeunload` dismissed keeps the
//! page: the second wait says so at once.
//!
//! [`Supervisor::tab_ref`] names the page the way agent-browser numbers tabs (`tN`), from the
//! browser's own `Target.getTargets`: a raw call of the task's lists only the task's targets
//! (`security.isolate_tasks`), which would number every task's page `t1`.

use crate::sync;
use std::time::Duration;

use serde_json::json;

use super::{Route, Supervisor};
use crate::config::DialogPolicy;
use crate::core::policy;
use crate::deadline::Deadline;
use crate::error::Error;
use crate::outbound::Outbound;
use crate::quote::quoted;
use crate::snapshot::{DialogKind, PendingDialog, Snapshot};

/// How far a navigation waits (`browser_navigate`'s `wait_until`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WaitUntil {
    /// The new document has committed (it replaced the old one in the page).
    Commit,
    /// The new document's `load` event fired.
    #[default]
    Load,
}

impl WaitUntil {
    /// `commit` or `load`.
    pub fn as_str(self) -> &'static str {
        match self {
            WaitUntil::Commit => "commit",
            WaitUntil::Load => "load",
        }
    }

    /// Reads `commit` or `load`; anything else is [`Error::InvalidArgument`] naming both.
    pub fn parse(s: &str) -> Result<WaitUntil, Error> {
        match s {
            "commit" => Ok(WaitUntil::Commit),
            "load" => Ok(WaitUntil::Load),
            _ => Err(Error::InvalidArgument(format!(
                "invalid wait_until {}: use \"commit\" or \"load\"",
                quoted(s)
            ))),
        }
    }
}

/// A navigation of the task's page that reached its `wait_until`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Navigation {
    /// The URL asked for.
    pub url: String,
    /// The frame navigated: the page's main frame (its id is the page's target id).
    pub frame_id: String,
    /// The navigation's `loaderId`; `None` for a navigation within the document (a fragment),
    /// which has none.
    pub loader_id: Option<String>,
}

/// The supervisor's latest navigation, for a second wait ([`Supervisor::wait_for_navigation`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct LastNavigation {
    url: String,
    frame_id: String,
    /// From `Page.navigate`'s reply; `None` until it came (or when a dialog took it).
    loader_id: Option<String>,
    /// Within the document: done once `Page.navigate` answered.
    same_document: bool,
    /// The main document's loader when the navigation began.
    previous_loader: Option<String>,
    /// Dialogs pending when it began: the navigation closes them, they do not block it.
    old_dialogs: Vec<String>,
    /// The dialog that stopped the last wait.
    blocked_by: Option<String>,
}

impl Supervisor {
    /// Navigates the task's page to `url` and waits up to `timeout` for `wait_until`
    /// (module doc). The URL is judged by the security policy first ([`Error::Refused`]); a
    /// dialog that opens before `wait_until` ends the call at once with
    /// [`Error::BlockedByDialog`]; a network error is [`Error::NavigationFailed`] naming it
    /// (`net::ERR_NAME_NOT_RESOLVED`, ...); no `wait_until` by `timeout` is [`Error::Timeout`].
    pub fn navigate(
        &self,
        url: &str,
        wait_until: WaitUntil,
        timeout: Duration,
    ) -> Result<Navigation, Error> {
        self.ensure_alive()?;
        let deadline = Deadline::after(timeout);
        let params = json!({ "url": url });
        if let Err((option, detail)) = self.config.security.check("Page.navigate", &params) {
            return Err(Error::Refused {
                method: "Page.navigate".into(),
                option: option.to_string(),
                detail,
            });
        }
        let snap = self.snapshot();
        let page = snap
            .page_target_id
            .clone()
            .ok_or_else(|| Error::NoPage("the supervisor is not attached to a page yet".into()))?;
        let mut last = LastNavigation {
            url: url.to_string(),
            frame_id: page.clone(),
            previous_loader: snap.document.as_ref().map(|d| d.loader_id.clone()),
            old_dialogs: snap.pending_dialogs.iter().map(|d| d.id.clone()).collect(),
            ..LastNavigation::default()
        };
        self.remember(&last);
        // Browser-level: a dialog never holds it up. Its failure does not stop the navigation.
        let activate =
            crate::core::Command::new("Target.activateTarget", json!({ "targetId": page }));
        if let Err(e) = self.shared.round_trip(activate, deadline) {
            log::debug!("task {}: Target.activateTarget: {e}", self.task_id);
        }
        let left = deadline
            .remaining()
            .unwrap_or(crate::config::MAX_CALL_TIMEOUT);
        let reply = match self.call("Page.navigate", params, Route::Page, left) {
            Ok(r) => r,
            Err(Error::BlockedByDialog { dialog, method }) => {
                last.blocked_by = Some(dialog.id.clone());
                self.remember(&last);
                return Err(Error::BlockedByDialog { dialog, method });
            }
            Err(e) => return Err(e),
        };
        if let Some(error) = reply["errorText"].as_str().filter(|e| !e.is_empty()) {
            return Err(Error::NavigationFailed {
                url: url.to_string(),
                error: error.to_string(),
            });
        }
        if let Some(f) = reply["frameId"].as_str() {
            last.frame_id = f.to_string();
        }
        last.loader_id = reply["loaderId"].as_str().map(str::to_string);
        last.same_document = last.loader_id.is_none();
        self.remember(&last);
        self.wait_navigation(last, wait_until, deadline)
    }

    /// Waits up to `timeout` for the supervisor's latest navigation ([`Supervisor::navigate`])
    /// to reach `wait_until`: after a dialog ended the first wait and was answered, this
    /// completes the same navigation. [`Error::InvalidArgument`] when no navigation was made;
    /// the same errors as `navigate` otherwise.
    pub fn wait_for_navigation(
        &self,
        wait_until: WaitUntil,
        timeout: Duration,
    ) -> Result<Navigation, Error> {
        self.ensure_alive()?;
        let last = sync::lock(&self.last_navigation).clone().ok_or_else(|| {
            Error::InvalidArgument("no navigation to wait for: navigate the page first".into())
        })?;
        if let Some(id) = &last.blocked_by {
            let snap = self.snapshot();
            if let Some(c) = snap.closed_dialog(id)
                && c.dialog.kind == DialogKind::BeforeUnload
                && c.accepted == Some(false)
            {
                return Err(Error::NavigationFailed {
                    url: last.url.clone(),
                    error: format!(
                        "the page's beforeunload dialog {id} was dismissed: the page stayed"
                    ),
                });
            }
        }
        self.wait_navigation(last, wait_until, Deadline::after(timeout))
    }

    /// The task's page as agent-browser numbers tabs: `tN`, N its 1-based position among the
    /// browser's page targets in `Target.getTargets` order, `devtools://` pages not counted (a
    /// page list DEVTOOLS, OTHER, OWNED gives `t2`). Asked of the browser directly, within
    /// `timeout`: other tasks' pages count, though the task cannot reach them. [`Error::NoPage`]
    /// when the browser does not list the page.
    pub fn tab_ref(&self, timeout: Duration) -> Result<String, Error> {
        self.ensure_alive()?;
        let page =
            self.snapshot().page_target_id.clone().ok_or_else(|| {
                Error::NoPage("the supervisor is not attached to a page yet".into())
            })?;
        let listed = self.shared.round_trip(
            crate::core::Command::new("Target.getTargets", json!({})),
            Deadline::after(timeout),
        )?;
        tab_position(&listed, &page)
            .map(|n| format!("t{n}"))
            .ok_or_else(|| {
                Error::NoPage(format!(
                    "the browser does not list the task's page {} among its pages",
                    quoted(&page)
                ))
            })
    }

    fn remember(&self, last: &LastNavigation) {
        *sync::lock(&self.last_navigation) = Some(last.clone());
    }

    /// Waits on published snapshots for `last` to reach `wait_until`, or a dialog that blocks
    /// the page, or the end of the supervisor, or `deadline`.
    fn wait_navigation(
        &self,
        mut last: LastNavigation,
        wait_until: WaitUntil,
        deadline: Deadline,
    ) -> Result<Navigation, Error> {
        let watching = self.config.dialog_policy == DialogPolicy::MustRespond;
        let blocker = |s: &Snapshot| -> Option<PendingDialog> {
            let sid = s.page_session_id.as_deref()?;
            s.pending_dialogs
                .iter()
                .find(|d| {
                    !last.old_dialogs.contains(&d.id)
                        && policy::within_dialogs_reach(s, d, sid, "Page.navigate")
                })
                .cloned()
        };
        let done = |s: &Snapshot| reached(&last, s, wait_until);
        let seen = self
            .shared
            .wait_for(deadline, |s| done(s) || (watching && blocker(s).is_some()));
        let Some(snap) = seen else {
            self.ensure_alive()?;
            return Err(Error::Timeout {
                method: format!("Page.navigate (waiting for {})", wait_until.as_str()),
                after: deadline.budget(),
            });
        };
        if done(&snap) {
            let known = snap.document.as_ref().map(|d| d.loader_id.clone());
            return Ok(Navigation {
                loader_id: match last.same_document {
                    true => None,
                    false => last.loader_id.or(known),
                },
                url: last.url,
                frame_id: last.frame_id,
            });
        }
        let dialog = blocker(&snap).ok_or_else(|| Error::NotActive(self.task_id.clone()))?;
        last.blocked_by = Some(dialog.id.clone());
        self.remember(&last);
        Err(Error::BlockedByDialog {
            dialog: Box::new(dialog),
            method: "Page.navigate".into(),
        })
    }
}

/// Whether the page's published document is `last`'s and has reached `wait_until`.
fn reached(last: &LastNavigation, s: &Snapshot, wait_until: WaitUntil) -> bool {
    if last.same_document {
        return true;
    }
    let Some(doc) = &s.document else {
        return false;
    };
    let ours = match &last.loader_id {
        Some(l) => doc.loader_id == *l,
        None => last.previous_loader.as_deref() != Some(doc.loader_id.as_str()),
    };
    ours && (wait_until == WaitUntil::Commit || doc.loaded)
}

/// `page`'s 1-based position among the page targets of a `Target.getTargets` reply, in its
/// order, `devtools://` pages not counted.
fn tab_position(listed: &serde_json::Value, page: &str) -> Option<usize> {
    fn str_of<'a>(t: &'a serde_json::Value, key: &str) -> Option<&'a str> {
        t.get(key).and_then(serde_json::Value::as_str)
    }
    let infos = listed.get("targetInfos")?.as_array()?;
    infos
        .iter()
        .filter(|t| {
            str_of(t, "type") == Some("page")
                && !str_of(t, "url").is_some_and(|u| u.starts_with("devtools://"))
        })
        .position(|t| str_of(t, "targetId") == Some(page))
        .map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn a_tab_is_numbered_among_pages_in_order_without_devtools() {
        let page = |id: &str, url: &str| json!({"targetId": id, "type": "page", "url": url});
        let listed = json!({"targetInfos": [
            page("DEVTOOLS", "devtools://devtools/bundled/inspector.html"),
            json!({"targetId": "SW", "type": "service_worker", "url": "http://a.test/sw.js"}),
            page("OTHER", "http://a.test/"),
            json!({"targetId": "IFRAME", "type": "iframe", "url": "http://b.test/"}),
            page("OWNED", "about:blank"),
        ]});
        assert_eq!(super::tab_position(&listed, "OWNED"), Some(2));
        assert_eq!(super::tab_position(&listed, "OTHER"), Some(1));
        assert_eq!(super::tab_position(&listed, "DEVTOOLS"), None);
        assert_eq!(super::tab_position(&listed, "GONE"), None);
        assert_eq!(super::tab_position(&json!({}), "OWNED"), None);
    }
}

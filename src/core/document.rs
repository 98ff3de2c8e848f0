//! The task's page's current document (issue 31): the `loaderId` of the navigation that brought
//! it and whether its `load` event fired, from the page session's `Page.frameNavigated` (main
//! frame) and `Page.loadEventFired`. A navigation (`Supervisor::navigate`) waits on the
//! published value rather than on a reply, so a dialog that opens meanwhile ends the wait at
//! once and a second wait for the same navigation can pick up where the first stopped.

use log::warn;

use super::Core;
use crate::protocol;
use crate::snapshot::MainDocument;

impl Core {
    /// `Page.frameNavigated` on `session`: a new document of the page's main frame.
    pub(super) fn document_navigated(&mut self, session: &str, frame: &protocol::Frame) {
        if self.page_session_id.as_deref() != Some(session) || frame.parent_id.is_some() {
            return;
        }
        self.document = Some(MainDocument {
            loader_id: frame.loader_id.clone().unwrap_or_default(),
            loaded: false,
        });
    }

    /// `Page.loadEventFired` on `session`: the page's document has loaded.
    pub(super) fn document_loaded(&mut self, session: &str) {
        if self.page_session_id.as_deref() != Some(session) {
            return;
        }
        if let Some(d) = &mut self.document {
            d.loaded = true;
        }
    }
}

impl Core {
    /// The page is attached on a new session (at start, after a reconnect): a page other than
    /// the one the task had is reported (`page_replaced`: the task's own page was gone and a new
    /// one was made), and the browser is told again where the task's downloads go.
    pub(super) fn page_attached(&mut self, target_id: &str) {
        if let Some(old) = self.page_target_id.as_deref()
            && old != target_id
        {
            warn!(
                "task {}: its page {old} was gone after the reconnect; it now has a new page \
                 {target_id}",
                self.task_id
            );
            self.page_replaced = Some(old.to_string());
        }
        self.ask_title(target_id);
        if let Some(params) = self.download_behavior.clone() {
            // Browser-level, once per connection (a new connection starts without it).
            self.command("Browser.setDownloadBehavior", params, None);
        }
    }
}

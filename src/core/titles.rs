//! Page titles (issue 33): what the supervisor page shows of each page besides its URL.
//!
//! Chromium has a target's title in its `targetInfo`, but sends `Target.targetInfoChanged`
//! only under `Target.setDiscoverTargets`, which would report every page of the browser on
//! every task's connection. So the task asks `Target.getTargetInfo` (browser-level: a dialog
//! never blocks it) for each page it shows in `pages` (its own and the popups it follows) when
//! the page is attached and after each of its loads (`Page.loadEventFired`), and publishes the
//! title of the reply, read leniently and clipped. A new document of a page's main frame
//! clears its title until then (as Chromium's own tab shows the URL). A title a script sets
//! later shows after the next load. Nothing waits for the reply: it is applied when it comes
//! (`CallKind::PageTitle`). Without `browser.follow_popups`, `pages` is not published and no
//! title is asked for.

use serde_json::json;
use serde_json::value::RawValue;

use super::{CallKind, Command, Core, Outgoing, clip};

/// How much of a title is kept (bytes, on a character boundary).
const MAX_TITLE: usize = 1024;

impl Core {
    /// Asks the browser for the title of page `target_id` (module doc).
    pub(super) fn ask_title(&mut self, target_id: &str) {
        if !self.settings.follow_popups {
            return;
        }
        self.out.push(Outgoing::Command(Command {
            method: "Target.getTargetInfo".into(),
            params: json!({ "targetId": target_id }),
            session_id: None,
            kind: CallKind::PageTitle {
                target_id: target_id.to_string(),
            },
        }));
    }

    /// The page target of `session` when it is the session of a page `pages` shows (the
    /// task's own page or a followed one; not an iframe's, not a watched page's).
    fn shown_page(&self, session: &str) -> Option<String> {
        let shown = self.page_session_id.as_deref() == Some(session)
            || self.pages.is_followed_session(session);
        shown
            .then(|| self.sessions.get(session).map(|s| s.target_id.clone()))
            .flatten()
    }

    /// `Page.loadEventFired` on `session`: a shown page's title is asked for.
    pub(super) fn page_loaded(&mut self, session: &str) {
        if let Some(target) = self.shown_page(session) {
            self.ask_title(&target);
        }
    }

    /// A new document in the main frame of the session's own target: when that is a shown
    /// page, its old title no longer applies.
    pub(super) fn page_navigated(&mut self, session: &str) {
        if let Some(target) = self.shown_page(session) {
            self.pages.set_title(&target, String::new());
        }
    }

    /// The reply to [`Core::ask_title`] for `target_id`: its `targetInfo.title`, if it has one.
    pub(super) fn title_known(&mut self, target_id: &str, raw: &RawValue) {
        let title = serde_json::from_str::<serde_json::Value>(raw.get())
            .ok()
            .and_then(|v| {
                v.get("targetInfo")?
                    .get("title")?
                    .as_str()
                    .map(str::to_string)
            });
        if let Some(title) = title {
            self.pages.set_title(target_id, clip(title, MAX_TITLE));
        }
    }
}

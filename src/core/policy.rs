//! Which dialog blocks which call (SPEC §8): the one rule, used by the state machine for calls
//! in flight (`Core::dialog_blocks`) and by the call path for calls made while a dialog is
//! already pending (`supervisor/calls.rs`), each through its own view of the sessions
//! ([`SessionView`]: the live state, or a published [`Snapshot`]).
//!
//! # A dialog blocks its renderer, not its session
//!
//! A native dialog stops the main thread of its renderer process, and Chromium puts several
//! CDP sessions in one process. Measured on Chromium 156 (`tests/it/measure_renderers.rs`; the
//! table is in `crate::measured` and the README): an alert in a page blocks every session whose
//! document runs in that page's renderer, and no other. Sessions share a renderer exactly when
//! their documents are **same-site** (scheme-less eTLD+1; the port does not count) **and in one
//! browsing-context group**: a page, its same-site iframes (an A frame inside a B iframe inside
//! an A page is its own OOPIF session in A's process), the popups it opened without `noopener`
//! (`TargetInfo.canAccessOpener: true`) and theirs in turn. A `noopener` popup (`window.open(..,
//! 'noopener')`, `rel=noopener`) starts a group of its own although `openerId` still names its
//! opener; pages a client opens (`Target.createTarget`) are separate groups; a cross-site popup
//! or iframe runs elsewhere; a sandboxed iframe gets a process of its own.
//!
//! What CDP says that predicts it exactly: `Runtime.getIsolateId`, one V8 isolate per renderer
//! main thread (equal ids ⇔ blocked together, every measured pair). The supervisor asks each
//! page and OOPIF session for it when the session is set up, and again after each new document
//! of the session's own frame (a cross-site navigation moves a page to another process). Until
//! the answer is there (and it never comes while that renderer shows a dialog), the structural
//! rule stands in: same group and same [`site_key`]. It is deliberately coarse (the last two
//! labels of the host, scheme and port ignored, an unknown or opaque site matching any): it may
//! call two renderers one for a moment (a refused call that could have gone through), never the
//! other way round (a call that waits for its deadline). That is why it needs no public suffix
//! list: the isolate id decides whenever it is known.

pub(crate) use crate::snapshot::Renderer;
use crate::snapshot::{PendingDialog, Snapshot};

/// Whether two sessions run in one renderer process (module doc).
pub(crate) fn same_renderer(a: &Renderer, b: &Renderer) -> bool {
    match (&a.isolate, &b.isolate) {
        (Some(x), Some(y)) => x == y,
        _ => {
            a.group == b.group
                && match (&a.site, &b.site) {
                    (Some(x), Some(y)) => x == y,
                    _ => true,
                }
        }
    }
}

/// A key no finer than Chromium's site of `origin` (module doc): for a domain its last two
/// labels, for an IP address the address; `None` for an opaque or unparsable origin.
pub(crate) fn site_key(origin: &str) -> Option<String> {
    let url = url::Url::parse(origin).ok()?;
    match url.host()? {
        url::Host::Domain(d) => {
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            if d.is_empty() {
                return None;
            }
            let labels: Vec<&str> = d.rsplitn(3, '.').collect();
            Some(match labels.as_slice() {
                [tld, sld, ..] => format!("{sld}.{tld}"),
                _ => d,
            })
        }
        url::Host::Ipv4(ip) => Some(ip.to_string()),
        url::Host::Ipv6(ip) => Some(format!("[{ip}]")),
    }
}

/// What [`dialog_blocks`] needs to know about the sessions.
pub(crate) trait SessionView {
    /// The session that owns `frame_id`'s document, when the frame is known.
    fn owner_of(&self, frame_id: &str) -> Option<&str>;
    /// The renderer behind document session `sid` (`None`: a worker, or not tracked).
    fn renderer(&self, sid: &str) -> Option<Renderer>;
    /// The page whose page session is `sid` (the task's, a followed or a watched one).
    fn page_of_page_session(&self, sid: &str) -> Option<&str>;
    /// The task's page.
    fn task_page(&self) -> Option<&str>;
}

/// Whether `dialog` stands between a call of `method` on session `sid` and its reply: the call's
/// session runs in the renderer that shows the dialog (module doc), or the call is an input
/// event on the dialog's page (the browser drops input for the whole page while it shows a
/// dialog, whichever frame raised it). Which methods still answer is decided elsewhere
/// (`with_dialog_pending`, `blocks_in_flight`).
pub(crate) fn dialog_blocks(
    view: &impl SessionView,
    dialog: &PendingDialog,
    sid: &str,
    method: &str,
) -> bool {
    let owner = dialog
        .frame_id
        .as_deref()
        .and_then(|f| view.owner_of(f))
        .unwrap_or(dialog.session_id.as_str());
    if owner == sid {
        return true;
    }
    if method.starts_with("Input.") {
        let dialog_page = Some(dialog.target_id.as_str())
            .filter(|t| !t.is_empty())
            .or_else(|| view.task_page());
        if view.page_of_page_session(sid).is_some() && view.page_of_page_session(sid) == dialog_page
        {
            return true;
        }
    }
    match (view.renderer(owner), view.renderer(sid)) {
        (Some(a), Some(b)) => same_renderer(&a, &b),
        _ => false,
    }
}

/// The live state as a [`SessionView`], for calls in flight.
impl SessionView for super::Core {
    fn owner_of(&self, frame_id: &str) -> Option<&str> {
        self.frames.owner_of(frame_id)
    }

    fn renderer(&self, sid: &str) -> Option<Renderer> {
        self.renderer_of(sid)
    }

    fn page_of_page_session(&self, sid: &str) -> Option<&str> {
        if !self.is_page_session(sid) {
            return None;
        }
        self.sessions.get(sid).map(|s| s.target_id.as_str())
    }

    fn task_page(&self) -> Option<&str> {
        self.page_target_id.as_deref()
    }
}

/// A published snapshot as a [`SessionView`], for the call path.
impl SessionView for Snapshot {
    fn owner_of(&self, frame_id: &str) -> Option<&str> {
        self.frames.get(frame_id).map(|r| r.owner_session.as_str())
    }

    fn renderer(&self, sid: &str) -> Option<Renderer> {
        self.renderers.get(sid).cloned()
    }

    fn page_of_page_session(&self, sid: &str) -> Option<&str> {
        if self.page_session_id.as_deref() == Some(sid) {
            return self.page_target_id.as_deref();
        }
        self.pages
            .iter()
            .skip(1)
            .chain(self.watched_pages.iter())
            .find(|p| p.session_id == sid)
            .map(|p| p.target_id.as_str())
    }

    fn task_page(&self) -> Option<&str> {
        self.page_target_id.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(isolate: Option<&str>, group: &str, site: Option<&str>) -> Renderer {
        Renderer {
            isolate: isolate.map(str::to_string),
            group: group.into(),
            site: site.map(str::to_string),
        }
    }

    #[test]
    fn site_keys_are_never_finer_than_chromiums_sites() {
        // Measured on Chromium 156 (tests/it/measure_renderers.rs, d_what_a_site_is): same
        // site, one renderer for related pages.
        for (a, b) in [
            ("http://site-a.com:1", "http://sub.site-a.com:2"),
            ("http://foo.co.uk", "http://sub.foo.co.uk"),
            ("http://x.herokuapp.com", "http://sub.x.herokuapp.com"),
            ("http://a.localhost:1", "http://b.a.localhost:1"),
            ("http://a.internal", "http://b.a.internal"),
            ("http://127.0.0.1:1", "http://127.0.0.1:2"),
            ("https://site-a.com", "http://site-a.com"),
            ("http://SITE-A.com.", "http://site-a.com"),
        ] {
            assert_eq!(site_key(a), site_key(b), "{a} {b}");
            assert!(site_key(a).is_some(), "{a}");
        }
        // Measured different sites that the key tells apart too.
        for (a, b) in [
            ("http://site-a.com", "http://site-b.com"),
            ("http://a.localhost", "http://localhost"),
            ("http://a.internal", "http://c.internal"),
            ("http://127.0.0.1", "http://localhost"),
            ("http://[::1]:3", "http://127.0.0.1:3"),
        ] {
            assert_ne!(site_key(a), site_key(b), "{a} {b}");
        }
        // Measured different sites the coarse key calls one (a moment of over-blocking at
        // most, while no isolate id is known): private and multi-label public suffixes.
        assert_eq!(site_key("http://foo.co.uk"), site_key("http://bar.co.uk"));
        assert_eq!(
            site_key("http://x.herokuapp.com"),
            site_key("http://y.herokuapp.com")
        );
        for opaque in ["null", "", "://", "about:blank", "data:text/html,x"] {
            assert_eq!(site_key(opaque), None, "{opaque}");
        }
        assert_eq!(site_key("http://localhost:9").as_deref(), Some("localhost"));
    }

    #[test]
    fn known_isolates_decide() {
        let a = r(Some("1"), "G", Some("a.com"));
        assert!(same_renderer(&a, &r(Some("1"), "H", Some("b.com"))));
        assert!(!same_renderer(&a, &r(Some("2"), "G", Some("a.com"))));
    }

    #[test]
    fn without_an_isolate_same_group_and_site_share() {
        let a = r(Some("1"), "G", Some("a.com"));
        assert!(same_renderer(&a, &r(None, "G", Some("a.com"))));
        assert!(same_renderer(&a, &r(None, "G", None)), "unknown site");
        assert!(!same_renderer(&a, &r(None, "G", Some("b.com"))));
        assert!(!same_renderer(&a, &r(None, "H", Some("a.com"))), "noopener");
        assert!(!same_renderer(&r(None, "G", None), &r(None, "H", None)));
    }
}

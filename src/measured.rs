//! What real Chromium does, measured rather than assumed (SPEC §8, §11): which CDP methods a page
//! session still answers while a native JavaScript dialog is open on that page, which
//! domains the browser target (the browser-level connection, no `sessionId`) serves, and which
//! sessions share a renderer (so a dialog in one blocks the others: [`RENDERER_OF_A_PAGE`]).
//!
//! Measured on headless Chromium 156 (Debian `chromium` 156.0.8078.114) by
//! `tests/it/e2e_dialog_methods.rs`, which includes this very file and fails as soon as Chromium
//! stops behaving as listed here. Change the lists only together with that test.
//!
//! "Answered" means a reply (a result or a CDP error) arrived while the dialog was still open;
//! "blocked" means no reply within 1 s, and the reply came only once the dialog was gone
//! (answered, or the page reloaded). Both lists are about calls on the page's own session; the
//! browser-level connection is never blocked by a dialog (the test checks `Browser.getVersion`,
//! `Storage.getCookies`, `Target.getTargets`, `Target.getTargetInfo`, `Target.activateTarget`,
//! `Target.attachToTarget` and `Target.closeTarget` there).

/// Methods measured to answer on a page session while a dialog is open on that page.
///
/// Measured by `tests/it/e2e_dialog_methods.rs`: `methods_answered_while_a_dialog_is_open` (all
/// of them on one page with one dialog) and `state_changing_methods_with_a_dialog_open` (one
/// fresh page and dialog each). Notes:
/// * `Page.handleJavaScriptDialog`, `Page.navigate`, `Page.reload` and `Page.close` close the
///   dialog (`Page.javascriptDialogClosed`); the others leave it open.
/// * `Input.dispatchMouseEvent` and `Input.dispatchKeyEvent` answer at once, but the event is
///   dropped: the page never sees it, not even after the dialog closes. (`Input.insertText` and
///   `Input.dispatchTouchEvent` are blocked instead, and delivered once the dialog closes.)
pub(crate) const ANSWERED_WITH_DIALOG_OPEN: &[&str] = &[
    "Browser.getVersion",
    "Browser.setDownloadBehavior",
    "Emulation.setGeolocationOverride",
    "Fetch.disable",
    "Fetch.enable",
    "Input.dispatchKeyEvent",
    "Input.dispatchMouseEvent",
    "Input.setIgnoreInputEvents",
    "Inspector.enable",
    "Network.clearBrowserCache",
    "Network.getAllCookies",
    "Network.getCookies",
    "Network.setCookie",
    "Page.bringToFront",
    "Page.close",
    "Page.getNavigationHistory",
    "Page.handleJavaScriptDialog",
    "Page.navigate",
    "Page.reload",
    "Page.stopLoading",
    "Security.enable",
    "ServiceWorker.enable",
    "Storage.getCookies",
    "Target.activateTarget",
    "Target.getTargetInfo",
    "Target.getTargets",
    "Target.setDiscoverTargets",
];

/// Methods measured to hang on a page session while a dialog is open on that page.
///
/// Measured by `tests/it/e2e_dialog_methods.rs` (`methods_answered_while_a_dialog_is_open`,
/// `state_changing_methods_with_a_dialog_open`). Their replies are not lost: each arrives right
/// after the dialog is answered (after `Page.javascriptDialogClosed`), except for three methods
/// that also act on the dialog:
/// * `Page.disable` makes the open dialog unanswerable (`Page.handleJavaScriptDialog` then
///   fails with `No dialog is showing`); a `Page.reload` clears the page, and then the
///   `Page.disable` reply arrives;
/// * `Page.crash` crashes the renderer at once (`Page.javascriptDialogClosed`,
///   `Inspector.targetCrashed`), but its reply (`Target crashed`) only comes after a
///   `Page.reload`;
/// * `Target.closeTarget` sent on the page's own session closes the page (and the dialog), but
///   its reply never comes: it is lost with the session. Without a dialog it does come; on the
///   browser connection it comes either way.
pub(crate) const BLOCKED_BY_DIALOG: &[&str] = &[
    "Accessibility.enable",
    "Accessibility.getFullAXTree",
    "Audits.enable",
    "CSS.enable",
    "Console.enable",
    "DOM.describeNode",
    "DOM.enable",
    "DOM.getDocument",
    "DOM.getOuterHTML",
    "DOM.querySelector",
    "DOM.resolveNode",
    "DOMSnapshot.captureSnapshot",
    "Debugger.enable",
    "Emulation.setDeviceMetricsOverride",
    "Emulation.setEmulatedMedia",
    "Emulation.setFocusEmulationEnabled",
    "Emulation.setTimezoneOverride",
    "Emulation.setUserAgentOverride",
    "HeapProfiler.enable",
    "Input.dispatchTouchEvent",
    "Input.insertText",
    "Log.clear",
    "Log.enable",
    "Memory.getDOMCounters",
    "Network.emulateNetworkConditions",
    "Network.enable",
    "Network.setCacheDisabled",
    "Network.setExtraHTTPHeaders",
    "Network.setUserAgentOverride",
    "Overlay.enable",
    "Overlay.hideHighlight",
    "Page.addScriptToEvaluateOnNewDocument",
    "Page.captureScreenshot",
    "Page.captureSnapshot",
    "Page.crash",
    "Page.createIsolatedWorld",
    "Page.disable",
    "Page.enable",
    "Page.getAppManifest",
    "Page.getFrameTree",
    "Page.getLayoutMetrics",
    "Page.getResourceTree",
    "Page.printToPDF",
    "Page.setBypassCSP",
    "Page.setInterceptFileChooserDialog",
    "Page.setLifecycleEventsEnabled",
    "Performance.enable",
    "Performance.getMetrics",
    "Profiler.enable",
    "Runtime.addBinding",
    "Runtime.callFunctionOn",
    "Runtime.disable",
    "Runtime.enable",
    "Runtime.evaluate",
    "Runtime.getHeapUsage",
    "Runtime.getProperties",
    "Runtime.releaseObject",
    "Runtime.runIfWaitingForDebugger",
    "Runtime.terminateExecution",
    "Target.closeTarget",
    "Target.setAutoAttach",
];

/// Which CDP sessions run in the renderer process of a page P on site A, so that a native
/// dialog in one blocks calls on the others (SPEC §8; the rule is `crate::core::policy`).
///
/// Measured on headless Chromium 156 (Debian `chromium` 156.0.8078.114) by
/// `tests/it/measure_renderers.rs` (ignored; run it with `--ignored --nocapture`): in a private
/// Chromium with every host name resolved to the loopback test server, each scenario follows
/// every page and OOPIF the way the supervisor does, then raises an `alert` in each session in
/// turn and sends `Runtime.evaluate "1"` on every session: blocked = no answer within 700 ms and
/// the answer right after the alert closed. 284 ordered pairs in four scenarios (popups of every
/// kind; popups of popups and client-opened tabs; A-B-A, sandboxed, subdomain and cross-site
/// frames; what a site is). In every pair, "blocked" was exactly "same `Runtime.getIsolateId`".
/// Asserted on Chromium by `tests/it/e2e_popups.rs` and `tests/it/e2e_blocked_calls.rs`
/// (`assert_renderers`), which check the supervisor's decisions against these rows.
///
/// Each row: a session, relative to P, and whether it runs in P's renderer. The rule they
/// follow: same site (scheme-less eTLD+1 with private suffixes, ports ignored; an unknown TLD's
/// last two labels; an IP address) and one browsing-context group (openers that can script each
/// other: `TargetInfo.canAccessOpener`, false for `noopener` although `openerId` is set).
#[allow(dead_code)] // documentation of what `crate::core::policy` relies on, asserted by the e2e tests
pub(crate) const RENDERER_OF_A_PAGE: &[(&str, bool)] = &[
    ("popup of P, same origin (window.open)", true),
    ("popup of P, same site on a subdomain (sub.a.com)", true),
    ("popup of P, same host on another port", true),
    ("about:blank popup of P (window.open(''))", true),
    ("popup of a same-site popup of P", true),
    (
        "A iframe inside a B iframe inside P (its own OOPIF session)",
        true,
    ),
    ("same-site iframe of P on a subdomain (P's session)", true),
    (
        "sub.foo.co.uk popup of foo.co.uk; b.a.localhost popup of a.localhost",
        true,
    ),
    ("popup of P, cross-site (b.com)", false),
    ("B iframe of P (its OOPIF session)", false),
    ("popup of P, same site, window.open(.., 'noopener')", false),
    (
        "popup of P, same site, <a rel=noopener target=_blank>",
        false,
    ),
    ("about:blank popup of P with noopener", false),
    (
        "popup of a noopener popup of P (shares the noopener popup's renderer)",
        false,
    ),
    (
        "same-site page opened by a client (Target.createTarget)",
        false,
    ),
    (
        "sandboxed same-site iframe of P (allow-scripts allow-modals; its own OOPIF session)",
        false,
    ),
    (
        "bar.co.uk popup of foo.co.uk; y.herokuapp.com popup of x.herokuapp.com",
        false,
    ),
    (
        "localhost popup of 127.0.0.1; c.internal popup of a.internal",
        false,
    ),
];

/// Domains the browser target serves: every probed method of these domains answers on the
/// browser-level connection (a result or an error other than `-32601 '<method>' wasn't found`),
/// except the methods in [`BROWSER_UNSERVED`].
///
/// Measured by `tests/it/e2e_dialog_methods.rs::domains_served_by_the_browser_target`, which sends
/// every method of the protocol (from `/json/protocol`) that is safe to send: with empty params
/// when it has a required parameter (so it fails validation and does nothing), or a `get*`/
/// `disable` method. Every other domain answers `-32601 "'<method>' wasn't found"` there, except
/// a few methods listed in [`BROWSER_PARTIAL`].
///
/// A page session serves these domains too, except `BluetoothEmulation` and `Tethering`, with
/// a different scope (e.g. `Fetch.enable` there intercepts that page's requests only); but
/// there `SystemInfo.getInfo`/`getProcessInfo` fail ("only supported on the browser target"),
/// `Target.getBrowserContexts` fails ("Not allowed") and `Extensions.getExtensions` fails
/// ("Method not available.").
pub(crate) const BROWSER_DOMAINS: &[&str] = &[
    "BluetoothEmulation",
    "Browser",
    "Extensions",
    "Fetch",
    "Security",
    "Storage",
    "SystemInfo",
    "Target",
    "Tethering",
    "Tracing",
];

/// Methods of [`BROWSER_DOMAINS`] that the browser target does not serve (`wasn't found`); they
/// are page-session methods. Measured by
/// `tests/it/e2e_dialog_methods.rs::domains_served_by_the_browser_target`.
pub(crate) const BROWSER_UNSERVED: &[&str] = &[
    "Storage.clearPrivateVerificationTokens",
    "Storage.deletePrivateVerificationToken",
    "Storage.getPrivateVerificationTokens",
    "Storage.getPrivateVerificationTokensIssuerConfigs",
    "Storage.getRelatedWebsiteSets",
    "Storage.runBounceTrackingMitigations",
    "Storage.setPrivateVerificationTokensTracking",
];

/// Methods of [`BROWSER_UNSERVED`] that some Chromium builds serve on the browser target and
/// others do not (`Storage.getRelatedWebsiteSets`: served by 156, `wasn't found` on 148). A
/// page session serves them on both, so they are routed to the page.
#[allow(dead_code)] // documentation, asserted by tests/it/e2e_dialog_methods.rs
pub(crate) const BROWSER_VARIES: &[&str] = &["Storage.getRelatedWebsiteSets"];

/// The only methods of other domains that the browser target serves; the rest of their domain
/// it does not (`wasn't found`). They are page methods all the same ([`browser_domain`] is
/// false for them): a page session serves each of them too, and `IO` stream handles belong to
/// the session that opened the stream. Measured by
/// `tests/it/e2e_dialog_methods.rs::domains_served_by_the_browser_target`.
#[allow(dead_code)] // documentation, asserted by tests/it/e2e_dialog_methods.rs
pub(crate) const BROWSER_PARTIAL: &[&str] = &[
    "Emulation.addScreen",
    "Emulation.getScreenInfos",
    "Emulation.removeScreen",
    "Emulation.setAutomationOverride",
    "Emulation.setPrimaryScreen",
    "Emulation.updateScreen",
    "IO.close",
    "IO.read",
    "Memory.getBrowserSamplingProfile",
    "Memory.setPressureNotificationsSuppressed",
    "Memory.simulatePressureNotification",
    "Runtime.runIfWaitingForDebugger",
];

/// Whether Chromium answers `method` on a page session while a dialog is open there:
/// `Some(true)` measured to answer ([`ANSWERED_WITH_DIALOG_OPEN`]), `Some(false)` measured to
/// hang until the dialog is gone ([`BLOCKED_BY_DIALOG`]), `None` not measured.
pub(crate) fn answered_with_dialog_open(method: &str) -> Option<bool> {
    // The lists are sorted (tested below): every call a client sends is looked up here.
    if ANSWERED_WITH_DIALOG_OPEN.binary_search(&method).is_ok() {
        Some(true)
    } else if BLOCKED_BY_DIALOG.binary_search(&method).is_ok() {
        Some(false)
    } else {
        None
    }
}

/// Whether `method` (`Domain.method`) belongs to a domain the browser target serves
/// ([`BROWSER_DOMAINS`]) and is not one of its exceptions ([`BROWSER_UNSERVED`]).
pub(crate) fn browser_domain(method: &str) -> bool {
    method
        .split_once('.')
        .is_some_and(|(domain, _)| BROWSER_DOMAINS.contains(&domain))
        && !BROWSER_UNSERVED.contains(&method)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_sorted_and_disjoint() {
        for list in [
            ANSWERED_WITH_DIALOG_OPEN,
            BLOCKED_BY_DIALOG,
            BROWSER_DOMAINS,
            BROWSER_UNSERVED,
            BROWSER_PARTIAL,
            BROWSER_VARIES,
        ] {
            assert!(list.windows(2).all(|w| w[0] < w[1]), "{list:?}");
        }
        for m in ANSWERED_WITH_DIALOG_OPEN {
            assert!(!BLOCKED_BY_DIALOG.contains(m), "{m}");
        }
        for m in BROWSER_VARIES {
            assert!(BROWSER_UNSERVED.contains(m), "{m}");
        }
    }

    #[test]
    fn lookups() {
        assert_eq!(answered_with_dialog_open("Page.navigate"), Some(true));
        assert_eq!(answered_with_dialog_open("Runtime.evaluate"), Some(false));
        assert_eq!(answered_with_dialog_open("Page.notAMethod"), None);
        assert!(browser_domain("Target.getTargets"));
        assert!(browser_domain("Storage.getCookies"));
        assert!(!browser_domain("Storage.runBounceTrackingMitigations"));
        assert!(!browser_domain("Runtime.runIfWaitingForDebugger"));
        assert!(!browser_domain("Page.navigate"));
        assert!(!browser_domain("Target"));
    }
}

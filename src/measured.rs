//! Provisional: replaced by the measured tables.
pub(crate) const ANSWERED_WITH_DIALOG_OPEN: &[&str] = &[
    "Page.handleJavaScriptDialog",
    "Page.navigate",
    "Page.reload",
    "Page.close",
];
pub(crate) const BLOCKED_BY_DIALOG: &[&str] = &["Runtime.evaluate"];
pub(crate) const BROWSER_DOMAINS: &[&str] = &[
    "Browser",
    "Target",
    "Storage",
    "SystemInfo",
    "Tethering",
    "Tracing",
    "IO",
];

pub(crate) fn answered_with_dialog_open(method: &str) -> Option<bool> {
    if ANSWERED_WITH_DIALOG_OPEN.contains(&method) {
        Some(true)
    } else if BLOCKED_BY_DIALOG.contains(&method) {
        Some(false)
    } else {
        None
    }
}

pub(crate) fn browser_domain(method: &str) -> bool {
    let domain = method.split('.').next().unwrap_or("");
    BROWSER_DOMAINS.contains(&domain)
}

//! Each task as a 2026-07-28 resource: `cdp-supervisor://tasks/{task_id}` (the task id
//! percent-encoded), whose contents are the task's `browser_snapshot` JSON. It exists so that a
//! client can subscribe to a task through `subscriptions/listen` (`resourceSubscriptions`),
//! the one way 2026-07-28 gives a server to push events: the listener gets
//! `notifications/resources/updated` when a dialog opens, the connection drops or comes back,
//! or the supervisor starts or ends (`notify`), then reads the resource.
//!
//! `resources/list` is empty and stays so: the spec forbids a list that changes as a side effect
//! of other requests (tasks come and go with `browser_connect`), and over HTTP a task id is the
//! capability to a client's task, so no listing may show it. The template names the form.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use serde_json::{Value, json};

use crate::registry::SupervisorRegistry;

/// Every task's URI starts with this.
pub(crate) const PREFIX: &str = "cdp-supervisor://tasks/";

/// The URI template of a task.
pub(crate) const TEMPLATE: &str = "cdp-supervisor://tasks/{task_id}";

/// What stays unescaped in a task's URI: RFC 3986 unreserved characters.
const ESCAPED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The URI of task `task`.
pub(crate) fn uri(task: &str) -> String {
    format!("{PREFIX}{}", utf8_percent_encode(task, ESCAPED))
}

/// The task a URI names, if it is a task's URI with a valid task id.
pub(crate) fn task_of(uri: &str) -> Option<String> {
    let encoded = uri.strip_prefix(PREFIX)?;
    let task = percent_decode_str(encoded).decode_utf8().ok()?;
    SupervisorRegistry::check_task_id(&task).ok()?;
    Some(task.into_owned())
}

/// The `resourceTemplates` of `resources/templates/list`.
pub(crate) fn templates() -> Value {
    json!([{
        "uriTemplate": TEMPLATE,
        "name": "task",
        "title": "A task's dialogs, frames and connection state",
        "description": "The browser_snapshot JSON of the task (its task_id percent-encoded in the URI): pending and recent JS dialogs, the frame tree, the supervisor's state (active, reconnecting, stopped, dead with the reason). Subscribe to it with subscriptions/listen (resourceSubscriptions) to hear when a dialog opens, the connection drops or comes back, or the supervisor starts or ends.",
        "mimeType": "application/json",
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_uris_round_trip_every_valid_task_id_and_refuse_the_rest() {
        for task in ["default", "t-1.x_~", "a b/c?d#e%f", "Zoë", "日本"] {
            let u = uri(task);
            assert!(u.starts_with(PREFIX), "{u}");
            assert!(!u[PREFIX.len()..].contains(['/', '?', '#', ' ']), "{u}");
            assert_eq!(task_of(&u).as_deref(), Some(task), "{u}");
        }
        assert_eq!(uri("default"), "cdp-supervisor://tasks/default");
        for bad in [
            "cdp-supervisor://tasks/",
            "cdp-supervisor://tasks/%00",
            "cdp-supervisor://tasks/%ff",
            "cdp-supervisor://other/default",
            "file:///etc/passwd",
            "",
        ] {
            assert_eq!(task_of(bad), None, "{bad}");
        }
    }
}

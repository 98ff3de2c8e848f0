//! What the task created through raw calls (issue 28): the pages (`Target.createTarget`) and
//! browser contexts (`Target.createBrowserContext`) the browser answered with, which
//! `security.isolate_tasks` counts as the task's own (`crate::security::isolation`).
//!
//! Recorded when the reply arrives: the reader publishes before it hands the reply over, so
//! the caller's next call already reaches what it created. Closed pages are not forgotten (no
//! event says so on this connection; a target id is never reused); past [`CREATED_MAX`] of a
//! kind the oldest is (logged once), so the record stays bounded.

use std::collections::VecDeque;
use std::sync::Arc;

use log::warn;
use serde_json::{Value, json};

use super::{CallKind, Command, Core, Outgoing};

/// What the snapshot shows: (page target ids, browser context ids), oldest first.
pub(crate) type Published = (Arc<[String]>, Arc<[String]>);

/// Pages (and, apart, browser contexts) remembered per task.
pub(crate) const CREATED_MAX: usize = 1024;

/// The record (module doc). Owned by the reader thread.
#[derive(Debug, Default)]
pub(crate) struct Created {
    /// Page target ids, oldest first.
    targets: VecDeque<String>,
    /// Browser context ids, oldest first.
    contexts: VecDeque<String>,
    /// The pages among `targets` that clients of the task's CDP endpoint created, which the
    /// task follows, oldest first: attached again after a reconnect
    /// ([`Core::readopt_created`]), forgotten once they are gone.
    adopted: VecDeque<String>,
    /// Something was forgotten for [`CREATED_MAX`] (logged once).
    forgot: bool,
    /// The published lists are out of date.
    changed: bool,
}

impl Created {
    /// Records what the reply `result` of a call of `method` created; true the first time an
    /// old entry had to be forgotten for it.
    fn note(&mut self, method: &str, result: &Value) -> bool {
        let (list, key) = match method {
            "Target.createTarget" => (&mut self.targets, "targetId"),
            "Target.createBrowserContext" => (&mut self.contexts, "browserContextId"),
            _ => return false,
        };
        let Some(id) = result.get(key).and_then(Value::as_str) else {
            return false;
        };
        let full = list.len() >= CREATED_MAX;
        if full {
            list.pop_front();
        }
        list.push_back(id.to_string());
        self.changed = true;
        full && !std::mem::replace(&mut self.forgot, true)
    }

    /// The lists (targets, contexts) when they changed since the last call.
    pub(crate) fn take_published(&mut self) -> Option<Published> {
        std::mem::take(&mut self.changed).then(|| self.published())
    }

    /// Page `target_id` (which a client created) is to be followed, now and after each
    /// reconnect.
    fn adopt(&mut self, target_id: &str) {
        if self.adopted.len() >= CREATED_MAX {
            self.adopted.pop_front();
        }
        self.adopted.push_back(target_id.to_string());
    }

    /// Page `target_id` is gone: it is not attached again.
    pub(crate) fn forget_adopted(&mut self, target_id: &str) {
        self.adopted.retain(|t| t != target_id);
    }

    /// Whether page `target_id` is one a client created, which the task follows.
    pub(crate) fn is_adopted(&self, target_id: &str) -> bool {
        self.adopted.iter().any(|t| t == target_id)
    }

    /// Whether the task created page `target_id`.
    pub(crate) fn has_target(&self, target_id: &str) -> bool {
        self.targets.iter().any(|t| t == target_id)
    }

    /// The lists (targets, contexts) as the snapshot shows them.
    pub(crate) fn published(&self) -> Published {
        (
            self.targets.iter().cloned().collect(),
            self.contexts.iter().cloned().collect(),
        )
    }
}

impl Core {
    /// A page a client of the task's CDP endpoint created (`Target.createTarget`, answered)
    /// joins the task: recorded as created, and attached to on the task's connection, where
    /// [`Core::browser_target_attached`] follows it like a popup (dialogs, frames).
    pub(crate) fn adopt_created(&mut self, target_id: &str) {
        if self.created.is_adopted(target_id) {
            return;
        }
        // A page the task's own call created (the endpoint's `/json/new`) is recorded already.
        if !self.created.has_target(target_id) {
            self.note_created("Target.createTarget", &json!({ "targetId": target_id }));
        }
        self.created.adopt(target_id);
        self.attach_adopted(target_id);
    }

    /// The task's page is attached again after a reconnect: the pages its clients created are
    /// attached again too (a reconnect forgets every followed page, `reset_for_reconnect`) and
    /// followed as before. They still exist unless the browser restarted or they were closed
    /// meanwhile: then the attach fails and the page is forgotten.
    pub(super) fn readopt_created(&mut self) {
        let adopted: Vec<String> = self.created.adopted.iter().cloned().collect();
        for target_id in adopted {
            self.attach_adopted(&target_id);
        }
    }

    /// Attaches to `target_id`, a page a client created; forgotten when that fails.
    fn attach_adopted(&mut self, target_id: &str) {
        self.out.push(Outgoing::Command(Command {
            method: "Target.attachToTarget".into(),
            params: json!({"targetId": target_id, "flatten": true}),
            session_id: None,
            kind: CallKind::AdoptPage {
                target_id: target_id.to_string(),
            },
        }));
    }

    /// A call of `method` was answered `result`: records what it created (module doc).
    pub(super) fn note_created(&mut self, method: &str, result: &Value) {
        if self.created.note(method, result) {
            warn!(
                "task {}: it created more than {CREATED_MAX} pages or browser contexts; the \
                 oldest are no longer counted as its own (security.isolate_tasks)",
                self.task_id
            );
        }
    }
}

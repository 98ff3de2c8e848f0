//! The snapshot's JSON (SPEC §10): what `browser_snapshot` returns and a host merges into its
//! page snapshot. It is LLM-visible: CDP session ids never appear in it (they are routing
//! details the Rust [`Snapshot`] keeps).

use serde_json::{Map, Value, json};

use super::{
    Blocked, ChooserRefused, ClosedDialog, ConsoleEntry, Download, FileChooser, FrameEntry,
    FrameTree, PageInfo, PendingDialog, Snapshot, SupervisorState,
};

impl PendingDialog {
    /// SPEC §10 shape.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("default_prompt".into(), json!(self.default_prompt));
        dialog_fields(self, &mut m);
        Value::Object(m)
    }
}

impl ClosedDialog {
    /// SPEC §10 shape: the dialog as it was pending (without its default prompt), and how it
    /// closed.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("closed_at".into(), json!(self.closed_at));
        m.insert("closed_by".into(), json!(self.closed_by.as_str()));
        dialog_fields(&self.dialog, &mut m);
        Value::Object(m)
    }
}

/// The fields a pending and a closed dialog share.
fn dialog_fields(d: &PendingDialog, m: &mut Map<String, Value>) {
    m.insert("id".into(), json!(d.id));
    m.insert("type".into(), json!(d.kind.as_str()));
    m.insert("message".into(), json!(d.message));
    m.insert("opened_at".into(), json!(d.opened_at));
    if let Some(f) = &d.frame_id {
        m.insert("frame_id".into(), json!(f));
    }
    if !d.origin.is_empty() {
        m.insert("origin".into(), json!(d.origin));
    }
    if !d.target_id.is_empty() {
        m.insert("target_id".into(), json!(d.target_id));
    }
}

impl FrameEntry {
    /// SPEC §10 shape.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("frame_id".into(), json!(self.frame_id));
        m.insert("url".into(), json!(self.url));
        m.insert("origin".into(), json!(self.origin));
        m.insert("is_oopif".into(), json!(self.is_oopif));
        if let Some(p) = &self.parent_frame_id {
            m.insert("parent_frame_id".into(), json!(p));
        }
        if let Some(n) = &self.name {
            m.insert("name".into(), json!(n));
        }
        if self.crashed {
            m.insert("crashed".into(), json!(true));
        }
        Value::Object(m)
    }
}

impl FrameTree {
    /// SPEC §10 shape.
    pub fn to_json(&self) -> Value {
        json!({
            "top": self.top.as_ref().map(FrameEntry::to_json),
            "children": self.children.iter().map(FrameEntry::to_json).collect::<Vec<_>>(),
            "truncated": self.truncated,
        })
    }
}

impl ConsoleEntry {
    /// `{ts, level, text, url, frame_id?}`.
    pub fn to_json(&self) -> Value {
        let mut v = json!({"ts": self.ts, "level": self.level, "text": self.text, "url": self.url});
        if let Some(f) = &self.frame_id {
            v["frame_id"] = json!(f);
        }
        v
    }
}

impl Blocked {
    /// `{reason, hint, frame_id?, target_id?, target_ids?}`: `target_ids` when the reason
    /// names pages, and `target_id` too when it names exactly one (SPEC §8).
    pub fn to_json(&self) -> Value {
        let mut v = json!({"reason": self.reason.as_str(), "hint": self.hint});
        if let Some(f) = &self.frame_id {
            v["frame_id"] = json!(f);
        }
        if let [one] = self.target_ids.as_slice() {
            v["target_id"] = json!(one);
        }
        if !self.target_ids.is_empty() {
            v["target_ids"] = json!(self.target_ids);
        }
        v
    }
}

impl PageInfo {
    /// SPEC §10 shape.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("target_id".into(), json!(self.target_id));
        m.insert("url".into(), json!(self.url));
        if !self.title.is_empty() {
            m.insert("title".into(), json!(self.title));
        }
        m.insert("opener_target_id".into(), json!(self.opener_target_id));
        Value::Object(m)
    }
}

impl Download {
    /// `{guid, url, suggested_filename, state, received_bytes, total_bytes?, path?}` (SPEC §10).
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "guid": self.guid,
            "url": self.url,
            "suggested_filename": self.suggested_filename,
            "state": self.state.as_str(),
            "received_bytes": self.received_bytes,
        });
        if let Some(t) = self.total_bytes {
            v["total_bytes"] = json!(t);
        }
        if let Some(p) = &self.path {
            v["path"] = json!(p.display().to_string());
        }
        v
    }
}

impl FileChooser {
    /// As an entry of `pending_dialogs`: `type: "file_chooser"`, its `mode`, the input's
    /// `backend_node_id`, and a `message` that says how to answer it.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("id".into(), json!(self.id));
        m.insert("type".into(), json!("file_chooser"));
        m.insert("mode".into(), json!(self.mode.as_str()));
        m.insert(
            "message".into(),
            json!(format!(
                "the page asks for {}: answer with browser_dialog {{action: \"accept\", files: \
                 [...]}} (files within security.upload_dirs) or dismiss it",
                match self.mode {
                    super::ChooserMode::Single => "one file",
                    super::ChooserMode::Multiple => "files",
                }
            )),
        );
        m.insert("opened_at".into(), json!(self.opened_at));
        m.insert("backend_node_id".into(), json!(self.backend_node_id));
        if let Some(f) = &self.frame_id {
            m.insert("frame_id".into(), json!(f));
        }
        if !self.target_id.is_empty() {
            m.insert("target_id".into(), json!(self.target_id));
        }
        Value::Object(m)
    }
}

impl ChooserRefused {
    /// `{frame_id?, mode, at, count, option, hint}`.
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "mode": self.mode.as_str(),
            "at": self.at,
            "count": self.count,
            "option": Self::OPTION,
            "hint": format!(
                "the page opened a file chooser and got no file: answering choosers with local \
                 files is off; set {} = true (and list the allowed directories in \
                 security.upload_dirs) to let the agent answer them",
                Self::OPTION
            ),
        });
        if let Some(f) = &self.frame_id {
            v["frame_id"] = json!(f);
        }
        v
    }
}

impl Snapshot {
    /// `pending_dialogs` as the JSON shows it: the dialogs, then the file choosers (SPEC §10).
    pub fn pending_json(&self) -> Vec<Value> {
        (self.pending_dialogs.iter().map(PendingDialog::to_json))
            .chain(self.file_choosers.iter().map(FileChooser::to_json))
            .collect()
    }

    /// The fields a host merges into its page snapshot (SPEC §10).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("pending_dialogs".into(), Value::Array(self.pending_json()));
        if !self.recent_dialogs.is_empty() {
            m.insert(
                "recent_dialogs".into(),
                Value::Array(self.recent_dialogs.iter().map(|c| c.to_json()).collect()),
            );
        }
        m.insert("frame_tree".into(), self.frame_tree.to_json());
        if let Some(t) = &self.page_target_id {
            m.insert("page_target_id".into(), json!(t));
        }
        if let Some(b) = &self.blocked {
            m.insert("blocked".into(), b.to_json());
        }
        if self.crashed {
            m.insert("crashed".into(), json!(true));
        }
        if !self.pages.is_empty() {
            m.insert(
                "pages".into(),
                Value::Array(self.pages.iter().map(PageInfo::to_json).collect()),
            );
        }
        if self.pages_truncated {
            m.insert("pages_truncated".into(), json!(true));
        }
        if !self.downloads.is_empty() {
            m.insert(
                "downloads".into(),
                Value::Array(self.downloads.iter().map(|d| d.to_json()).collect()),
            );
        }
        if let Some(r) = &self.file_chooser_refused {
            m.insert("file_chooser_refused".into(), r.to_json());
        }
        if let Some(old) = &self.page_replaced {
            m.insert(
                "page_replaced".into(),
                json!({"old_target_id": old, "reason": "the task's own page was gone after a \
                       reconnect: a new page was made (page_target_id)"}),
            );
        }
        if !self.console_errors.is_empty() {
            m.insert(
                "console_errors".into(),
                Value::Array(self.console_errors.iter().map(|c| c.to_json()).collect()),
            );
        }
        m.insert("state".into(), json!(self.state.as_str()));
        match &self.state {
            SupervisorState::Reconnecting { attempt, of } => {
                m.insert("attempt".into(), json!(attempt));
                m.insert("of".into(), json!(of));
                if let Some(r) = &self.disconnect_reason {
                    m.insert("reason".into(), json!(r));
                }
            }
            SupervisorState::Dead { reason } => {
                m.insert("reason".into(), json!(reason));
            }
            SupervisorState::Active | SupervisorState::Stopped => {}
        }
        Value::Object(m)
    }
}

//! The console ring (SPEC §13): console errors, warnings and uncaught exceptions, newest last,
//! at most `limits.console_errors_max`; [`Console`] owns it and publishes it, and the
//! `Runtime` events that feed it are decoded here.

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::Value;
use serde_json::value::RawValue;

use super::{Core, MAX_TEXT, clip};
use crate::clock::Now;
use crate::protocol;
use crate::snapshot::ConsoleEntry;

/// The ring. Each entry is shared between snapshots, so publishing after one more entry costs
/// reference counts, not copies.
#[derive(Debug)]
pub(crate) struct Console {
    ring: VecDeque<Arc<ConsoleEntry>>,
    max: usize,
    /// The published ring is out of date.
    changed: bool,
}

impl Console {
    /// An empty ring of at most `max` entries.
    pub fn new(max: usize) -> Console {
        Console {
            ring: VecDeque::new(),
            max,
            changed: true,
        }
    }

    /// Adds `entry`, dropping the oldest ones past the cap.
    pub fn push(&mut self, entry: ConsoleEntry) {
        while self.ring.len() >= self.max {
            self.ring.pop_front();
        }
        self.ring.push_back(Arc::new(entry));
        self.changed = true;
    }

    /// When it changed: the ring as published.
    pub fn take_published(&mut self) -> Option<Arc<[Arc<ConsoleEntry>]>> {
        std::mem::take(&mut self.changed).then(|| self.published())
    }

    /// The ring, oldest first.
    pub fn published(&self) -> Arc<[Arc<ConsoleEntry>]> {
        self.ring.iter().cloned().collect()
    }
}

impl Core {
    fn push_console(
        &mut self,
        level: &str,
        text: String,
        url: String,
        frame: Option<(&str, i64)>,
        now: Now,
    ) {
        let frame_id = frame.and_then(|(s, ctx)| self.frames.frame_of_context(s, ctx));
        self.console.push(ConsoleEntry {
            ts: now.epoch,
            level: level.to_string(),
            text: clip(text, MAX_TEXT),
            url: clip(url, MAX_TEXT),
            frame_id,
        });
    }

    pub(super) fn console_api(&mut self, session: &str, params: Option<&RawValue>, now: Now) {
        #[derive(serde::Deserialize, Default)]
        #[serde(default, rename_all = "camelCase")]
        struct Call {
            #[serde(rename = "type")]
            kind: String,
            args: Vec<Value>,
            stack_trace: Option<Value>,
            execution_context_id: Option<i64>,
        }
        let Some(call) = protocol::decode::<Call>(params) else {
            return;
        };
        let level = match call.kind.as_str() {
            "error" | "assert" | "warning" => call.kind.as_str(),
            _ => return,
        };
        let text = call
            .args
            .iter()
            .map(remote_object_text)
            .collect::<Vec<_>>()
            .join(" ");
        let url = call
            .stack_trace
            .as_ref()
            .and_then(|s| s.get("callFrames")?.get(0)?.get("url")?.as_str())
            .unwrap_or("")
            .to_string();
        let level = level.to_string();
        let frame = call.execution_context_id.map(|c| (session, c));
        self.push_console(&level, text, url, frame, now);
    }

    pub(super) fn exception_thrown(&mut self, session: &str, params: Option<&RawValue>, now: Now) {
        let Some(v) = protocol::decode::<Value>(params) else {
            return;
        };
        let d = &v["exceptionDetails"];
        let text = d["exception"]["description"]
            .as_str()
            .or_else(|| d["text"].as_str())
            .unwrap_or("uncaught exception")
            .to_string();
        let url = d["url"].as_str().unwrap_or("").to_string();
        let frame = d["executionContextId"].as_i64().map(|c| (session, c));
        self.push_console("exception", text, url, frame, now);
    }
}

fn remote_object_text(v: &Value) -> String {
    match v.get("value") {
        Some(Value::String(s)) => s.clone(),
        Some(other) if !other.is_null() => other.to_string(),
        _ => v
            .get("description")
            .and_then(Value::as_str)
            .or_else(|| v.get("type").and_then(Value::as_str))
            .unwrap_or("")
            .to_string(),
    }
}

//! The console ring (SPEC §13).

use super::*;

impl Core {
    // ---------------------------------------------------------------- console

    pub(super) fn push_console(
        &mut self,
        level: &str,
        text: String,
        url: String,
        frame: Option<(&str, i64)>,
        now: Now,
    ) {
        let frame_id = frame.and_then(|(s, ctx)| self.frames.frame_of_context(s, ctx));
        let max = self.settings.limits.console_errors_max;
        while self.console.len() >= max {
            self.console.pop_front();
        }
        self.console.push_back(Arc::new(ConsoleEntry {
            ts: now.epoch,
            level: level.to_string(),
            text: clip(text, MAX_TEXT),
            url: clip(url, MAX_TEXT),
            frame_id,
        }));
        self.console_changed = true;
        self.dirty = true;
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

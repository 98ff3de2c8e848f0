//! The Model Context Protocol server (SPEC §15): JSON-RPC 2.0 over stdio, one message per line.
//!
//! Methods: `initialize`, `notifications/initialized` (and any other notification: no answer),
//! `ping`, `tools/list`, `tools/call`. Tools: `browser_connect`, `browser_snapshot`,
//! `browser_dialog`, `browser_cdp`, `browser_disconnect`, each with an optional `task_id`
//! (default `default`). Malformed JSON answers `-32700`, a message that is not a request
//! `-32600`, an unknown method `-32601`, bad params `-32602`; a tool that fails returns a result
//! with `isError: true`. Nothing here ends the server except the end of its input; stdout carries
//! protocol messages only (logs go to stderr).

use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::config::{BridgeMode, Config, DialogPolicy};
use crate::launch::{LaunchedBrowser, find_browser};
use crate::redact::redact_url;
use crate::registry::{StartOptions, SupervisorRegistry};
use crate::tools;

/// MCP protocol versions we speak, newest first.
pub const PROTOCOL_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// Longest line accepted from the client.
const MAX_LINE: usize = 16 << 20;

/// One MCP server: a registry, and a browser it launched on demand.
#[derive(Debug)]
pub struct McpServer {
    registry: Arc<SupervisorRegistry>,
    browser: Mutex<Option<LaunchedBrowser>>,
}

fn rpc_error(id: Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

fn rpc_result(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn task_schema() -> Value {
    json!({"type": "string", "description": "Which browser task (default \"default\")"})
}

/// The `tools/list` entries, with input schemas.
pub fn tool_list() -> Value {
    json!([
        {
            "name": "browser_connect",
            "description": "Attach a persistent CDP supervisor to a browser page: it catches native JS dialogs and tracks frames (including cross-origin iframes). Without cdp_url it launches a local headless Chromium.",
            "inputSchema": {"type": "object", "properties": {
                "cdp_url": {"type": "string", "description": "ws://, wss:// or http://host:port of a CDP endpoint"},
                "task_id": task_schema(),
                "target_id": {"type": "string", "description": "Attach to this page target instead of the first page"},
                "dialog_policy": {"type": "string", "enum": ["must_respond", "auto_dismiss", "auto_accept"]},
                "dialog_timeout_s": {"type": "number", "exclusiveMinimum": 0},
                "dialog_bridge": {"type": "string", "enum": ["off", "on", "auto"]}
            }, "additionalProperties": false}
        },
        {
            "name": "browser_snapshot",
            "description": "Pending JS dialogs, recently closed dialogs and the frame tree of the task's page.",
            "inputSchema": {"type": "object", "properties": {"task_id": task_schema()}, "additionalProperties": false}
        },
        {
            "name": "browser_dialog",
            "description": "Accept or dismiss a pending JS dialog (alert/confirm/prompt/beforeunload).",
            "inputSchema": {"type": "object", "properties": {
                "task_id": task_schema(),
                "action": {"type": "string", "enum": ["accept", "dismiss"]},
                "prompt_text": {"type": "string", "description": "Text a prompt() returns when accepted"},
                "dialog_id": {"type": "string", "description": "Which dialog (d-N), when several are pending"}
            }, "required": ["action"], "additionalProperties": false}
        },
        {
            "name": "browser_cdp",
            "description": "Send a raw CDP command, routed into a frame (frame_id, including cross-origin iframes), a target (target_id), or the browser (neither).",
            "inputSchema": {"type": "object", "properties": {
                "task_id": task_schema(),
                "method": {"type": "string", "description": "e.g. Runtime.evaluate"},
                "params": {"type": "object"},
                "frame_id": {"type": "string"},
                "target_id": {"type": "string"},
                "timeout_s": {"type": "number", "minimum": 1, "maximum": 300}
            }, "required": ["method"], "additionalProperties": false}
        },
        {
            "name": "browser_disconnect",
            "description": "Stop the task's supervisor (pending dialogs are dismissed first).",
            "inputSchema": {"type": "object", "properties": {"task_id": task_schema()}, "additionalProperties": false}
        }
    ])
}

impl McpServer {
    /// A server with its own registry.
    pub fn new(config: Config) -> McpServer {
        McpServer {
            registry: Arc::new(SupervisorRegistry::new(config)),
            browser: Mutex::new(None),
        }
    }

    /// The registry (for embedding and tests).
    pub fn registry(&self) -> &Arc<SupervisorRegistry> {
        &self.registry
    }

    /// Serves `input` line by line until it ends, writing answers to `output`.
    pub fn run(&self, input: impl BufRead, mut output: impl Write) -> std::io::Result<()> {
        let mut input = input;
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = std::io::Read::take(input.by_ref(), MAX_LINE as u64 + 1)
                .read_until(b'\n', &mut line)?;
            if n == 0 {
                break;
            }
            let answer = if line.len() > MAX_LINE && !line.ends_with(b"\n") {
                // Skip the rest of the oversized line.
                let mut rest = Vec::new();
                input.read_until(b'\n', &mut rest)?;
                Some(rpc_error(Value::Null, -32700, "message too large"))
            } else {
                let text = String::from_utf8_lossy(&line);
                self.handle_line(text.trim())
            };
            if let Some(a) = answer {
                writeln!(output, "{a}")?;
                output.flush()?;
            }
        }
        self.shutdown();
        Ok(())
    }

    /// Stops every supervisor and the launched browser.
    pub fn shutdown(&self) {
        self.registry.stop_all();
        drop(
            self.browser
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
        );
    }

    /// Answers one line (`None` for notifications and blank lines).
    pub fn handle_line(&self, line: &str) -> Option<Value> {
        if line.is_empty() {
            return None;
        }
        let msg: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => return Some(rpc_error(Value::Null, -32700, format!("parse error: {e}"))),
        };
        let Some(obj) = msg.as_object() else {
            return Some(rpc_error(
                Value::Null,
                -32600,
                "invalid request: expected a JSON object",
            ));
        };
        let id = obj.get("id").cloned();
        let valid_id = matches!(id, None | Some(Value::String(_)) | Some(Value::Number(_)));
        if !valid_id {
            return Some(rpc_error(
                Value::Null,
                -32600,
                "invalid request: id must be a string or number",
            ));
        }
        let Some(method) = obj.get("method").and_then(Value::as_str) else {
            // A response from the client (we send no requests) or garbage.
            return id.map(|id| rpc_error(id, -32600, "invalid request: no method"));
        };
        let Some(id) = id else {
            return None; // notification, e.g. notifications/initialized
        };
        let params = obj.get("params").cloned().unwrap_or(Value::Null);
        Some(match method {
            "initialize" => {
                let asked = params.get("protocolVersion").and_then(Value::as_str);
                let version = asked
                    .filter(|v| PROTOCOL_VERSIONS.contains(v))
                    .unwrap_or(PROTOCOL_VERSIONS[0]);
                rpc_result(
                    id,
                    json!({
                        "protocolVersion": version,
                        "capabilities": {"tools": {"listChanged": false}},
                        "serverInfo": {"name": "cdp-supervisor", "version": env!("CARGO_PKG_VERSION")},
                        "instructions": "Call browser_connect first. Read browser_snapshot before acting: a pending dialog blocks the page until browser_dialog answers it."
                    }),
                )
            }
            "ping" => rpc_result(id, json!({})),
            "tools/list" => rpc_result(id, json!({"tools": tool_list()})),
            "tools/call" => self.tools_call(id, &params),
            other => rpc_error(id, -32601, format!("method not found: {other}")),
        })
    }

    fn tools_call(&self, id: Value, params: &Value) -> Value {
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return rpc_error(
                id,
                -32602,
                "invalid params: tools/call needs a string \"name\"",
            );
        };
        let args = match params.get("arguments") {
            None | Some(Value::Null) => json!({}),
            Some(a @ Value::Object(_)) => a.clone(),
            Some(_) => {
                return rpc_error(
                    id,
                    -32602,
                    "invalid params: \"arguments\" must be an object",
                );
            }
        };
        let task = match args.get("task_id") {
            None | Some(Value::Null) => "default".to_string(),
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(_) => {
                return rpc_error(
                    id,
                    -32602,
                    "invalid params: task_id must be a non-empty string",
                );
            }
        };
        let mut tool_args = args.clone();
        if let Some(o) = tool_args.as_object_mut() {
            o.remove("task_id");
        }
        let out = match name {
            "browser_connect" => self.connect(&task, &tool_args),
            "browser_snapshot" => {
                let s = tools::browser_snapshot(&self.registry, &task, &tool_args);
                if s.as_object().is_some_and(|o| o.is_empty()) {
                    json!({"success": false, "error": format!("no live browser supervisor for task {task:?}: call browser_connect first")})
                } else {
                    s
                }
            }
            "browser_dialog" => tools::browser_dialog(&self.registry, &task, &tool_args),
            "browser_cdp" => tools::browser_cdp(&self.registry, &task, &tool_args),
            "browser_disconnect" => {
                json!({"success": true, "task_id": task, "stopped": self.registry.stop(&task)})
            }
            other => return rpc_error(id, -32602, format!("unknown tool: {other}")),
        };
        let is_error = out.get("success") == Some(&Value::Bool(false));
        rpc_result(
            id,
            json!({
                "content": [{"type": "text", "text": out.to_string()}],
                "structuredContent": out,
                "isError": is_error,
            }),
        )
    }

    fn connect(&self, task: &str, args: &Value) -> Value {
        let fail = |e: String| json!({"success": false, "error": e});
        let str_arg = |k: &str| -> Result<Option<String>, String> {
            match args.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(format!("{k} must be a string")),
            }
        };
        let parsed = (|| -> Result<(Option<String>, StartOptions), String> {
            let mut opts = StartOptions {
                target_id: str_arg("target_id")?,
                ..Default::default()
            };
            if let Some(p) = str_arg("dialog_policy")? {
                opts.dialog_policy = Some(DialogPolicy::parse(&p).map_err(|e| e.to_string())?);
            }
            if let Some(b) = str_arg("dialog_bridge")? {
                opts.dialog_bridge = Some(BridgeMode::parse(&b).map_err(|e| e.to_string())?);
            }
            match args.get("dialog_timeout_s") {
                None | Some(Value::Null) => {}
                Some(v) => match v.as_f64() {
                    Some(t) if t > 0.0 && t <= 86_400.0 => {
                        opts.dialog_timeout = Some(Duration::from_secs_f64(t))
                    }
                    _ => {
                        return Err(format!(
                            "dialog_timeout_s must be a number of seconds > 0 and <= 86400, got {v}"
                        ));
                    }
                },
            }
            Ok((str_arg("cdp_url")?, opts))
        })();
        let (url, opts) = match parsed {
            Ok(x) => x,
            Err(e) => return fail(e),
        };
        let url = match url.or_else(|| self.registry.config().cdp_url.clone()) {
            Some(u) => u,
            None => match self.launched_browser_url() {
                Ok(u) => u,
                Err(e) => return fail(e),
            },
        };
        match self.registry.get_or_start_with(task, &url, opts) {
            Ok(sup) => json!({
                "success": true,
                "task_id": task,
                "cdp_url": redact_url(&url),
                "page_target_id": sup.snapshot().page_target_id,
            }),
            Err(e) => fail(e.to_string()),
        }
    }

    fn launched_browser_url(&self) -> Result<String, String> {
        let mut b = self.browser.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = b.as_ref() {
            return Ok(b.ws_url().to_string());
        }
        let exe = find_browser(self.registry.config().chrome_path.as_deref())
            .map_err(|e| e.to_string())?
            .ok_or("no cdp_url given and no Chromium-family browser found (install chromium or set CHROME)")?;
        let launched = LaunchedBrowser::launch(&exe).map_err(|e| e.to_string())?;
        let url = launched.ws_url().to_string();
        *b = Some(launched);
        Ok(url)
    }
}

impl Drop for McpServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

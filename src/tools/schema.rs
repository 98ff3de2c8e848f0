//! The JSON Schemas of the tool table: each tool's input properties (a description on every
//! one) and the extra properties of its output (the JSON Schema of its `structuredContent`).
//!
//! Output schemas must hold for failures as well as successes (clients such as the official
//! Python SDK validate `structuredContent` against them), so only `success` is required and
//! extra fields are allowed.

use serde_json::{Value, json};

fn task_schema() -> Value {
    json!({
        "type": "string",
        "minLength": 1,
        "description": "Which browser task this call is about; each task has its own supervisor and its own tab. On stdio the default is \"default\". Over HTTP browser_connect without task_id creates a new task and returns its task_id, which every other call must pass."
    })
}

fn dialog_schema(what: &str) -> Value {
    json!({
        "type": "object",
        "description": what,
        "properties": {
            "id": {"type": "string", "description": "Dialog id (d-1, d-2, ...; a file chooser's fc-1, ...), for browser_dialog's dialog_id"},
            "type": {"type": "string", "description": "alert, confirm, prompt or beforeunload; file_chooser for a file chooser"},
            "mode": {"type": "string", "enum": ["single", "multiple"], "description": "A file chooser's: one file or several"},
            "message": {"type": "string", "description": "The text the page shows"},
            "default_prompt": {"type": "string", "description": "A prompt()'s default text"},
            "opened_at": {"type": "number", "description": "Unix epoch seconds"},
            "frame_id": {"type": "string", "description": "The frame that opened it"},
            "origin": {"type": "string", "description": "Origin of the frame that opened it: tells the page's own dialog from an embedded iframe's (an ad's)"},
            "target_id": {"type": "string", "description": "The page that opened it: the task's page (page_target_id) or a popup it follows (see pages in browser_snapshot)"}
        }
    })
}

/// The output schema of a tool: what every result carries plus `extra` properties.
pub(super) fn output_schema(extra: Value) -> Value {
    let mut props = json!({
        "success": {"type": "boolean", "description": "false when the call failed; then error says why (and isError is true)"},
        "error": {"type": "string", "description": "What went wrong and what to do about it (failures only)"},
        "pending_dialogs": {
            "type": "array",
            "description": "JS dialogs open on the task's page; present whenever one is pending. Answer them with browser_dialog.",
            "items": dialog_schema("A pending dialog")
        },
        "blocked": {
            "type": "object",
            "description": "Present when the page does not answer (a dialog no client can answer, or a busy script)",
            "properties": {
                "reason": {"type": "string", "description": "orphaned_dialog (a dialog no live client can answer), unanswerable_dialog (a dialog CDP can no longer answer), dialog_in_unfollowed_page (a dialog in a popup the supervisor does not watch freezes the page's renderer) or unresponsive (a busy script, or such a dialog)"},
                "hint": {"type": "string", "description": "What to do"},
                "frame_id": {"type": "string", "description": "The iframe that does not answer, when it is not the page itself"},
                "target_id": {"type": "string", "description": "The page to close (browser_cdp Target.closeTarget) when there is one: dialog_in_unfollowed_page's one candidate, (unresponsive) a page the task follows that has not answered since it was attached, or (orphaned_dialog) the one page the task's page opened"},
                "target_ids": {"type": "array", "items": {"type": "string"}, "description": "dialog_in_unfollowed_page: the pages the task opened and does not watch, one of which shows the dialog; unresponsive: the page the task follows that does not answer, when it is not the task's own; orphaned_dialog on the page: the pages it opened, one of which may show the dialog (close them first)"}
            }
        }
    });
    if let (Some(p), Value::Object(extra)) = (props.as_object_mut(), extra) {
        p.extend(extra);
    }
    json!({"type": "object", "properties": props, "required": ["success"]})
}

pub(super) fn connect_input() -> Value {
    json!({
        "cdp_url": {"type": "string", "description": "CDP endpoint: ws://, wss:// or http://host:port (what --remote-debugging-port prints). Omit to use the configured one, else a local Chromium launched by the server."},
        "task_id": task_schema(),
        "target_id": {"type": "string", "description": "Attach to this existing page target instead of a new tab of the task's own (refused when another task owns it, unless security.isolate_tasks is false)"},
        "dialog_policy": {"type": "string", "enum": ["must_respond", "auto_dismiss", "auto_accept"], "description": "must_respond (default): dialogs wait for browser_dialog; auto_dismiss / auto_accept: answered at once and recorded"},
        "dialog_timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 86400, "description": "With must_respond: seconds after which an unanswered dialog is dismissed (default from the configuration, 300)"},
        "dialog_bridge": {"type": "string", "enum": ["off", "on", "auto"], "description": "Dialog bridge for CDP proxies that auto-close native dialogs: auto (default) turns it on when that is detected"}
    })
}

pub(super) fn connect_output() -> Value {
    json!({
        "task_id": {"type": "string", "description": "The task connected"},
        "cdp_url": {"type": "string", "description": "The endpoint, credentials replaced by ***"},
        "page_target_id": {"type": "string", "description": "The page the supervisor attached to (for browser_cdp's target_id)"},
        "cdp_endpoint": {"type": "string", "description": "The task's CDP endpoint, a ws:// URL any CDP client (Puppeteer's browserWSEndpoint, a raw WebSocket) connects to as to the browser, carried over the task's one connection; it sees the task's pages only. Carries a secret token: do not share it"},
        "cdp_http_endpoint": {"type": "string", "description": "The same endpoint's http:// base, whose /json/version names cdp_endpoint (Playwright's connectOverCDP, Puppeteer's browserURL, chrome-devtools-mcp's --browserUrl)"}
    })
}

pub(super) fn snapshot_input() -> Value {
    json!({
        "task_id": task_schema(),
        "target_id": {"type": "string", "description": "A popup the task follows (from pages): its frame tree and dialogs instead of the task's page"}
    })
}

pub(super) fn snapshot_output() -> Value {
    json!({
        "recent_dialogs": {"type": "array", "description": "The last closed dialogs, newest last, each with closed_by (agent, auto_policy, watchdog, remote, connection_lost, client, human)", "items": {"type": "object"}},
        "frame_tree": {"type": "object", "description": "top: the main frame; children: other frames (flat, breadth-first); truncated when some were left out"},
        "page_target_id": {"type": "string", "description": "The task's page target"},
        "pages": {"type": "array", "description": "The pages the task follows: its own page first, then the popups and new tabs it (or a followed popup) opened; pass a target_id to browser_snapshot or browser_cdp", "items": {"type": "object", "properties": {
            "target_id": {"type": "string", "description": "The page target"},
            "url": {"type": "string", "description": "Its main frame's URL"},
            "title": {"type": "string", "description": "Its title, when known"},
            "opener_target_id": {"type": ["string", "null"], "description": "The page that opened it (null for the task's page)"}
        }}},
        "pages_truncated": {"type": "boolean", "description": "true when limits.pages_max left popups unfollowed"},
        "target_id": {"type": "string", "description": "With the target_id argument: the popup shown"},
        "opener_target_id": {"type": "string", "description": "With the target_id argument: the page that opened it"},
        "console_errors": {"type": "array", "description": "Recent console errors and exceptions", "items": {"type": "object"}},
        "downloads": {"type": "array", "description": "The task's downloads, newest last", "items": {"type": "object", "properties": {
            "guid": {"type": "string", "description": "The download's id"},
            "url": {"type": "string", "description": "Where it comes from"},
            "suggested_filename": {"type": "string", "description": "The file name the page suggested"},
            "state": {"type": "string", "enum": ["in_progress", "completed", "canceled"], "description": "Where it is (a failed download is canceled)"},
            "received_bytes": {"type": "integer", "description": "Bytes received"},
            "total_bytes": {"type": "integer", "description": "Its size, when known"},
            "path": {"type": "string", "description": "Once completed: the file, in the task's download directory"}
        }}},
        "file_chooser_refused": {"type": "object", "description": "The page opened a file chooser that the security policy kept from the agent: option names the setting that allows answering it"},
        "page_replaced": {"type": "object", "description": "The task's own page was gone after a reconnect and a new one was made: old_target_id names the lost page"},
        "state": {"type": "string", "enum": ["active", "reconnecting", "stopped", "dead"], "description": "The supervisor's state; reconnecting comes with attempt and of, dead with reason"},
        "handover": handover_schema()
    })
}

fn handover_schema() -> Value {
    json!({"type": "object", "description": "Present once the task has been handed over to a person (browser_handover): held, held_since, ended_holds_s, holds", "properties": handover_props()})
}

fn handover_props() -> Value {
    json!({
        "held": {"type": "boolean", "description": "A person holds the task: the agent's calls fail until it is taken back"},
        "held_since": {"type": "number", "description": "While held: when the hold began (Unix epoch seconds)"},
        "ended_holds_s": {"type": "number", "description": "Seconds the task was held in holds that have ended (add now - held_since while held for the total)"},
        "holds": {"type": "integer", "description": "How many times it has been handed over"}
    })
}

pub(super) fn handover_input() -> Value {
    json!({
        "task_id": task_schema(),
        "action": {"type": "string", "enum": ["hand_over", "take_back"], "description": "hand_over: a person takes the task (no automatic dialog answers, agent calls refused); take_back: the agent has it again"}
    })
}

pub(super) fn handover_output() -> Value {
    let mut props = json!({
        "task_id": {"type": "string", "description": "The task"},
        "action": {"type": "string", "description": "hand_over or take_back"}
    });
    if let (Some(p), Value::Object(h)) = (props.as_object_mut(), handover_props()) {
        p.extend(h);
    }
    props
}

pub(super) fn dialog_input() -> Value {
    json!({
        "task_id": task_schema(),
        "action": {"type": "string", "enum": ["accept", "dismiss"], "description": "accept (OK; confirm() returns true) or dismiss (Cancel)"},
        "prompt_text": {"type": "string", "description": "What prompt() returns when accepted (default: the prompt's default text)"},
        "dialog_id": {"type": "string", "description": "Which dialog (d-N) or file chooser (fc-N), needed when several are pending"},
        "files": {"type": "array", "items": {"type": "string"}, "description": "With accept, for a pending file chooser: the local files to give the page (absolute paths within security.upload_dirs; needs security.allow_file_access)"}
    })
}

pub(super) fn dialog_output() -> Value {
    json!({
        "action": {"type": "string", "description": "accept or dismiss"},
        "dialog": dialog_schema("The dialog that was answered"),
        "answered_dialog": dialog_schema("When the answer reached another dialog than the one named (the named one had been closed by something else): the dialog that received it")
    })
}

pub(super) fn navigate_input() -> Value {
    json!({
        "task_id": task_schema(),
        "url": {"type": "string", "minLength": 1, "description": "The address to open, e.g. https://example.com/"},
        "wait_until": {"type": "string", "enum": ["commit", "load"], "description": "commit: return once the new document replaced the old one; load (default): once its load event fired"},
        "timeout_s": {"type": "number", "minimum": 1, "maximum": 300, "description": "Seconds to wait (default 30)"}
    })
}

pub(super) fn navigate_output() -> Value {
    json!({
        "url": {"type": "string", "description": "The URL opened"},
        "frame_id": {"type": "string", "description": "The page's main frame"},
        "loader_id": {"type": ["string", "null"], "description": "The navigation's loader id (null within the document)"},
        "wait_until": {"type": "string", "description": "What was waited for"},
        "blocked_by_dialog": dialog_schema("The dialog that opened during the navigation: answer it with browser_dialog"),
        "navigation_error": {"type": "string", "description": "The browser's network error, e.g. net::ERR_NAME_NOT_RESOLVED"},
        "refused_by": {"type": "string", "description": "The security option that refused the URL"}
    })
}

pub(super) fn cdp_input() -> Value {
    json!({
        "task_id": task_schema(),
        "method": {"type": "string", "description": "CDP method, e.g. Runtime.evaluate, Page.navigate, Input.dispatchMouseEvent"},
        "params": {"type": "object", "description": "The method's parameters (default {})"},
        "frame_id": {"type": "string", "description": "Send into this frame (from browser_snapshot's frame_tree)"},
        "target_id": {"type": "string", "description": "Send to this target's session (the page_target_id, a popup from browser_snapshot's pages, or an iframe target)"},
        "timeout_s": {"type": "number", "minimum": 1, "maximum": 300, "description": "Seconds to wait for the reply (default 30)"}
    })
}

pub(super) fn cdp_output() -> Value {
    json!({
        "method": {"type": "string", "description": "The method called"},
        "routed_to": {"type": "string", "enum": ["browser", "page", "frame", "target"], "description": "Where the call went"},
        "result": {"type": "object", "description": "The CDP result"},
        "frame_id": {"type": "string", "description": "The frame it ran in"},
        "cdp_error": {"type": "object", "description": "The browser's error {code, message}"},
        "blocked_by_dialog": dialog_schema("The dialog that blocks this call: answer it with browser_dialog"),
        "cancelled": {"type": "boolean", "description": "The call was cancelled"}
    })
}

pub(super) fn disconnect_input() -> Value {
    json!({"task_id": task_schema()})
}

pub(super) fn disconnect_output() -> Value {
    json!({
        "task_id": {"type": "string", "description": "The task"},
        "stopped": {"type": "boolean", "description": "Whether a supervisor was running and is now stopped"},
        "dismissed_dialogs": {"type": "array", "description": "Dialogs that were pending and were dismissed by the stop", "items": dialog_schema("A dismissed dialog")}
    })
}

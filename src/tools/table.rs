//! The one table of tools: each tool's name, title, description, annotations, argument names,
//! input and output schemas and handler, in one [`Spec`] per tool; how a call names its task
//! ([`Tasks`]); and [`dispatch`], which runs a call the same way for every caller.
//!
//! Annotations follow one rule: a tool that acts on the web page is open-world (the page is
//! someone else's code and servers); one whose effect on the page cannot be undone (answering a
//! dialog, raw CDP, closing the task's page) is destructive.
//!
//! Every caller runs the same handlers and lends them what it has in a `Context`: the
//! registry, the browser `browser_connect` launches when no endpoint is named (the MCP server
//! has one; the Python binding and the library functions none), how a call names its task
//! ([`Tasks`]), and the call's cancel token. A handler answers with a value and never calls
//! back into its caller: the MCP engine reads a `browser_connect` result to follow the new
//! supervisor's events. The callers are the MCP engine (`mcp::engine`, for stdio and HTTP), the
//! Python binding (through [`call`], `unversioned::tools::call`) and the library functions
//! (`tools::browser_*`, through [`run`]).

use std::borrow::Cow;

use serde_json::{Value, json};

use super::args::{
    check_args, failure, no_supervisor, not_an_object, task_or_default, task_per_client,
};
use super::snapshot::{self, NoSupervisor};
use super::{
    CDP_ARGS, CONNECT_ARGS, Context, DIALOG_ARGS, DISCONNECT_ARGS, HANDOVER_ARGS, NAVIGATE_ARGS,
    SNAPSHOT_ARGS, cdp, connect, dialog, handover, navigate, schema,
};
use crate::cancel::CancelToken;
use crate::registry::SupervisorRegistry;

/// A tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tool {
    /// `browser_connect`: attach a supervisor to a browser page for a task.
    Connect,
    /// `browser_snapshot`: the task's dialogs, frames and pages.
    Snapshot,
    /// `browser_dialog`: answer a pending dialog.
    Dialog,
    /// `browser_cdp`: a raw CDP call.
    Cdp,
    /// `browser_navigate`: navigate the task's page, never waiting on a dialog.
    Navigate,
    /// `browser_disconnect`: stop the task's supervisor.
    Disconnect,
    /// `browser_handover`: a person takes the task over, or gives it back.
    Handover,
}

/// Everything about one tool.
struct Spec {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    annotations: Annotations,
    /// The arguments it takes (the keys of `input`).
    args: &'static [&'static str],
    /// The input schema's `properties`.
    input: fn() -> Value,
    /// The input schema's `required`.
    required: &'static [&'static str],
    /// The output schema's properties beyond what every result carries.
    output: fn() -> Value,
    handler: Handler,
    /// Whether its result carries the task's dialog status (`add_dialog_status`).
    dialog_status: bool,
}

/// MCP tool annotations (hints for the client; `destructiveHint` only for tools that write).
struct Annotations {
    read_only: bool,
    destructive: Option<bool>,
    idempotent: bool,
    open_world: bool,
}

/// The hints of a tool that acts on the page and what it reaches, and may undo what was there
/// (`browser_dialog`, `browser_cdp`, `browser_navigate`).
const ACTS_ON_THE_PAGE: Annotations = Annotations {
    read_only: false,
    destructive: Some(true),
    idempotent: false,
    open_world: true,
};

/// How a tool runs: its result for `task` (the caller's [`Tasks`] named it), or
/// [`NoSupervisor`] when it needs a live supervisor and the task has none.
type Handler = fn(&Context<'_>, &str, &Value) -> Result<Value, NoSupervisor>;

const CONNECT: Spec = Spec {
    name: "browser_connect",
    title: "Connect to a browser",
    description: "Attach a persistent CDP supervisor to a browser page for a task: it catches native JS dialogs (alert/confirm/prompt/beforeunload) and tracks frames, cross-origin iframes included. Without cdp_url the server launches one local headless Chromium (relaunched if it died). Each task gets a tab of its own (never a page the browser already held, unless target_id names one), closed by browser_disconnect; a task reaches only its own pages. Calling it again with the same arguments returns the same supervisor. Over HTTP, a call without task_id creates a new task with a fresh task_id (in the result): pass it to every later call.",
    annotations: Annotations {
        read_only: false,
        destructive: Some(false),
        idempotent: true,
        open_world: true,
    },
    args: CONNECT_ARGS,
    input: schema::connect_input,
    required: &[],
    output: schema::connect_output,
    handler: |ctx, task, args| Ok(connect::connect(ctx, task, args)),
    dialog_status: true,
};

const SNAPSHOT: Spec = Spec {
    name: "browser_snapshot",
    title: "Dialogs and frames of the page",
    description: "Read the task's page state without touching the page: pending JS dialogs, recently closed ones (with who closed them), the frame tree (cross-origin iframes marked is_oopif, with their frame_id for browser_cdp), recent console errors, blocked when the page does not answer, and the popups the page opened (pages; each dialog names its page by target_id). With target_id: that popup's frame tree and dialogs.",
    annotations: Annotations {
        read_only: true,
        destructive: None,
        idempotent: true,
        open_world: false,
    },
    args: SNAPSHOT_ARGS,
    input: schema::snapshot_input,
    required: &[],
    output: schema::snapshot_output,
    handler: |ctx, task, args| snapshot::view(ctx.registry, task, args).map(snapshot::as_result),
    dialog_status: true,
};

const DIALOG: Spec = Spec {
    name: "browser_dialog",
    title: "Answer a JS dialog",
    description: "Accept or dismiss a pending JS dialog (alert/confirm/prompt/beforeunload), which unblocks the page. With several pending, name one with dialog_id (ids are in pending_dialogs). A pending file chooser (type file_chooser, id fc-N) is answered with accept and files (paths within security.upload_dirs; needs security.allow_file_access), or dismissed.",
    annotations: ACTS_ON_THE_PAGE,
    args: DIALOG_ARGS,
    input: schema::dialog_input,
    required: &["action"],
    output: schema::dialog_output,
    handler: |ctx, task, args| Ok(dialog::run(ctx.registry, task, args)),
    dialog_status: true,
};

const CDP: Spec = Spec {
    name: "browser_cdp",
    title: "Raw CDP call",
    description: "Send a raw Chrome DevTools Protocol command and return its result. Routing: frame_id sends it into that frame (cross-origin iframes/OOPIFs included; Runtime.evaluate runs in the frame's context; frame ids are in browser_snapshot's frame_tree); target_id sends it to that target's session; with neither, it is routed by domain: the domains the browser target serves (Browser, Target, Storage, SystemInfo, Tethering, Tracing, Extensions, BluetoothEmulation) go to the browser, every other method (Page, Runtime, DOM, Input, Network, Fetch, ...) to the task's page. The result's routed_to says where it went. A call that a JS dialog blocks returns at once with blocked_by_dialog (the dialog) instead of hanging: answer it with browser_dialog, then retry.",
    annotations: ACTS_ON_THE_PAGE,
    args: CDP_ARGS,
    input: schema::cdp_input,
    required: &["method"],
    output: schema::cdp_output,
    handler: |ctx, task, args| Ok(cdp::run(ctx, task, args)),
    dialog_status: true,
};

const NAVIGATE: Spec = Spec {
    name: "browser_navigate",
    title: "Navigate the page",
    description: "Open a URL in the task's page (brought to the front first) and wait until the new document has committed (wait_until: commit) or loaded (load, the default). It never waits on a JS dialog: one that opens before then (an alert while the page loads, the beforeunload of the page being left) ends the call at once with blocked_by_dialog; answer it with browser_dialog. A network error (net::ERR_NAME_NOT_RESOLVED, a refused connection) is an error naming it; URLs the security policy refuses (file:, the browser's own pages) never reach the browser.",
    annotations: ACTS_ON_THE_PAGE,
    args: NAVIGATE_ARGS,
    input: schema::navigate_input,
    required: &["url"],
    output: schema::navigate_output,
    handler: |ctx, task, args| Ok(navigate::run(ctx.registry, task, args)),
    dialog_status: true,
};

const DISCONNECT: Spec = Spec {
    name: "browser_disconnect",
    title: "Disconnect a task",
    description: "Stop the task's supervisor: dialogs still pending are dismissed first (so the page is not left blocked), and the tab the server opened for the task (without cdp_url) is closed. Disconnecting a task that is not connected succeeds with stopped: false.",
    annotations: Annotations {
        read_only: false,
        destructive: Some(true),
        idempotent: true,
        open_world: false,
    },
    args: DISCONNECT_ARGS,
    input: schema::disconnect_input,
    required: &[],
    output: schema::disconnect_output,
    handler: |ctx, task, _| Ok(connect::disconnect(ctx.registry, task)),
    // Its result names the dialogs the stop dismissed; nothing is left to watch.
    dialog_status: false,
};

const HANDOVER: Spec = Spec {
    name: "browser_handover",
    title: "Hand the task to a person",
    description: "Hand the task over to a person (action hand_over) or take it back (take_back). While a person holds it, the supervisor answers no dialog by policy or watchdog (a dialog waits for the person, who answers from the supervisor page), sends no automatic command to its pages, and the agent's calls (browser_cdp, browser_navigate, browser_dialog) fail with an error saying a person holds the task; browser_snapshot still works. Taking back restores everything: a dialog still pending gets the task's policy again (must_respond: a fresh dialog_timeout_s). Both are idempotent. The result (and browser_snapshot's handover) says whether it is held, since when, and for how long it was held before.",
    annotations: Annotations {
        read_only: false,
        destructive: Some(false),
        idempotent: true,
        open_world: false,
    },
    args: HANDOVER_ARGS,
    input: schema::handover_input,
    required: &["action"],
    output: schema::handover_output,
    handler: |ctx, task, args| Ok(handover::run(ctx.registry, task, args)),
    dialog_status: true,
};

impl Tool {
    /// Every tool, in the order `tools/list` shows them.
    pub(crate) const ALL: [Tool; 7] = [
        Tool::Connect,
        Tool::Snapshot,
        Tool::Dialog,
        Tool::Cdp,
        Tool::Navigate,
        Tool::Disconnect,
        Tool::Handover,
    ];

    fn spec(self) -> &'static Spec {
        match self {
            Tool::Connect => &CONNECT,
            Tool::Snapshot => &SNAPSHOT,
            Tool::Dialog => &DIALOG,
            Tool::Cdp => &CDP,
            Tool::Navigate => &NAVIGATE,
            Tool::Disconnect => &DISCONNECT,
            Tool::Handover => &HANDOVER,
        }
    }

    /// The tool's name (`browser_connect`, ...).
    pub(crate) fn name(self) -> &'static str {
        self.spec().name
    }

    /// The tool called `name`.
    pub(crate) fn from_name(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The arguments it takes.
    #[cfg(test)]
    pub(crate) fn args(self) -> &'static [&'static str] {
        self.spec().args
    }

    /// The names of all tools, for messages (`browser_connect, browser_snapshot, ...`).
    pub(crate) fn names() -> String {
        Tool::ALL.map(Tool::name).join(", ")
    }

    /// Its `tools/list` entry: name, title, description, annotations, input and output schema.
    pub(crate) fn list_entry(self) -> Value {
        let s = self.spec();
        let a = &s.annotations;
        let mut annotations = json!({
            "title": s.title,
            "readOnlyHint": a.read_only,
            "idempotentHint": a.idempotent,
            "openWorldHint": a.open_world,
        });
        if let Some(d) = a.destructive {
            annotations["destructiveHint"] = json!(d);
        }
        let mut input = json!({
            "type": "object",
            "properties": (s.input)(),
            "additionalProperties": false,
        });
        if !s.required.is_empty() {
            input["required"] = json!(s.required);
        }
        json!({
            "name": s.name,
            "title": s.title,
            "description": s.description,
            "annotations": annotations,
            "inputSchema": input,
            "outputSchema": schema::output_schema((s.output)()),
        })
    }

    /// The `tools/list` entries, in table order.
    pub(crate) fn list() -> Value {
        Value::Array(Tool::ALL.map(Tool::list_entry).to_vec())
    }
}

/// How a call names its task (SPEC §15).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tasks {
    /// One client (MCP on stdio, the Python binding): `task_id`, `default` when absent or null.
    Default,
    /// Clients that share a server (MCP over HTTP): `browser_connect` without `task_id` creates
    /// a task with a fresh id, every other tool needs one (`args::task_per_client`).
    PerClient,
}

impl Tasks {
    /// The task a call of `tool` with `args` is about, or the failure to answer.
    pub(crate) fn task_of(self, tool: Tool, args: &Value) -> Result<Cow<'_, str>, Value> {
        match self {
            Tasks::Default => task_or_default(args),
            Tasks::PerClient => task_per_client(args, tool.name(), tool == Tool::Connect),
        }
    }
}

/// Runs one call of `tool` as every caller does (SPEC §10): the arguments must be an object,
/// the context's rule names the task, the tool runs, and the task's dialog status is added
/// once. Argument errors are results (`success: false`).
pub(crate) fn dispatch(ctx: &Context<'_>, tool: Tool, args: &Value) -> Value {
    if !args.is_object() {
        return not_an_object(args);
    }
    let task = match ctx.tasks.task_of(tool, args) {
        Ok(t) => t,
        Err(e) => return e,
    };
    run(ctx, tool, &task, args).unwrap_or_else(|NoSupervisor| no_supervisor(&task))
}

/// Runs `tool` for `task` (already named): the arguments it does not take fail it, else its
/// handler runs; then the task's dialog status is added when the tool's result carries it.
pub(crate) fn run(
    ctx: &Context<'_>,
    tool: Tool,
    task: &str,
    args: &Value,
) -> Result<Value, NoSupervisor> {
    let spec = tool.spec();
    let mut out = match check_args(args, spec.args) {
        Ok(()) => (spec.handler)(ctx, task, args)?,
        Err(unknown) => unknown,
    };
    if spec.dialog_status {
        add_dialog_status(ctx.registry, task, &mut out);
    }
    Ok(out)
}

/// Adds what every tool result carries (SPEC §10): `pending_dialogs` whenever a dialog (or a
/// file chooser) is pending and `blocked` when the page is blocked, so an agent sees a dialog on
/// its next call without polling. Does nothing when the task has no supervisor or `out` is no object.
/// `run` adds it once per call for every tool whose result carries it.
pub fn add_dialog_status(reg: &SupervisorRegistry, task_id: &str, out: &mut Value) {
    let Some(obj) = out.as_object_mut() else {
        return;
    };
    reg.with_snapshot(task_id, |s| {
        let pending = !s.pending_dialogs.is_empty() || !s.file_choosers.is_empty();
        if pending && !obj.contains_key("pending_dialogs") {
            obj.insert("pending_dialogs".into(), Value::Array(s.pending_json()));
        }
        if let Some(b) = &s.blocked
            && !obj.contains_key("blocked")
        {
            obj.insert("blocked".into(), b.to_json());
        }
    });
}

/// Runs tool `name` with `args` on `registry` as an MCP `tools/call` on stdio would (same task
/// rule, same result), except that `browser_connect` launches no browser here: it needs a
/// `cdp_url` (or a configured one). An unknown name is an `unknown tool` result. `cancel` calls
/// the call off. What the Python binding's `cdp_supervisor.tools` calls.
pub fn call(
    registry: &SupervisorRegistry,
    name: &str,
    args: &Value,
    cancel: Option<&CancelToken>,
) -> Value {
    let ctx = Context {
        cancel,
        ..Context::of(registry)
    };
    if let Some(tool) = Tool::from_name(name) {
        return dispatch(&ctx, tool, args);
    }
    let task = match task_or_default(args) {
        Ok(t) => t,
        Err(e) => return e,
    };
    let mut out = failure(format!("unknown tool {}", crate::quote::quoted(name)));
    add_dialog_status(registry, &task, &mut out);
    out
}

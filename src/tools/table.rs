//! The one table of tools: each tool's name, title, description, annotations, argument names,
//! input and output schemas and handler, in one [`Spec`] per tool; and [`dispatch`], which runs
//! a call the way every transport does.
//!
//! Annotations follow one rule: a tool that acts on the web page is open-world (the page is
//! someone else's code and servers); one whose effect on the page cannot be undone (answering a
//! dialog, raw CDP, closing the task's page) is destructive.
//!
//! A transport is a [`Host`]: it lends its registry, names the task of a call by its own rule,
//! and runs the tools only a server can (`browser_connect`, `browser_disconnect`: they launch
//! browsers and watch supervisors). The MCP server on stdio is one (`mcp::handlers`); the
//! Python binding's is a bare registry (`unversioned::tools::call`); over HTTP the same server
//! names tasks by a rule of its own (SPEC §15: `mcp::handlers`).

use std::borrow::Cow;

use serde_json::{Value, json};

use super::args::{failure, not_an_object, task_or_default};
use super::schema;
use super::snapshot::{self, NoSupervisor};
use super::{
    CDP_ARGS, DIALOG_ARGS, NAVIGATE_ARGS, SNAPSHOT_ARGS, add_dialog_status, cdp, dialog, navigate,
    no_supervisor,
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

/// How a tool runs.
#[derive(Clone, Copy)]
enum Handler {
    /// It needs only a registry (SPEC §10), so every host serves it.
    Registry(
        fn(&SupervisorRegistry, &str, &Value, Option<&CancelToken>) -> Result<Value, NoSupervisor>,
    ),
    /// Only a server can run it: the host does ([`Host::run`]), or does not have it.
    Host,
}

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
    args: &[
        "cdp_url",
        "task_id",
        "target_id",
        "dialog_policy",
        "dialog_timeout_s",
        "dialog_bridge",
    ],
    input: schema::connect_input,
    required: &[],
    output: schema::connect_output,
    handler: Handler::Host,
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
    handler: Handler::Registry(|reg, task, args, _| {
        snapshot::view(reg, task, args).map(snapshot::as_result)
    }),
    dialog_status: true,
};

const DIALOG: Spec = Spec {
    name: "browser_dialog",
    title: "Answer a JS dialog",
    description: "Accept or dismiss a pending JS dialog (alert/confirm/prompt/beforeunload), which unblocks the page. With several pending, name one with dialog_id (ids are in pending_dialogs). A pending file chooser (type file_chooser, id fc-N) is answered with accept and files (paths within security.upload_dirs; needs security.allow_file_access), or dismissed.",
    annotations: Annotations {
        read_only: false,
        destructive: Some(true),
        idempotent: false,
        open_world: true,
    },
    args: DIALOG_ARGS,
    input: schema::dialog_input,
    required: &["action"],
    output: schema::dialog_output,
    handler: Handler::Registry(|reg, task, args, _| Ok(dialog::run(reg, task, args))),
    dialog_status: true,
};

const CDP: Spec = Spec {
    name: "browser_cdp",
    title: "Raw CDP call",
    description: "Send a raw Chrome DevTools Protocol command and return its result. Routing: frame_id sends it into that frame (cross-origin iframes/OOPIFs included; Runtime.evaluate runs in the frame's context; frame ids are in browser_snapshot's frame_tree); target_id sends it to that target's session; with neither, it is routed by domain: the domains the browser target serves (Browser, Target, Storage, SystemInfo, Tethering, Tracing, Extensions, BluetoothEmulation) go to the browser, every other method (Page, Runtime, DOM, Input, Network, Fetch, ...) to the task's page. The result's routed_to says where it went. A call that a JS dialog blocks returns at once with blocked_by_dialog (the dialog) instead of hanging: answer it with browser_dialog, then retry.",
    annotations: Annotations {
        read_only: false,
        destructive: Some(true),
        idempotent: false,
        open_world: true,
    },
    args: CDP_ARGS,
    input: schema::cdp_input,
    required: &["method"],
    output: schema::cdp_output,
    handler: Handler::Registry(|reg, task, args, cancel| Ok(cdp::run(reg, task, args, cancel))),
    dialog_status: true,
};

const NAVIGATE: Spec = Spec {
    name: "browser_navigate",
    title: "Navigate the page",
    description: "Open a URL in the task's page (brought to the front first) and wait until the new document has committed (wait_until: commit) or loaded (load, the default). It never waits on a JS dialog: one that opens before then (an alert while the page loads, the beforeunload of the page being left) ends the call at once with blocked_by_dialog; answer it with browser_dialog. A network error (net::ERR_NAME_NOT_RESOLVED, a refused connection) is an error naming it; URLs the security policy refuses (file:, the browser's own pages) never reach the browser.",
    annotations: Annotations {
        read_only: false,
        destructive: Some(true),
        idempotent: false,
        open_world: true,
    },
    args: NAVIGATE_ARGS,
    input: schema::navigate_input,
    required: &["url"],
    output: schema::navigate_output,
    handler: Handler::Registry(|reg, task, args, _| Ok(navigate::run(reg, task, args))),
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
    args: &["task_id"],
    input: schema::disconnect_input,
    required: &[],
    output: schema::disconnect_output,
    handler: Handler::Host,
    // Its result names the dialogs the stop dismissed; nothing is left to watch.
    dialog_status: false,
};

impl Tool {
    /// Every tool, in the order `tools/list` shows them.
    pub(crate) const ALL: [Tool; 6] = [
        Tool::Connect,
        Tool::Snapshot,
        Tool::Dialog,
        Tool::Cdp,
        Tool::Navigate,
        Tool::Disconnect,
    ];

    fn spec(self) -> &'static Spec {
        match self {
            Tool::Connect => &CONNECT,
            Tool::Snapshot => &SNAPSHOT,
            Tool::Dialog => &DIALOG,
            Tool::Cdp => &CDP,
            Tool::Navigate => &NAVIGATE,
            Tool::Disconnect => &DISCONNECT,
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

    /// Runs the table's handler (no dialog status): a registry tool's result (a task without a
    /// live supervisor is [`no_supervisor`]), or `unknown tool` for a tool only a server runs.
    /// A [`Host::run`] that wraps a registry tool calls it.
    pub(crate) fn run_handler(
        self,
        reg: &SupervisorRegistry,
        task: &str,
        args: &Value,
        cancel: Option<&CancelToken>,
    ) -> Value {
        match self.spec().handler {
            Handler::Registry(run) => {
                run(reg, task, args, cancel).unwrap_or_else(|NoSupervisor| no_supervisor(task))
            }
            Handler::Host => unknown(self.name()),
        }
    }

    /// Whether it needs only a registry (every host serves it).
    fn needs_only_a_registry(self) -> bool {
        matches!(self.spec().handler, Handler::Registry(_))
    }
}

/// A transport that serves the tools (module doc).
pub(crate) trait Host {
    /// The registry the tools act on.
    fn registry(&self) -> &SupervisorRegistry;

    /// The task a call of `tool` is about, from its `task_id` argument, or the failure to
    /// answer. This default is the rule of the MCP server on stdio and of the Python binding:
    /// absent or null is the task `"default"`. (Over HTTP, `browser_connect` without `task_id`
    /// creates a task with a fresh id and every other tool needs one, SPEC §15: the MCP server
    /// overrides this there, in `mcp::handlers`.)
    fn task_id<'a>(&self, tool: Tool, args: &'a Value) -> Result<Cow<'a, str>, Value> {
        default_task_id(tool, args)
    }

    /// Runs `tool` for `task` when this host runs it itself: the tools only a server can run,
    /// and what a server does around another tool. `None`: the table's handler runs (and a
    /// server tool is unknown to this host).
    fn run(
        &self,
        tool: Tool,
        task: &str,
        args: &Value,
        cancel: Option<&CancelToken>,
    ) -> Option<Value> {
        let _ = (tool, task, args, cancel);
        None
    }
}

/// The task of a call by the default rule ([`Host::task_id`]): `task_id`, `"default"` when
/// absent or null.
pub(crate) fn default_task_id(tool: Tool, args: &Value) -> Result<Cow<'_, str>, Value> {
    let _ = tool;
    task_or_default(args)
}

/// Runs one call of `tool` as every transport does (SPEC §10): the arguments must be an object,
/// the host names the task, the tool runs (the host's way, else the table's handler), and the
/// task's dialog status is added once. Argument errors are results (`success: false`).
pub(crate) fn dispatch(
    host: &dyn Host,
    tool: Tool,
    args: &Value,
    cancel: Option<&CancelToken>,
) -> Value {
    if !args.is_object() {
        return not_an_object(args);
    }
    let task = match host.task_id(tool, args) {
        Ok(t) => t,
        Err(e) => return e,
    };
    let mut out = host
        .run(tool, &task, args, cancel)
        .unwrap_or_else(|| tool.run_handler(host.registry(), &task, args, cancel));
    if tool.spec().dialog_status {
        add_dialog_status(host.registry(), &task, &mut out);
    }
    out
}

/// The result of a call of a tool the host does not have.
fn unknown(name: &str) -> Value {
    failure(format!("unknown tool {}", crate::quote::quoted(name)))
}

/// The host of the Python binding: a registry and nothing else, so it serves the tools that
/// need only a registry.
struct RegistryHost<'a>(&'a SupervisorRegistry);

impl Host for RegistryHost<'_> {
    fn registry(&self) -> &SupervisorRegistry {
        self.0
    }
}

/// Runs tool `name` with `args` on `registry` as the MCP server's `tools/call` would (same
/// task rule, same result), for the tools that need only a registry (`browser_snapshot`,
/// `browser_dialog`, `browser_cdp`, `browser_navigate`); any other name is an `unknown tool` result. `cancel`
/// abandons a `browser_cdp` call. What the Python binding's `cdp_supervisor.tools` calls.
pub fn call(
    registry: &SupervisorRegistry,
    name: &str,
    args: &Value,
    cancel: Option<&CancelToken>,
) -> Value {
    let host = RegistryHost(registry);
    if let Some(tool) = Tool::from_name(name).filter(|t| t.needs_only_a_registry()) {
        return dispatch(&host, tool, args, cancel);
    }
    let task = match task_or_default(args) {
        Ok(t) => t,
        Err(e) => return e,
    };
    let mut out = unknown(name);
    add_dialog_status(registry, &task, &mut out);
    out
}

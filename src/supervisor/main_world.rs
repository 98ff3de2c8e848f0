//! Reaching a same-process frame's main world without the Runtime domain (SPEC §8, §19).
//!
//! A call routed to a same-process iframe must run in that frame's main world, so it needs the
//! frame's default execution context. `Runtime.executionContextCreated` names it, but only while
//! `Runtime.enable` is on, which a page detects. Without it, measured on Chromium
//! (`tests/it/measure_stealth.rs`, `main_world_ways`), the DOM leads there:
//!
//! 1. `DOM.getFrameOwner {frameId}`: the `<iframe>` element, in the parent's document;
//! 2. `DOM.describeNode` of it: its `contentDocument`, the frame's document;
//! 3. `DOM.resolveNode` of that document: a remote object in the frame's main world (the DOM
//!    domain need not be enabled for any of these);
//! 4. the context of that object: Chromium gives no field for it, but its object id is
//!    `<isolate>.<context>.<n>`; the context read from it is checked with an empty
//!    `Runtime.callFunctionOn` in that context, passing the object as its argument, which
//!    Chromium refuses unless the object belongs to that very context ("All call arguments must
//!    belong to the same JavaScript world as the target object"). No page code runs, nothing is
//!    thrown or logged, nothing is left in the page: the detection page sees none of it.
//! 5. `Runtime.releaseObjectGroup` (fire-and-forget) lets the object go.
//!
//! The context is recorded in the frame map for the document the frame showed (the reader
//! records the checked call's success: `Frames::main_world_found`), so the next call into the
//! frame costs nothing extra until it navigates. Measured: about 2 ms for the four round trips
//! on loopback, once per document. Every step is a dialog-aware call on the frame's session: a
//! dialog that blocks the frame fails it at once, as it would fail the call itself.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use super::Supervisor;
use crate::cancel::CancelToken;
use crate::core::{CallKind, Command, MainWorld};
use crate::deadline::Deadline;
use crate::error::Error;
use crate::outbound::Outbound;

/// A call into a same-process frame whose main-world context is not known yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NeedsContext {
    /// The frame.
    pub frame_id: String,
    /// Its document number when the call was routed (`FrameRecord::document`).
    pub document: u64,
    /// The call's parameter that names the context (`contextId` or `executionContextId`).
    pub key: &'static str,
}

/// Object groups of the lookups: one per lookup, so releasing one never frees another's object.
static GROUP: AtomicU64 = AtomicU64::new(0);

/// The execution context an object id names: V8 writes them as `<isolate>.<context>.<n>`.
/// `None` for any other shape (the check in step 4 then is never reached).
pub(crate) fn context_of_object(object_id: &str) -> Option<i64> {
    let mut parts = object_id.split('.');
    let (isolate, context, n) = (parts.next()?, parts.next()?, parts.next()?);
    let numeric = |s: &str| {
        !s.is_empty()
            && s.trim_start_matches('-')
                .bytes()
                .all(|b| b.is_ascii_digit())
    };
    if parts.next().is_some() || !numeric(isolate) || !numeric(n) {
        return None;
    }
    context.parse().ok().filter(|c| *c > 0)
}

impl Supervisor {
    /// Finds the main-world context of `need.frame_id`, whose document runs on session `sid`
    /// (module doc), by `deadline`.
    pub(super) fn main_world_context(
        &self,
        sid: &str,
        need: &NeedsContext,
        deadline: Deadline,
        cancel: Option<&CancelToken>,
    ) -> Result<i64, Error> {
        let frame = need.frame_id.as_str();
        let loading = |what: &str| {
            Error::InvalidArgument(format!(
                "frame {frame} has no JavaScript context yet ({what}; it may still be loading); \
                 retry shortly"
            ))
        };
        // A dialog, a time-out, a cancel or a lost connection is the call's own fate; what the
        // browser refuses means the frame has no document to reach (yet, or any more).
        let step = |method: &str, params: Value, check: Option<MainWorld>| {
            self.call_on_session(sid.to_string(), method, params, deadline, cancel, check)
                .map(|(v, _)| v)
                .map_err(|e| match e {
                    Error::Cdp {
                        method, message, ..
                    } => loading(&format!("{method}: {message}")),
                    other => other,
                })
        };
        let owner = step("DOM.getFrameOwner", json!({"frameId": frame}), None)?;
        let owner = owner["backendNodeId"]
            .as_i64()
            .ok_or_else(|| loading("no element owns it"))?;
        let node = step("DOM.describeNode", json!({"backendNodeId": owner}), None)?;
        let document = node["node"]["contentDocument"]["backendNodeId"]
            .as_i64()
            .ok_or_else(|| loading("no document in it"))?;
        let group = format!("cdp-supervisor-{}", GROUP.fetch_add(1, Ordering::Relaxed));
        let resolved = step(
            "DOM.resolveNode",
            json!({"backendNodeId": document, "objectGroup": group}),
            None,
        );
        let found = resolved.and_then(|r| {
            let object_id = r["object"]["objectId"].as_str().unwrap_or_default();
            let context = context_of_object(object_id).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "frame {frame}: cannot tell the context of its document's object id {}; \
                     set browser.capture_console = true to learn contexts from the Runtime \
                     domain instead",
                    crate::quote::quoted(object_id)
                ))
            })?;
            let check = MainWorld {
                frame_id: frame.to_string(),
                document: need.document,
                context,
            };
            step(
                "Runtime.callFunctionOn",
                json!({
                    "executionContextId": context,
                    "functionDeclaration": "function() {}",
                    "arguments": [{"objectId": object_id}],
                    "silent": true,
                }),
                Some(check),
            )?;
            Ok(context)
        });
        let release = Command::new("Runtime.releaseObjectGroup", json!({"objectGroup": group}))
            .on(sid)
            .kind(CallKind::Automatic);
        if let Err(e) = self.shared.send_command(release, None, deadline) {
            log::debug!("task {}: releasing {group}: {e}", self.task_id);
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::context_of_object;

    #[test]
    fn the_context_is_the_middle_of_a_v8_object_id() {
        assert_eq!(context_of_object("7992657491051892582.3.1"), Some(3));
        assert_eq!(context_of_object("-4611686018427387904.12.40"), Some(12));
        for other in [
            "", "3", "1.2", "a.3.1", "1.b.2", "1.3.x", "1.3.1.4", "1.0.1", "1.-3.1",
        ] {
            assert_eq!(context_of_object(other), None, "{other:?}");
        }
        assert_eq!(
            context_of_object(r#"{"injectedScriptId":3,"id":1}"#),
            None,
            "the old JSON shape"
        );
    }
}

//! The snapshot fast path: a plain `tools/call browser_snapshot` of a live task is answered with
//! a line built from the snapshot's JSON text, which is serialised once per published snapshot
//! (`browser_snapshot` is what an agent calls before every step), in either protocol
//! generation. Anything unusual (other arguments, no live supervisor, a 2026-07-28 request that
//! asks for logs) goes the general way, which gives the same result.

use crate::sync;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::protocol::{self, Era};
use super::{Engine, Request};
use crate::snapshot::Snapshot;
use crate::tools::snapshot_result;
use crate::tools::table::{Tasks, Tool};

/// The last `browser_snapshot` answer, kept with the snapshot it shows (`browser_snapshot` is
/// answered on the thread that read the request: stdio's reading thread, an HTTP connection's).
#[derive(Default)]
pub(super) struct SnapshotCache {
    last: Mutex<Option<SnapshotText>>,
}

impl std::fmt::Debug for SnapshotCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotCache").finish_non_exhaustive()
    }
}

/// A snapshot's `browser_snapshot` result, serialised once: the JSON text of
/// `structuredContent` and the same text escaped as the `text` content's string.
struct SnapshotText {
    /// Held so the pointer comparison can never match a freed and reused allocation.
    snapshot: Arc<Snapshot>,
    body: String,
    escaped: String,
}

impl Engine {
    /// The whole answer line of a plain `tools/call browser_snapshot` (no arguments but
    /// `task_id`) of a live task in `era`, its task named by the rule `tasks`; `None` for
    /// anything else.
    pub(super) fn snapshot_line(
        &self,
        request: &Request,
        era: Era,
        tasks: Tasks,
    ) -> Option<String> {
        if request.tool != Some(Tool::Snapshot) {
            return None;
        }
        let params = &request.params;
        if let Era::Modern(m) = era
            && m.log_level.is_some()
        {
            return None;
        }
        let plain = match params.get("arguments") {
            None | Some(Value::Null) => true,
            Some(Value::Object(a)) => {
                matches!(
                    (a.len(), a.get("task_id")),
                    (0, _) | (1, Some(Value::String(_)))
                )
            }
            Some(_) => false,
        };
        if !plain {
            return None;
        }
        // The task by the client's rule, which also checks the id.
        let task = tasks
            .task_of(
                Tool::Snapshot,
                params.get("arguments").unwrap_or(&Value::Null),
            )
            .ok()?;
        let sup = self.registry.get(&task)?;
        if !sup.is_alive() {
            return None;
        }
        let snap = sup.snapshot();
        let mut cache = sync::lock(&self.snapshot_cache.last);
        let fresh = cache
            .as_ref()
            .is_some_and(|c| Arc::ptr_eq(&c.snapshot, &snap));
        if !fresh {
            let body = snapshot_result(snap.to_json()).to_string();
            let escaped = Value::String(body.clone()).to_string();
            *cache = Some(SnapshotText {
                snapshot: snap,
                body,
                escaped,
            });
        }
        let c = cache.as_ref()?;
        Some(format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{"content":[{{"type":"text","text":{}}}],"structuredContent":{},"isError":false{}}}}}"#,
            request.id.raw(),
            c.escaped,
            c.body,
            protocol::finish_text(era)
        ))
    }
}

#[cfg(all(test, feature = "fake-browser"))]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::config::Config;
    use crate::mcp::engine::events::Level;
    use crate::mcp::engine::protocol::Modern;
    use crate::mcp::engine::protocol::tool_result;
    use crate::mcp::rpc::Id;
    use crate::tools::Context;
    use crate::tools::table;

    #[test]
    fn the_snapshot_fast_path_answers_exactly_what_the_general_path_does_in_both_eras() {
        let fake = crate::fake::FakeBrowser::start().expect("fake browser");
        let engine = Engine::new(Config::default());
        engine
            .registry
            .get_or_start("t", &fake.ws_url())
            .expect("attach");
        let id = Id::parse("7");
        let call = |params: &Value| Request::new(id.clone(), "tools/call".into(), params.clone());
        let params = json!({"name": "browser_snapshot", "arguments": {"task_id": "t"}});
        let modern = Era::Modern(Modern {
            version: "2026-07-28",
            log_level: None,
        });
        let check = || {
            for era in [Era::Legacy, modern] {
                let fast = engine
                    .snapshot_line(&call(&params), era, Tasks::Default)
                    .expect("the fast path serves a live task");
                let fast: Value = serde_json::from_str(&fast).expect("one JSON message");
                let ctx = Context::of(&engine.registry);
                let out = table::dispatch(&ctx, Tool::Snapshot, &params["arguments"]);
                // Both as the client reads them: from their JSON text.
                let general: Value =
                    serde_json::from_str(&tool_result(&id, out, era)).expect("one JSON message");
                assert_eq!(fast, general);
            }
        };
        check();
        check(); // from the cache
        fake.open_dialog("alert", "new state", "");
        let sup = engine.registry.get("t").expect("live");
        sup.wait_for(Duration::from_secs(5), |s| !s.pending_dialogs.is_empty())
            .expect("the dialog is published");
        check(); // a new snapshot is serialised again
        // Arguments it does not handle go to the general path.
        let fast = |p: &Value, era| engine.snapshot_line(&call(p), era, Tasks::Default);
        let odd = json!({"name": "browser_snapshot", "arguments": {"task_id": "t", "x": 1}});
        assert!(fast(&odd, Era::Legacy).is_none());
        assert!(fast(&json!({}), Era::Legacy).is_none());
        let unknown = json!({"name": "browser_snapshot", "arguments": {"task_id": "nobody"}});
        assert!(fast(&unknown, Era::Legacy).is_none());
        let invalid = json!({"name": "browser_snapshot", "arguments": {"task_id": ""}});
        assert!(fast(&invalid, Era::Legacy).is_none());
        // A 2026-07-28 request that asks for logs too.
        let logged = Era::Modern(Modern {
            version: "2026-07-28",
            log_level: Some(Level::DEBUG),
        });
        assert!(fast(&params, logged).is_none());
        // Over HTTP a call without task_id names no task.
        let bare = json!({"name": "browser_snapshot"});
        assert!(
            engine
                .snapshot_line(&call(&bare), Era::Legacy, Tasks::PerClient)
                .is_none()
        );
    }
}

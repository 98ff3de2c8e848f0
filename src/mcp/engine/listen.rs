//! `subscriptions/listen` (2026-07-28): long-lived requests whose response is a stream of
//! notifications. The only notifications a client can ask for are list changes and
//! `notifications/resources/updated` of resources it names; ours are the tasks
//! (`resources`), so a listener names the tasks it follows by URI and gets
//! `notifications/resources/updated` for each of their events (`notify`), the event itself in
//! `_meta["io.github.cdp-supervisor/event"]`. The tool list never changes, there are no prompts
//! and the resource list is always empty, so the other filters are not honored (left out of
//! the acknowledgement, as the spec says).
//!
//! Rules kept here (spec basic/patterns/subscriptions):
//! * the acknowledgement (`notifications/subscriptions/acknowledged`) is the first message that
//!   carries the subscription's id: it is sent under the same lock that every later frame of
//!   the stream takes, right after the stream is registered;
//! * every frame carries `_meta["io.modelcontextprotocol/subscriptionId"]`: the listen
//!   request's id, its raw text as sent;
//! * the client ends a stream with `notifications/cancelled` (stdio): no response, nothing more
//!   for it; the server ends every stream at shutdown with a `resultType: "complete"` response;
//! * a stream whose output fails is dropped.
//!
//! Bounded: at most [`MAX_LISTENS`] streams open at once, [`MAX_URIS`] URIs per stream.

use crate::sync;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::events::Event;
use super::protocol::meta;
use super::{Answer, Sink, resources};
use crate::deadline::Deadline;
use crate::mcp::rpc::{Id, IdKey, code};

/// The time a shutdown gives all `subscriptions/listen` streams together for their last line
/// (SIGTERM must end the server within 2 s, browser included).
pub(crate) const END_ALL_BUDGET: std::time::Duration = std::time::Duration::from_millis(500);

/// Most `subscriptions/listen` streams open at once (all clients together).
pub(crate) const MAX_LISTENS: usize = 64;

/// Most resource URIs one stream may name.
pub(crate) const MAX_URIS: usize = 256;

/// One open stream.
struct Listen {
    /// The transport channel it came on (a cancel names a request of its own channel).
    channel: u64,
    /// Its request id, as JSON-RPC compares ids.
    key: IdKey,
    /// Its request id, as sent.
    id: Id,
    /// The tasks it follows, and their URIs (as announced in `resources/updated`).
    tasks: Vec<(String, String)>,
    /// Where its frames go.
    out: Arc<dyn Sink>,
}

/// The open streams (module doc). Every frame of every stream is written under this lock, so
/// no frame of a stream precedes its acknowledgement or follows its end.
#[derive(Default)]
pub(crate) struct Listens {
    open: Mutex<Vec<Listen>>,
}

impl std::fmt::Debug for Listens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listens")
            .field("open", &self.lock().len())
            .finish()
    }
}

/// The honored part of a `subscriptions/listen` filter: the tasks (and URIs) it follows.
fn honored(params: &Value) -> Result<Vec<(String, String)>, String> {
    let Some(filter) = params.get("notifications") else {
        return Err(
            "invalid params: subscriptions/listen needs \"notifications\" (the filter)".into(),
        );
    };
    let Some(filter) = filter.as_object() else {
        return Err("invalid params: \"notifications\" must be an object".into());
    };
    let uris = match filter.get("resourceSubscriptions") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(uris)) => uris.as_slice(),
        Some(_) => {
            return Err(
                "invalid params: \"resourceSubscriptions\" must be an array of URIs".into(),
            );
        }
    };
    if uris.len() > MAX_URIS {
        return Err(format!(
            "invalid params: at most {MAX_URIS} resourceSubscriptions per stream"
        ));
    }
    let mut tasks: Vec<(String, String)> = Vec::new();
    for u in uris {
        let Some(u) = u.as_str() else {
            return Err(
                "invalid params: \"resourceSubscriptions\" must be an array of URIs".into(),
            );
        };
        if let Some(task) = resources::task_of(u)
            && !tasks.iter().any(|(t, _)| *t == task)
        {
            let canonical = resources::uri(&task);
            tasks.push((task, canonical));
        }
    }
    Ok(tasks)
}

/// The `_meta` of a frame of the stream `id`: `"io.modelcontextprotocol/subscriptionId":<id>`.
fn subscription_meta(id: &Id) -> String {
    format!(r#""{}":{}"#, meta::SUBSCRIPTION_ID, id.raw())
}

impl Listens {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Listen>> {
        sync::lock(&self.open)
    }

    /// Streams open.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether a stream with request id `key` is open on `channel`.
    pub(crate) fn is_open(&self, channel: u64, key: &IdKey) -> bool {
        self.lock()
            .iter()
            .any(|l| l.channel == channel && l.key == *key)
    }

    /// Opens the stream of request `id` (params `params`) on `out` and acknowledges it there.
    /// `Err`: the error response (bad filter, too many streams, an id in use: `busy` says
    /// whether another request of the channel holds it).
    pub(crate) fn open(
        &self,
        channel: u64,
        id: &Id,
        params: &Value,
        out: Arc<dyn Sink>,
        busy: impl FnOnce(&IdKey) -> bool,
    ) -> Result<(), Answer> {
        let tasks =
            honored(params).map_err(|e| Answer::error(Some(id), code::INVALID_PARAMS, e))?;
        let key = id.key();
        let mut open = self.lock();
        if open.iter().any(|l| l.channel == channel && l.key == key) || busy(&key) {
            return Err(Answer::error(
                Some(id),
                code::INVALID_REQUEST,
                "invalid request: a request with this id is still in flight",
            ));
        }
        if open.len() >= MAX_LISTENS {
            return Err(Answer::error(
                Some(id),
                code::INVALID_REQUEST,
                format!(
                    "invalid request: {MAX_LISTENS} subscriptions/listen streams are open; end one (notifications/cancelled) first"
                ),
            ));
        }
        let mut filter = json!({});
        if !tasks.is_empty() {
            filter["resourceSubscriptions"] =
                Value::Array(tasks.iter().map(|(_, u)| Value::from(u.as_str())).collect());
        }
        let ack = format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{{"_meta":{{{}}},"notifications":{filter}}}}}"#,
            subscription_meta(id)
        );
        if out.send_line(ack) {
            open.push(Listen {
                channel,
                key,
                id: id.clone(),
                tasks,
                out,
            });
        }
        Ok(())
    }

    /// Ends the stream `key` of `channel` without a response (the client cancelled it); true
    /// when one was open.
    pub(crate) fn cancel(&self, channel: u64, key: &IdKey) -> bool {
        let mut open = self.lock();
        let before = open.len();
        open.retain(|l| !(l.channel == channel && l.key == *key));
        open.len() != before
    }

    /// Ends every stream of `channel` without a response (its client went away).
    pub(crate) fn drop_channel(&self, channel: u64) {
        self.lock().retain(|l| l.channel != channel);
    }

    /// Ends every stream gracefully: each gets its `subscriptions/listen` response, all of them
    /// within [`END_ALL_BUDGET`] (a client that stops reading cannot hold up a shutdown; the
    /// streams past the budget just end).
    pub(crate) fn end_all(&self) {
        let by = Deadline::after(END_ALL_BUDGET);
        for l in self.lock().drain(..) {
            let result = format!(
                r#"{{"jsonrpc":"2.0","id":{},"result":{{"resultType":"complete","_meta":{{{}}}}}}}"#,
                l.id.raw(),
                subscription_meta(&l.id)
            );
            l.out.end(result, by);
        }
    }

    /// Sends each event of `task` to the streams that follow it.
    pub(crate) fn push(&self, task: &str, events: &[Event]) {
        let mut open = self.lock();
        if open.is_empty() {
            return;
        }
        open.retain(|l| {
            let Some((_, uri)) = l.tasks.iter().find(|(t, _)| t == task) else {
                return true;
            };
            events.iter().all(|e| {
                l.out.send_line(format!(
                    r#"{{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{{"uri":{},"_meta":{{{},"{}":{}}}}}}}"#,
                    Value::from(uri.as_str()),
                    subscription_meta(&l.id),
                    meta::EVENT,
                    e.data
                ))
            })
        });
    }
}

/// The answer to `subscriptions/listen` on a transport that cannot stream here.
pub(crate) fn no_stream(id: &Id) -> Answer {
    Answer::error(
        Some(id),
        code::INVALID_REQUEST,
        "invalid request: subscriptions/listen needs a transport that streams notifications (stdio, or an HTTP POST that accepts text/event-stream)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::engine::events::Level;

    /// A sink that keeps what it gets, and fails once told to.
    #[derive(Default)]
    struct Kept {
        lines: Mutex<Vec<Value>>,
        broken: std::sync::atomic::AtomicBool,
    }

    impl Sink for Kept {
        fn send_line(&self, line: String) -> bool {
            if self.broken.load(std::sync::atomic::Ordering::Acquire) {
                return false;
            }
            self.lines
                .lock()
                .unwrap()
                .push(serde_json::from_str(&line).expect("one JSON message"));
            true
        }

        fn end(&self, line: String, _by: Deadline) -> bool {
            self.send_line(line)
        }
    }

    fn event(task: &str) -> Event {
        Event {
            level: Level::WARNING,
            data: json!({"event": "dialog_opened", "task_id": task}),
            logged: true,
        }
    }

    #[test]
    fn a_stream_is_acknowledged_first_gets_its_tasks_events_and_ends_with_a_response() {
        let listens = Listens::default();
        let out = Arc::new(Kept::default());
        let id = Id::parse(r#""listen-1""#);
        let params = json!({"notifications": {
            "toolsListChanged": true,
            "resourceSubscriptions": ["cdp-supervisor://tasks/default", "file:///x", "cdp-supervisor://tasks/%64efault"],
        }});
        listens
            .open(0, &id, &params, out.clone(), |_| false)
            .expect("opened");
        listens.push("other", &[event("other")]);
        listens.push("default", &[event("default")]);
        listens.end_all();
        listens.push("default", &[event("default")]);
        let lines = out.lines.lock().unwrap().clone();
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(
            lines[0]["method"],
            "notifications/subscriptions/acknowledged"
        );
        assert_eq!(
            lines[0]["params"]["_meta"][meta::SUBSCRIPTION_ID],
            "listen-1"
        );
        assert_eq!(
            lines[0]["params"]["notifications"],
            json!({"resourceSubscriptions": ["cdp-supervisor://tasks/default"]}),
            "only the task URI is honored, once"
        );
        assert_eq!(lines[1]["method"], "notifications/resources/updated");
        assert_eq!(lines[1]["params"]["uri"], "cdp-supervisor://tasks/default");
        assert_eq!(
            lines[1]["params"]["_meta"][meta::SUBSCRIPTION_ID],
            "listen-1"
        );
        assert_eq!(
            lines[1]["params"]["_meta"][meta::EVENT]["event"],
            "dialog_opened"
        );
        assert_eq!(lines[2]["id"], "listen-1");
        assert_eq!(lines[2]["result"]["resultType"], "complete");
        assert_eq!(
            lines[2]["result"]["_meta"][meta::SUBSCRIPTION_ID],
            "listen-1"
        );
    }

    /// A sink whose client stopped reading: a write blocks until its deadline (at most the 2 s a
    /// stream write gets) and fails.
    struct Stuck;

    impl Sink for Stuck {
        fn send_line(&self, _line: String) -> bool {
            std::thread::sleep(std::time::Duration::from_secs(2));
            false
        }

        fn end(&self, _line: String, by: Deadline) -> bool {
            let two = std::time::Duration::from_secs(2);
            std::thread::sleep(by.remaining().map_or(two, |left| left.min(two)));
            false
        }
    }

    #[test]
    fn streams_whose_clients_stopped_reading_share_one_budget_at_shutdown() {
        let listens = Listens::default();
        let params =
            json!({"notifications": {"resourceSubscriptions": ["cdp-supervisor://tasks/t"]}});
        for i in 0..5 {
            let id = Id::parse(&format!(r#""stuck-{i}""#));
            // The acknowledgement is written before the client stops reading.
            let kept = Arc::new(Kept::default());
            listens
                .open(i, &id, &params, kept, |_| false)
                .expect("opened");
        }
        // Swap each stream's sink for a stuck one.
        for l in listens.lock().iter_mut() {
            l.out = Arc::new(Stuck);
        }
        let t = std::time::Instant::now();
        listens.end_all();
        let took = t.elapsed();
        // 5 streams at 2 s each would be 10 s; they share END_ALL_BUDGET instead.
        assert!(
            took < END_ALL_BUDGET + std::time::Duration::from_secs(1),
            "end_all took {took:?}"
        );
        assert!(listens.lock().is_empty(), "every stream ended");
    }

    #[test]
    fn cancelled_failed_duplicate_and_excess_streams() {
        let listens = Listens::default();
        let out = Arc::new(Kept::default());
        let params =
            json!({"notifications": {"resourceSubscriptions": ["cdp-supervisor://tasks/t"]}});
        let id = Id::parse("7");
        // A stream on `out`, on a channel with no call in flight.
        let open = |channel: u64, id: &Id, params: &Value| {
            listens.open(channel, id, params, out.clone(), |_| false)
        };
        open(0, &id, &params).unwrap();
        // The same id (by value) on the same channel is refused; on another channel it is fine.
        let dup = open(0, &Id::parse("7.0"), &params).unwrap_err();
        assert_eq!(dup.error, Some(-32600), "{dup:?}");
        open(1, &id, &params).unwrap();
        // A busy id (a call in flight) is refused.
        assert!(
            listens
                .open(0, &Id::parse("8"), &params, out.clone(), |_| true)
                .is_err()
        );
        assert!(listens.cancel(0, &id.key()));
        assert!(!listens.cancel(0, &id.key()));
        assert!(listens.is_open(1, &id.key()));
        out.broken.store(true, std::sync::atomic::Ordering::Release);
        listens.push("t", &[event("t")]);
        assert!(
            !listens.is_open(1, &id.key()),
            "a stream whose output failed is dropped"
        );
        out.broken
            .store(false, std::sync::atomic::Ordering::Release);
        for n in 0..MAX_LISTENS {
            open(2, &Id::parse(&n.to_string()), &params).unwrap();
        }
        let full = open(2, &Id::parse("\"one more\""), &params).unwrap_err();
        let full = full.line.unwrap_or_default();
        assert!(full.contains("streams are open"), "{full}");
        for bad in [
            json!({}),
            json!({"notifications": []}),
            json!({"notifications": {"resourceSubscriptions": "cdp-supervisor://tasks/t"}}),
            json!({"notifications": {"resourceSubscriptions": [1]}}),
            json!({"notifications": {"resourceSubscriptions": vec!["x"; MAX_URIS + 1]}}),
        ] {
            let e = open(3, &Id::parse("1"), &bad).unwrap_err();
            assert_eq!(e.error, Some(-32602), "{bad}: {e:?}");
        }
    }
}

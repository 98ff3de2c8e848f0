//! The SSE stream of a `subscriptions/listen` POST: written by the notifier, followed by the
//! connection's thread until the client leaves or the stream ends; either way its connection
//! closes (it left the connection places for a listen stream's, `Shared::start_listening`).

use super::*;

/// Waits, without a deadline (no wake-ups), until the client closes the connection or sends
/// more on it (a next request cannot be answered behind an endless one), or the stream ends
/// (its sink closes the connection); then the stream is dropped, if it is still open.
pub(in crate::mcp::http) fn follow_stream(sh: &Shared, conn: &mut Conn<Socket>, channel: u64) {
    let _ = conn.watch(Deadline::NEVER);
    sh.mcp.inner.notifier.listens().drop_channel(channel);
}

/// Where a stream is.
#[derive(Debug, Default)]
pub(super) struct StreamState {
    /// The answer's head is out (it goes with the first frame, the acknowledgement).
    started: bool,
    /// The stream ended: its response was written, or a write failed.
    ended: bool,
}

/// The SSE stream of one `subscriptions/listen` POST: its head goes out with the first frame
/// (the acknowledgement); a response line (the graceful end) or a failed write ends it and
/// closes its connection.
pub(super) struct StreamSink {
    pub(super) out: Arc<Out>,
    pub(super) state: Mutex<StreamState>,
}

impl Sink for StreamSink {
    fn send_line(&self, line: String) -> bool {
        self.send(line, Deadline::NEVER)
    }

    fn send_line_by(&self, line: String, by: Deadline) -> bool {
        self.send(line, by)
    }
}

impl StreamSink {
    /// Writes one line (the head first, if it is not out yet), each write waiting at most
    /// [`STREAM_WRITE_STALL`] for the client, none past `by`.
    fn send(&self, line: String, by: Deadline) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.ended {
            return false;
        }
        let mut bytes = Vec::new();
        if !state.started {
            bytes = sse_head(false);
            state.started = true;
        }
        bytes.extend(sse_event(&line));
        // A message without a method is the stream's own response: its end.
        let response = serde_json::from_str::<Value>(&line)
            .ok()
            .is_some_and(|v| v.get("method").is_none());
        if response {
            bytes.extend_from_slice(http1::LAST_CHUNK);
        }
        let written = !by.passed() && self.out.send_within(&bytes, STREAM_WRITE_STALL, by);
        if response || !written {
            state.ended = true;
            self.out.close();
        }
        written
    }
}

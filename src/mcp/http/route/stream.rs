//! The SSE stream of a `subscriptions/listen` POST: written by the notifier, followed by the
//! connection's thread until the client leaves or the server ends it.

use super::*;

/// Keeps a `subscriptions/listen` stream open while watching the client: true when the server
/// ended it with its response and the connection may go on; false when it must close (the
/// client left or sent more on it, which ends the stream without a response).
pub(super) fn follow_stream(
    sh: &Shared,
    reader: &mut Reader,
    channel: u64,
    ended: &Receiver<bool>,
) -> bool {
    loop {
        match ended.try_recv() {
            Ok(graceful) => return graceful,
            Err(TryRecvError::Disconnected) => return false,
            Err(TryRecvError::Empty) => {}
        }
        match reader.watch(sh.options.idle_timeout) {
            Err(e) if wire::timed_out(&e) => {}
            // Closed, failed, or a next request that cannot be answered behind an endless one.
            _ => {
                sh.mcp.inner.notifier.listens().drop_channel(channel);
                return ended.try_recv().unwrap_or(false);
            }
        }
    }
}

/// The SSE stream of one `subscriptions/listen` POST: its head goes out with the first frame
/// (the acknowledgement); a response line (the graceful end) closes it.
pub(super) struct StreamSink {
    pub(super) out: Out,
    pub(super) keep_alive: bool,
    /// Whether the head is out, and whether the stream has ended.
    pub(super) state: Mutex<(bool, bool)>,
    /// Told once when the stream ends: true with its response, false when a write failed.
    pub(super) ended: Sender<bool>,
}

impl Sink for StreamSink {
    fn send_line(&self, line: String) -> bool {
        self.send(line, wire::STREAM_WRITE_TIMEOUT)
    }

    fn send_line_by(&self, line: String, by: Deadline) -> bool {
        match by.remaining() {
            None => self.send_line(line),
            Some(left) if left.is_zero() => {
                // The budget went on streams before this one: end it without its last line.
                let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
                if !state.1 {
                    state.1 = true;
                    let _ = self.ended.try_send(false);
                }
                false
            }
            Some(left) => self.send(line, left.min(wire::STREAM_WRITE_TIMEOUT)),
        }
    }
}

impl StreamSink {
    /// Writes one line (the head first, if it is not out yet) within `timeout`.
    fn send(&self, line: String, timeout: Duration) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (started, ended) = &mut *state;
        if *ended {
            return false;
        }
        let mut bytes = Vec::new();
        if !*started {
            let mut headers = Vec::new();
            if !self.keep_alive {
                headers.push(("Connection", "close".to_string()));
            }
            bytes = wire::sse_head(&headers);
            *started = true;
        }
        bytes.extend(wire::sse_event(&line));
        // A message without a method is the stream's own response: its end.
        let response = serde_json::from_str::<Value>(&line)
            .ok()
            .is_some_and(|v| v.get("method").is_none());
        if response {
            bytes.extend_from_slice(wire::LAST_CHUNK);
        }
        let written = {
            let mut s = self.out.lock().unwrap_or_else(|e| e.into_inner());
            wire::write_all(&mut s, &bytes, timeout).is_ok()
        };
        if response || !written {
            *ended = true;
            let _ = self.ended.try_send(written && response);
        }
        written
    }
}

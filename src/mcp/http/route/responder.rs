//! How a tool call that runs on a worker gets its answer written to the connection.

use super::*;

/// Writes a worker's answer on the request's connection.
pub(super) struct Responder {
    pub(super) out: Arc<Out>,
    pub(super) keep_alive: bool,
    pub(super) modern: bool,
    /// Sent `true` once written (`false`: the write failed); dropped unsent when the call was
    /// cancelled.
    pub(super) done: Sender<bool>,
}

impl Responder {
    /// Writes the answer; when it ends the connection (`Connection: close`, HTTP/1.0, a failed
    /// write), closes it right after, which also ends the connection thread's wait.
    pub(super) fn answer(self, answer: Answer) {
        let written = write_answer(&self.out, answer, self.modern, self.keep_alive);
        let _ = self.done.send(written);
        if !written || !self.keep_alive {
            self.out.close();
        }
    }
}

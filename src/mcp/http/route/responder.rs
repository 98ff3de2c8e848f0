//! How a tool call that runs on a worker gets its answer written to the connection.

use super::*;

/// Writes a worker's answer on the request's connection.
pub(super) struct Responder {
    pub(super) out: Out,
    pub(super) keep_alive: bool,
    pub(super) modern: bool,
    /// Sent `true` once written (`false`: the write failed); dropped unsent when the call was
    /// cancelled.
    pub(super) done: Sender<bool>,
}

impl Responder {
    pub(super) fn answer(self, answer: Answer) {
        let written = write_answer(&self.out, answer, self.modern, self.keep_alive);
        let _ = self.done.send(written);
    }
}

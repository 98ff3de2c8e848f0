//! The frames' execution contexts (see `core/frames.rs`): the Runtime domain's events when it
//! is on, the contexts callers found through the DOM otherwise, and the document numbers that
//! keep an answer about an old document from being taken for the new one.

use super::Frames;

impl Frames {
    /// Frame `frame_id` shows a new document: a new number, and (unless the Runtime domain's
    /// events say when contexts come and go) no context until one is found for it.
    pub(super) fn new_document(&mut self, frame_id: &str) {
        if let Some(rec) = self.map.get_mut(frame_id) {
            rec.document = take(&mut self.next_document);
            if !self.contexts_from_events {
                rec.default_context = None;
            }
            self.changed = true;
        }
    }

    /// A caller found `ctx`, the main world of document `document` of frame `frame_id`, on
    /// `session` (`supervisor/main_world.rs`): kept while the frame shows that document there.
    pub fn main_world_found(
        &mut self,
        session: &str,
        frame_id: &str,
        document: u64,
        ctx: i64,
    ) -> bool {
        match self.map.get_mut(frame_id) {
            Some(r)
                if r.owner_session == session
                    && r.document == document
                    && !r.crashed
                    && r.default_context != Some(ctx) =>
            {
                r.default_context = Some(ctx);
                self.changed = true;
                true
            }
            _ => false,
        }
    }

    /// A default execution context appeared for `frame_id` on `session`.
    pub fn context_created(&mut self, session: &str, frame_id: &str, ctx: i64) -> bool {
        match self.map.get_mut(frame_id) {
            Some(r) if r.owner_session == session => {
                r.default_context = Some(ctx);
                self.changed = true;
                true
            }
            Some(_) => false,
            None => {
                if self.early_contexts.len() < self.limits.frames_max {
                    self.early_contexts
                        .insert(frame_id.to_string(), (session.to_string(), ctx));
                }
                false
            }
        }
    }

    /// A context went away.
    pub fn context_destroyed(&mut self, session: &str, ctx: i64) -> bool {
        let mut hit = false;
        for r in self.map.values_mut() {
            if r.owner_session == session && r.default_context == Some(ctx) {
                r.default_context = None;
                hit = true;
            }
        }
        self.early_contexts
            .retain(|_, (s, c)| !(s == session && *c == ctx));
        self.changed |= hit;
        hit
    }

    /// All contexts of a session went away.
    pub fn contexts_cleared(&mut self, session: &str) -> bool {
        let mut hit = false;
        for r in self.map.values_mut() {
            if r.owner_session == session && r.default_context.take().is_some() {
                hit = true;
            }
        }
        self.early_contexts.retain(|_, (s, _)| s != session);
        self.changed |= hit;
        hit
    }
}

/// The next document number (and moves the counter on).
pub(super) fn take(next: &mut u64) -> u64 {
    let n = *next;
    *next += 1;
    n
}

//! The frame map (SPEC §7): every frame the page has, which session owns it, its default
//! execution context, and the capped breadth-first `frame_tree` the snapshot shows.
//!
//! A frame's default (main-world) context comes from `Runtime.executionContextCreated` when the
//! Runtime domain is on (`browser.capture_console`), and otherwise from a caller that found it
//! through the DOM (`supervisor/main_world.rs`; [`Frames::main_world_found`]). Each document a
//! frame shows gets a number of its own (`FrameRecord::document`), so that an answer about a
//! document the frame has left is never taken for its new one; without the Runtime domain's
//! events, a new document also forgets the old document's context.
//!
//! The map is a forest by construction: an event that would make a frame its own parent or
//! ancestor (self-parents and cycles, SPEC §14) is rejected before it changes anything, and
//! every walk of the map carries a visited set or a step bound anyway, so no sequence of wire
//! events can make a walk loop or grow its work list without bound.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use crate::config::Limits;
use crate::protocol;
use crate::snapshot::{FrameEntry, FrameRecord, FrameTree};

mod contexts;
use contexts::take;

/// The full frame map as published.
pub type FrameMap = Arc<HashMap<String, FrameRecord>>;

/// Frames of one supervisor. Owned by the reader thread.
#[derive(Debug)]
pub struct Frames {
    limits: Limits,
    map: HashMap<String, FrameRecord>,
    /// Sibling order in `frame_tree`: document order for what `Page.getFrameTree` listed, then
    /// the order in which frames attached.
    order: HashMap<String, u64>,
    next_order: u64,
    main: Option<String>,
    /// Default contexts seen before their frame: frame id -> (session, context id).
    early_contexts: HashMap<String, (String, i64)>,
    /// Anything published changed since the last [`Frames::take_published`].
    changed: bool,
    /// A frame came or went, or a frame's origin changed, since the last
    /// [`Frames::take_origins_changed`] (the sites the dialog rule reads may have moved).
    origins_changed: bool,
    /// Contexts come and go with the Runtime domain's events (it is enabled); otherwise a new
    /// document clears its frame's context itself.
    contexts_from_events: bool,
    /// The number the next document gets (`FrameRecord::document`).
    next_document: u64,
}

impl Frames {
    /// The session that owns `frame_id`'s document, when the frame is known.
    pub fn owner_of(&self, frame_id: &str) -> Option<&str> {
        self.map.get(frame_id).map(|r| r.owner_session.as_str())
    }

    /// The frame whose default execution context on `session` is `ctx`.
    pub fn frame_of_context(&self, session: &str, ctx: i64) -> Option<String> {
        self.map
            .values()
            .find(|r| r.owner_session == session && r.default_context == Some(ctx))
            .map(|r| r.frame_id.clone())
    }

    /// An empty map; `contexts_from_events` when the Runtime domain is enabled on the sessions.
    pub fn new(limits: Limits, contexts_from_events: bool) -> Frames {
        Frames {
            contexts_from_events,
            next_document: 1,
            limits,
            map: HashMap::new(),
            order: HashMap::new(),
            next_order: 0,
            main: None,
            early_contexts: HashMap::new(),
            changed: true,
            origins_changed: true,
        }
    }

    /// Whether making `parent` the parent of `frame_id` would close a cycle: `parent` is
    /// `frame_id` itself or one of its descendants. The walk up from `parent` is bounded by the
    /// map's size, and an over-long chain counts as a cycle.
    fn would_cycle(&self, frame_id: &str, parent: &str) -> bool {
        let mut cur = Some(parent);
        let mut steps = 0usize;
        while let Some(id) = cur {
            if id == frame_id || steps > self.map.len() {
                return true;
            }
            steps += 1;
            cur = self.map.get(id).and_then(|r| r.parent_frame_id.as_deref());
        }
        false
    }

    /// The same check for an event that names a parent (an empty id names none).
    fn rejects_parent(&self, frame_id: &str, parent: Option<&str>) -> bool {
        match parent.filter(|p| !p.is_empty()) {
            Some(p) if self.would_cycle(frame_id, p) => {
                log::debug!("ignoring frame {frame_id:?} with parent {p:?}: a frame cycle");
                true
            }
            _ => false,
        }
    }

    fn upsert(&mut self, frame_id: &str, owner: &str) -> Option<&mut FrameRecord> {
        if !self.map.contains_key(frame_id) {
            if self.map.len() >= self.limits.frames_max {
                return None;
            }
            let mut rec = FrameRecord {
                frame_id: frame_id.to_string(),
                owner_session: owner.to_string(),
                document: take(&mut self.next_document),
                ..FrameRecord::default()
            };
            if let Some((s, ctx)) = self.early_contexts.remove(frame_id)
                && s == owner
            {
                rec.default_context = Some(ctx);
            }
            self.map.insert(frame_id.to_string(), rec);
            self.order.insert(frame_id.to_string(), self.next_order);
            self.next_order += 1;
            self.origins_changed = true;
        }
        self.changed = true;
        self.map.get_mut(frame_id)
    }

    fn apply_frame(&mut self, session: &str, f: &protocol::Frame, is_page: bool) -> bool {
        if f.id.is_empty() || self.rejects_parent(&f.id, f.parent_id.as_deref()) {
            return false;
        }
        let is_main_of_session = f.parent_id.is_none();
        let Some(rec) = self.upsert(&f.id, session) else {
            return false;
        };
        rec.url = match &f.url_fragment {
            Some(frag) if !frag.is_empty() => format!("{}{}", f.url, frag),
            _ => f.url.clone(),
        };
        // Chromium reports opaque origins (about:srcdoc, data:) as "://" or "null".
        let origin = f
            .security_origin
            .clone()
            .filter(|o| !o.is_empty() && o != "://" && o != "null")
            .unwrap_or_else(|| origin_of(&f.url));
        let origin_changed = rec.origin != origin;
        rec.origin = origin;
        rec.name = f.name.clone().filter(|n| !n.is_empty());
        // A new document: a crashed renderer has been replaced (SPEC §10).
        rec.crashed = false;
        if let Some(p) = &f.parent_id {
            rec.parent_frame_id = Some(p.clone());
        }
        if !rec.is_oopif {
            rec.owner_session = session.to_string();
        }
        if is_page && is_main_of_session {
            self.main = Some(f.id.clone());
        }
        self.origins_changed |= origin_changed;
        true
    }

    /// Seeds from a `Page.getFrameTree` reply on `session`.
    pub fn seed(&mut self, session: &str, tree: &protocol::FrameTreeNode, is_page: bool) {
        let mut queue = VecDeque::from([(tree, is_page)]);
        while let Some((node, is_page)) = queue.pop_front() {
            self.apply_frame(session, &node.frame, is_page);
            // The browser's tree is in document order: adopt it for every frame it lists.
            if self.map.contains_key(&node.frame.id) {
                self.order.insert(node.frame.id.clone(), self.next_order);
                self.next_order += 1;
            }
            queue.extend(node.child_frames.iter().map(|c| (c, false)));
        }
    }

    /// `Page.frameAttached`.
    pub fn attached(&mut self, session: &str, frame_id: &str, parent: &str) -> bool {
        if frame_id.is_empty() || self.rejects_parent(frame_id, Some(parent)) {
            return false;
        }
        let known = self.map.contains_key(frame_id);
        let Some(rec) = self.upsert(frame_id, session) else {
            return false;
        };
        if !parent.is_empty() {
            rec.parent_frame_id = Some(parent.to_string());
        }
        if !known {
            rec.origin = "null".into();
        }
        true
    }

    /// `Page.frameNavigated`: a new document, so the old document's child frames are gone
    /// (Chromium sends no `frameDetached` for them on a reload).
    pub fn navigated(&mut self, session: &str, frame: &protocol::Frame, is_page: bool) -> bool {
        if frame.id.is_empty() || self.rejects_parent(&frame.id, frame.parent_id.as_deref()) {
            return false;
        }
        let children: Vec<String> = self
            .map
            .values()
            .filter(|r| r.parent_frame_id.as_deref() == Some(frame.id.as_str()))
            .map(|r| r.frame_id.clone())
            .collect();
        for c in children {
            if self.map.contains_key(&c) {
                self.remove_subtree(&c);
            }
        }
        let applied = self.apply_frame(session, frame, is_page);
        if applied {
            self.new_document(&frame.id);
        }
        applied
    }

    /// `Page.frameDetached` on `session`: `swap` keeps the frame (it moved to another process).
    /// Only the session that owns the frame, or its parent frame, may remove it.
    pub fn detached(&mut self, session: &str, frame_id: &str, reason: Option<&str>) -> bool {
        let Some(rec) = self.map.get(frame_id) else {
            return false;
        };
        if reason == Some("swap") {
            return false;
        }
        let parent_owner = rec
            .parent_frame_id
            .as_ref()
            .and_then(|p| self.map.get(p))
            .map(|p| p.owner_session.as_str());
        if rec.owner_session != session && parent_owner != Some(session) {
            return false;
        }
        self.remove_subtree(frame_id);
        true
    }

    /// `Page.navigatedWithinDocument`: `location.hash`, `history.pushState` and the like change
    /// the URL of `frame_id`'s document without a new document (its origin cannot change).
    pub fn navigated_within_document(&mut self, session: &str, frame_id: &str, url: &str) -> bool {
        match self.map.get_mut(frame_id) {
            Some(r) if r.owner_session == session && !url.is_empty() && r.url != url => {
                r.url = url.to_string();
                self.changed = true;
                true
            }
            _ => false,
        }
    }

    /// The renderer behind `session` crashed: every frame whose document it owned is marked.
    pub fn crashed(&mut self, session: &str) -> bool {
        let mut hit = false;
        for r in self.map.values_mut() {
            if r.owner_session == session && !r.crashed {
                r.crashed = true;
                r.default_context = None;
                r.document = take(&mut self.next_document);
                hit = true;
            }
        }
        self.changed |= hit;
        hit
    }

    /// `session` has a live renderer again (`Inspector.targetReloadedAfterCrash`).
    pub fn recovered(&mut self, session: &str) -> bool {
        let mut hit = false;
        for r in self.map.values_mut() {
            if r.owner_session == session && r.crashed {
                r.crashed = false;
                hit = true;
            }
        }
        self.changed |= hit;
        hit
    }

    fn remove_subtree(&mut self, root: &str) {
        // The visited set keeps the walk finite whatever the parent links say.
        let mut seen: HashSet<String> = HashSet::from([root.to_string()]);
        let mut doomed = vec![root.to_string()];
        let mut i = 0;
        while i < doomed.len() {
            let parent = doomed[i].clone();
            for r in self.map.values() {
                if r.parent_frame_id.as_deref() == Some(parent.as_str())
                    && seen.insert(r.frame_id.clone())
                {
                    doomed.push(r.frame_id.clone());
                }
            }
            i += 1;
        }
        for id in doomed {
            self.map.remove(&id);
            self.order.remove(&id);
            self.early_contexts.remove(&id);
        }
        if self
            .main
            .as_deref()
            .is_some_and(|m| !self.map.contains_key(m))
        {
            self.main = None;
        }
        self.changed = true;
        self.origins_changed = true;
    }

    /// A followed page (issue 14) went away: its frames (its main frame's id is its target id)
    /// leave the map.
    pub fn remove_page(&mut self, target_id: &str) -> bool {
        if !self.map.contains_key(target_id) {
            return false;
        }
        self.remove_subtree(target_id);
        true
    }

    /// The security origin of frame `frame_id`'s document, when known.
    pub fn origin_of(&self, frame_id: &str) -> Option<&str> {
        self.map.get(frame_id).map(|r| r.origin.as_str())
    }

    /// The URL of frame `frame_id`, when known.
    pub fn url_of(&self, frame_id: &str) -> Option<&str> {
        self.map.get(frame_id).map(|r| r.url.as_str())
    }

    /// `Target.attachedToTarget` of type `iframe`: the frame (id = target id) now runs in its own
    /// process, on `session`.
    pub fn oopif_attached(
        &mut self,
        session: &str,
        target_id: &str,
        url: &str,
        parent_frame_id: Option<&str>,
    ) -> bool {
        if target_id.is_empty() || self.rejects_parent(target_id, parent_frame_id) {
            return false;
        }
        let document = take(&mut self.next_document);
        let Some(rec) = self.upsert(target_id, session) else {
            return false;
        };
        rec.is_oopif = true;
        rec.crashed = false;
        rec.session_id = Some(session.to_string());
        rec.owner_session = session.to_string();
        rec.default_context = None;
        rec.document = document;
        let mut origin_changed = false;
        if !url.is_empty() {
            rec.url = url.to_string();
            let origin = origin_of(url);
            origin_changed = rec.origin != origin;
            rec.origin = origin;
        }
        if let Some(p) = parent_frame_id.filter(|p| !p.is_empty()) {
            rec.parent_frame_id = Some(p.to_string());
        }
        self.origins_changed |= origin_changed;
        true
    }

    /// `Target.detachedFromTarget` of an OOPIF session. The frame itself stays until its parent
    /// reports `frameDetached` (it may be swapping back in-process, or to a new session); what
    /// lived only in the detached session (its nested frames) is gone with it.
    pub fn oopif_detached(&mut self, session: &str, target_id: &str) -> bool {
        let Some(rec) = self.map.get(target_id) else {
            return false;
        };
        if rec.session_id.as_deref() != Some(session) {
            return false;
        }
        let parent_owner = rec
            .parent_frame_id
            .as_ref()
            .and_then(|p| self.map.get(p))
            .map(|p| p.owner_session.clone());
        let nested: Vec<String> = self
            .map
            .values()
            .filter(|r| r.owner_session == session && r.frame_id != target_id)
            .map(|r| r.frame_id.clone())
            .collect();
        for id in nested {
            if self.map.contains_key(&id) {
                self.remove_subtree(&id);
            }
        }
        match parent_owner {
            Some(owner) => {
                if let Some(rec) = self.map.get_mut(target_id) {
                    rec.is_oopif = false;
                    rec.session_id = None;
                    rec.owner_session = owner;
                    rec.default_context = None;
                    rec.document = take(&mut self.next_document);
                }
            }
            None => self.remove_subtree(target_id),
        }
        self.changed = true;
        true
    }

    /// An OOPIF session died with its parent session: its frame and subtree are gone.
    pub fn oopif_gone(&mut self, session: &str, target_id: &str) -> bool {
        match self.map.get(target_id) {
            Some(r) if r.session_id.as_deref() == Some(session) => {
                self.remove_subtree(target_id);
                true
            }
            _ => false,
        }
    }

    /// When anything changed: the full map and the capped tree, for publishing.
    pub fn take_published(&mut self) -> Option<(FrameMap, Arc<FrameTree>)> {
        std::mem::take(&mut self.changed).then(|| self.published())
    }

    /// True (once) when a frame came or went or a frame's origin changed since the last call.
    pub fn take_origins_changed(&mut self) -> bool {
        std::mem::take(&mut self.origins_changed)
    }

    /// The full map and the capped tree.
    pub fn published(&self) -> (FrameMap, Arc<FrameTree>) {
        (Arc::new(self.map.clone()), Arc::new(self.tree()))
    }

    /// The capped breadth-first tree (SPEC §7).
    pub fn tree(&self) -> FrameTree {
        match &self.main {
            Some(m) => build_tree(&self.map, m, &self.limits, |id| {
                self.order.get(id).copied().unwrap_or(u64::MAX)
            }),
            None => FrameTree::default(),
        }
    }
}

/// The capped breadth-first tree (SPEC §7) of the page whose main frame is `top_id`, from a
/// published frame map: how `browser_snapshot {target_id}` shows a followed popup (issue 14).
/// Siblings come in frame-id order (the attach order is not published).
pub fn tree_of(map: &HashMap<String, FrameRecord>, top_id: &str, limits: &Limits) -> FrameTree {
    build_tree(map, top_id, limits, |_| 0)
}

fn build_tree(
    map: &HashMap<String, FrameRecord>,
    top_id: &str,
    limits: &Limits,
    order: impl Fn(&str) -> u64,
) -> FrameTree {
    let Some(top) = map.get(top_id) else {
        return FrameTree::default();
    };
    let mut children_of: HashMap<&str, Vec<&FrameRecord>> = HashMap::new();
    for r in map.values() {
        if let Some(p) = &r.parent_frame_id
            && r.frame_id != top.frame_id
        {
            children_of.entry(p.as_str()).or_default().push(r);
        }
    }
    for v in children_of.values_mut() {
        v.sort_by(|a, b| (order(&a.frame_id), &a.frame_id).cmp(&(order(&b.frame_id), &b.frame_id)));
    }
    let mut out = Vec::new();
    let mut truncated = false;
    let mut seen: HashSet<&str> = HashSet::from([top.frame_id.as_str()]);
    let mut queue = VecDeque::from([(top.frame_id.as_str(), 0usize)]);
    while let Some((id, depth)) = queue.pop_front() {
        for child in children_of.get(id).map(Vec::as_slice).unwrap_or(&[]) {
            if !seen.insert(child.frame_id.as_str()) {
                continue;
            }
            let d = depth + 1;
            if child.is_oopif && d > limits.frame_tree_max_oopif_depth {
                truncated = true;
                continue;
            }
            if out.len() >= limits.frame_tree_max_entries {
                truncated = true;
                continue;
            }
            out.push(FrameEntry::from_record(child));
            queue.push_back((child.frame_id.as_str(), d));
        }
    }
    FrameTree {
        top: Some(FrameEntry::from_record(top)),
        children: out,
        truncated,
    }
}

/// `scheme://host[:port]` of a URL; `null` for opaque ones (about:, data:, ...).
pub fn origin_of(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) => u.origin().ascii_serialization(),
        Err(_) => "null".into(),
    }
}

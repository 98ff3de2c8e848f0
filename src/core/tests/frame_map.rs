//! The frame map: seeding, OOPIF swaps, nested sessions, reloads, cycles.

use super::*;

// --- the frame map

#[test]
fn the_frame_tree_is_seeded_in_document_order() {
    let mut sim = Sim::must_respond();
    sim.frame_attached(S1, "B", PAGE);
    let seed = sim.register(
        "Page.getFrameTree",
        Some(S1),
        CallKind::SeedFrameTree {
            session_id: S1.into(),
        },
    );
    sim.reply(
        seed,
        json!({"frameTree": {
        "frame": {"id": PAGE, "url": "http://a.test/"},
        "childFrames": [
            {"frame": {"id": "A", "parentId": PAGE, "url": "http://a.test/a", "name": "first"}},
            {"frame": {"id": "B", "parentId": PAGE, "url": "http://b.test/b"},
             "childFrames": [{"frame": {"id": "B1", "parentId": "B", "url": "about:blank"}}]},
        ]}}),
    );
    let snap = sim.snap();
    assert_eq!(tree_ids(&snap), ["A", "B", "B1"]);
    assert_eq!(snap.frame_tree.top.as_ref().unwrap().frame_id, PAGE);
    assert_eq!(snap.frames["A"].name.as_deref(), Some("first"));
    assert_eq!(snap.frames["B"].origin, "http://b.test");
    assert_eq!(snap.frames["B1"].origin, "null");
    assert_eq!(snap.frames["B1"].owner_session, S1);
}

/// A same-process iframe becomes an OOPIF with its own session (its document moves: a `swap`
/// detach, then the attach), and moves back when that session goes.
#[test]
fn an_oopif_swap_moves_the_frame_to_its_session_and_back() {
    let mut sim = Sim::must_respond();
    sim.frame_attached(S1, "F1", PAGE);
    sim.frame_navigated(S1, "F1", Some(PAGE), "http://a.test/same");
    let f = sim.snap().frames["F1"].clone();
    assert!(!f.is_oopif);
    assert_eq!(f.owner_session, S1);

    // Out of process.
    sim.event(
        Some(S1),
        "Page.frameDetached",
        json!({"frameId": "F1", "reason": "swap"}),
    );
    assert!(
        sim.snap().frames.contains_key("F1"),
        "a swap keeps the frame"
    );
    let out = sim.oopif(S1, "C1", "F1", PAGE);
    assert_eq!(
        out.commands_only(),
        [
            session_setup("C1", SessionKind::Iframe, bridge_only(false)),
            vec![session::resume("C1")]
        ]
        .concat()
    );
    let snap = sim.snap();
    let f = &snap.frames["F1"];
    assert!(f.is_oopif);
    assert_eq!(f.session_id.as_deref(), Some("C1"));
    assert_eq!(f.owner_session, "C1");
    assert_eq!(f.origin, "http://f1.test");
    assert_eq!(parent_of(&snap, "F1").as_deref(), Some(PAGE));
    assert_eq!(tree_ids(&snap), ["F1"]);
    assert!(snap.frame_tree.children[0].is_oopif);
    // Its own frame tree reply seeds frames on its session.
    let (seed, _) = out.only("Page.getFrameTree");
    sim.reply(
        seed,
        json!({"frameTree": {"frame": {"id": "F1", "parentId": PAGE, "url": "http://F1.test/"},
                             "childFrames": [{"frame": {"id": "F1a", "parentId": "F1",
                                                        "url": "http://F1.test/a"}}]}}),
    );
    let snap = sim.snap();
    assert_eq!(snap.frames["F1a"].owner_session, "C1");
    assert_eq!(tree_ids(&snap), ["F1", "F1a"]);

    // Back in process: the session goes, the frame stays with its parent's session, and what
    // lived only in that session goes with it.
    sim.event(
        None,
        "Target.detachedFromTarget",
        json!({"sessionId": "C1"}),
    );
    let snap = sim.snap();
    let f = &snap.frames["F1"];
    assert!(!f.is_oopif);
    assert_eq!(f.session_id, None);
    assert_eq!(f.owner_session, S1);
    assert!(!snap.frames.contains_key("F1a"));
    sim.frame_navigated(S1, "F1", Some(PAGE), "http://a.test/back");
    let snap = sim.snap();
    assert_eq!(snap.frames["F1"].url, "http://a.test/back");
    assert_eq!(snap.frames["F1"].owner_session, S1);
}

/// An OOPIF inside an OOPIF: the inner session hangs off the outer one, dialogs there belong to
/// the page, and the outer session's detach takes the inner one with it.
#[test]
fn nested_oopif_sessions_die_with_their_parent_session() {
    let mut sim = Sim::must_respond();
    sim.oopif(S1, "C1", "F1", PAGE);
    sim.oopif("C1", "C2", "F2", "F1");
    let snap = sim.snap();
    assert_eq!(parent_of(&snap, "F2").as_deref(), Some("F1"));
    assert_eq!(snap.frames["F2"].owner_session, "C2");
    assert_eq!(tree_ids(&snap), ["F1", "F2"]);

    sim.open_dialog("C2", "F2", "confirm", "Deep?");
    let d = sim.pending("d-1");
    assert_eq!(
        (d.target_id.as_str(), d.origin.as_str()),
        (PAGE, "http://f2.test")
    );
    let (_, on_c2) = sim.send(Command {
        method: "Runtime.evaluate".into(),
        params: json!({"expression": "1"}),
        session_id: Some("C2".into()),
        kind: CallKind::Plain,
    });

    sim.event(
        Some(S1),
        "Target.detachedFromTarget",
        json!({"sessionId": "C1"}),
    );
    let snap = sim.snap();
    assert!(
        !snap.frames.contains_key("F2"),
        "the inner OOPIF went with C1"
    );
    assert!(!snap.frames["F1"].is_oopif);
    assert!(matches!(err(&on_c2), Error::ConnectionLost(_)));
    // A late event from the dead inner session changes nothing.
    sim.frame_attached("C2", "F3", "F2");
    assert!(!sim.snap().frames.contains_key("F3"));
}

/// A reload (a new document of the main frame) clears the old document's frames; the new ones
/// come by events or a new seed.
#[test]
fn a_reload_clears_the_old_documents_frames() {
    let mut sim = Sim::must_respond();
    sim.frame_attached(S1, "A", PAGE);
    sim.frame_attached(S1, "A1", "A");
    sim.frame_attached(S1, "B", PAGE);
    sim.oopif(S1, "C1", "X", "B");
    assert_eq!(sim.snap().frames.len(), 5);

    sim.frame_navigated(S1, PAGE, None, "http://a.test/?reloaded");
    let snap = sim.snap();
    assert_eq!(snap.frames.len(), 1, "{:?}", snap.frames.keys());
    assert_eq!(
        snap.frame_tree.top.as_ref().unwrap().url,
        "http://a.test/?reloaded"
    );
    assert!(tree_ids(&snap).is_empty());

    sim.frame_attached(S1, "N", PAGE);
    sim.frame_navigated(S1, "N", Some(PAGE), "http://n.test/");
    let snap = sim.snap();
    assert_eq!(tree_ids(&snap), ["N"]);
    assert_eq!(snap.frames["N"].origin, "http://n.test");
}

/// Frame-parent cycles from the wire (SPEC §14) are rejected before they change anything, and
/// the walks over the map (detach, reload, the tree) end.
#[test]
fn frame_cycles_are_rejected_and_walks_end() {
    let mut sim = Sim::must_respond();
    // A self-parent.
    sim.frame_attached(S1, "A", "A");
    assert!(!sim.snap().frames.contains_key("A"));
    sim.frame_navigated(S1, "A", Some("A"), "http://a.test/a");
    assert!(!sim.snap().frames.contains_key("A"));

    // A chain MAIN <- A <- B <- C.
    sim.frame_attached(S1, "A", PAGE);
    sim.frame_attached(S1, "B", "A");
    sim.frame_attached(S1, "C", "B");
    // A 2-cycle (A under B) and a 3-cycle (A under C): rejected, by every event that names a
    // parent.
    for parent in ["B", "C"] {
        sim.frame_attached(S1, "A", parent);
        sim.frame_navigated(S1, "A", Some(parent), "http://evil.test/");
        sim.oopif(S1, "CX", "A", parent);
        let snap = sim.snap();
        assert_eq!(
            parent_of(&snap, "A").as_deref(),
            Some(PAGE),
            "A under {parent}"
        );
        assert!(!snap.frames["A"].is_oopif);
        assert_ne!(snap.frames["A"].url, "http://evil.test/");
    }
    // The main frame under its own descendant.
    sim.frame_navigated(S1, PAGE, Some("C"), "http://evil.test/");
    assert_eq!(parent_of(&sim.snap(), PAGE), None);
    // Re-parenting that makes no cycle is allowed: C moves under A.
    sim.frame_attached(S1, "C", "A");
    let snap = sim.snap();
    assert_eq!(parent_of(&snap, "C").as_deref(), Some("A"));
    assert_eq!(tree_ids(&snap), ["A", "B", "C"]);
    // Detaching A takes its whole subtree, and nothing else.
    sim.event(Some(S1), "Page.frameDetached", json!({"frameId": "A"}));
    let snap = sim.snap();
    let mut left: Vec<&String> = snap.frames.keys().collect();
    left.sort();
    assert_eq!(left, [PAGE]);
}

/// Only the session that owns a frame (or its parent frame's owner) may remove it; a session we
/// never attached may not touch the map at all.
#[test]
fn frames_belong_to_their_sessions() {
    let mut sim = Sim::must_respond();
    sim.oopif(S1, "C1", "F1", PAGE);
    sim.frame_attached(S1, "G", PAGE);
    sim.event(Some("C1"), "Page.frameDetached", json!({"frameId": "G"}));
    assert!(sim.snap().frames.contains_key("G"), "C1 does not own G");
    sim.event(
        Some("STRANGER"),
        "Page.frameDetached",
        json!({"frameId": "F1"}),
    );
    sim.frame_attached("STRANGER", "H", PAGE);
    let snap = sim.snap();
    assert!(snap.frames.contains_key("F1"));
    assert!(!snap.frames.contains_key("H"));
    sim.event(Some(S1), "Page.frameDetached", json!({"frameId": "F1"}));
    assert!(
        !sim.snap().frames.contains_key("F1"),
        "its parent's owner may"
    );
}

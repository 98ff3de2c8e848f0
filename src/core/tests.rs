//! Scenario tests of the clock-free state machine: CDP messages (the JSON text the browser sends)
//! and call registrations in; outgoing commands, watchdog requests, deliveries and the snapshot
//! out. No socket, no sleep, no thread: time is a simulated [`Now`] advanced by hand.
//!
//! [`Sim`] plays the reader thread's part: it registers every command the core queues under a
//! fresh id (as `Reader::carry_out` does), so the replies a test feeds back find them, and hands
//! deliveries to the callers' channels.

use super::calls::PURGE_EVERY;
use super::policy::WithDialog;
use super::*;
use crate::deadline::Deadline;
use crate::error::Error;
use crate::snapshot::{
    BlockedReason, ChooserMode, ClosedBy, ClosedDialog, DownloadState, PendingDialog,
};
use crossbeam_channel::{Receiver, TryRecvError, bounded};
use serde_json::json;
use std::time::Instant;

/// The task's page target, its session and its main frame's URL in every scenario.
const PAGE: &str = "MAIN";
const S1: &str = "S1";

fn settings(policy: DialogPolicy, bridge: BridgeMode) -> CoreSettings {
    CoreSettings {
        policy,
        dialog_timeout: Duration::from_secs(300),
        limits: Limits::default(),
        bridge,
        follow_popups: false,
        browser_auto_attach: true,
        capture_console: false,
    }
}

/// The set-up extras of a session with the bridge on or off, console capture off (the default).
fn bridge_only(bridge: bool) -> Extras {
    Extras {
        bridge,
        console: false,
    }
}

/// What the core asked for in one step.
#[derive(Debug, Default)]
struct Out {
    /// Commands, as registered under their ids.
    commands: Vec<(u64, Command)>,
    /// `ArmWatchdog` requests.
    armed: Vec<(String, Instant)>,
    /// `CancelWatchdog` requests.
    cancelled: Vec<String>,
    /// Downloads to move: guid, from, to.
    moves: Vec<(String, std::path::PathBuf, std::path::PathBuf)>,
    /// `WatchRenderer` requests (a popup let go past both caps).
    watch_renderer: usize,
}

impl Out {
    fn methods(&self) -> Vec<(&str, Option<&str>)> {
        self.commands
            .iter()
            .map(|(_, c)| (c.method.as_ref(), c.session_id.as_deref()))
            .collect()
    }

    fn only(&self, method: &str) -> (u64, &Command) {
        let found: Vec<_> = self
            .commands
            .iter()
            .filter(|(_, c)| c.method == method)
            .collect();
        assert_eq!(found.len(), 1, "one {method} in {:?}", self.methods());
        (found[0].0, &found[0].1)
    }

    /// `(method, session)` pairs, owned.
    fn methods_owned(&self) -> Vec<(String, String)> {
        self.methods()
            .into_iter()
            .map(|(m, s)| (m.to_string(), s.unwrap_or_default().to_string()))
            .collect()
    }

    fn commands_only(&self) -> Vec<Command> {
        self.commands.iter().map(|(_, c)| c.clone()).collect()
    }
}

/// A core driven by hand, on a simulated clock.
struct Sim {
    core: Core,
    now: Now,
    next_id: u64,
}

impl Sim {
    fn new(settings: CoreSettings) -> Sim {
        Sim {
            core: Core::new("t", "ws://x/", settings),
            now: Now::read(),
            next_id: 1,
        }
    }

    /// Attached to page `MAIN` on session `S1`, its main frame at `http://a.test/`, the attach
    /// commands already carried out.
    fn attached(settings: CoreSettings) -> Sim {
        let mut sim = Sim::new(settings);
        let attach = sim.register(
            "Target.attachToTarget",
            None,
            CallKind::AttachPage {
                target_id: PAGE.into(),
            },
        );
        sim.reply(attach, json!({"sessionId": S1}));
        sim.event(
            Some(S1),
            "Page.frameNavigated",
            json!({"frame": {"id": PAGE, "url": "http://a.test/",
                             "securityOrigin": "http://a.test"}}),
        );
        sim.step();
        sim
    }

    fn must_respond() -> Sim {
        Sim::attached(settings(DialogPolicy::MustRespond, BridgeMode::Off))
    }

    fn advance(&mut self, ms: u64) {
        self.now = self.now.after(Duration::from_millis(ms));
    }

    fn text(&mut self, text: &str) {
        self.core.on_text(text, self.now);
        self.deliver();
    }

    fn event(&mut self, session: Option<&str>, method: &str, params: Value) {
        let mut m = json!({"method": method, "params": params});
        if let Some(s) = session {
            m["sessionId"] = json!(s);
        }
        self.text(&m.to_string());
    }

    fn reply(&mut self, id: u64, result: Value) {
        self.text(&json!({"id": id, "result": result}).to_string());
    }

    fn error(&mut self, id: u64, message: &str) {
        self.text(&json!({"id": id, "error": {"code": -32000, "message": message}}).to_string());
    }

    fn register_call(&mut self, call: PendingCall) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.core.register(id, call, self.now);
        self.deliver();
        id
    }

    /// A call nobody waits on.
    fn register(&mut self, method: &str, session: Option<&str>, kind: CallKind) -> u64 {
        self.register_call(PendingCall {
            method: method.into(),
            session_id: session.map(str::to_string),
            kind,
            reply: None,
            expires: Deadline::NEVER,
        })
    }

    /// A caller's command, and the channel its reply comes on.
    fn send(&mut self, c: Command) -> (u64, Receiver<CallResult>) {
        let (tx, rx) = bounded(1);
        let id = self.register_call(PendingCall {
            method: c.method.into(),
            session_id: c.session_id,
            kind: c.kind,
            reply: Some(tx),
            expires: Deadline::NEVER,
        });
        (id, rx)
    }

    /// The agent answers dialog `id` as it is pending now.
    fn answer(
        &mut self,
        id: &str,
        accept: bool,
        text: Option<&str>,
        by: ClosedBy,
    ) -> (u64, Receiver<CallResult>) {
        let d = self.pending(id);
        self.send(answer_command(&d, accept, text, by))
    }

    fn deliver(&mut self) {
        for (tx, r) in self.core.take_deliveries() {
            // A test that dropped the receiver does not wait for this reply.
            let _ = tx.send(r);
        }
    }

    /// Carries out what the core queued, as the reader does.
    fn step(&mut self) -> Out {
        let mut out = Out::default();
        for o in self.core.take_outgoing() {
            match o {
                Outgoing::Command(c) => {
                    let id = self.register_call(PendingCall {
                        method: c.method.to_string(),
                        session_id: c.session_id.clone(),
                        kind: c.kind.clone(),
                        reply: None,
                        expires: Deadline::NEVER,
                    });
                    out.commands.push((id, c));
                }
                Outgoing::Watchdog(WatchdogMsg::Arm {
                    dialog_id,
                    deadline,
                }) => out.armed.push((dialog_id, deadline)),
                Outgoing::Watchdog(WatchdogMsg::Cancel { dialog_id }) => {
                    out.cancelled.push(dialog_id)
                }
                Outgoing::MoveDownload { guid, from, to } => out.moves.push((guid, from, to)),
                Outgoing::Watchdog(WatchdogMsg::WatchRenderer) => out.watch_renderer += 1,
            }
        }
        out
    }

    /// The snapshot of the state now. On the way it checks that publishing missed nothing:
    /// whatever `take_published` brings up to date (or `None`: nothing changed), the result
    /// equals a snapshot built from scratch.
    fn snap(&mut self) -> Snapshot {
        if let Some(published) = self.core.take_published() {
            assert_same_content(&published, &rebuilt(&self.core));
        } else {
            assert_same_content(&self.core.published, &rebuilt(&self.core));
        }
        self.core.snapshot()
    }

    fn pending(&mut self, id: &str) -> PendingDialog {
        let snap = self.snap();
        let found = snap.pending_dialogs.iter().find(|d| d.id == id).cloned();
        found.unwrap_or_else(|| panic!("{id} pending in {:?}", snap.pending_dialogs))
    }

    fn closed(&mut self, id: &str) -> ClosedDialog {
        let snap = self.snap();
        let found = snap.closed_dialog(id).cloned();
        found.unwrap_or_else(|| panic!("{id} closed in {:?}", snap.recent_dialogs))
    }

    fn open_dialog(&mut self, session: &str, frame: &str, kind: &str, message: &str) {
        self.event(
            Some(session),
            "Page.javascriptDialogOpening",
            json!({"url": "http://a.test/", "frameId": frame, "message": message,
                   "type": kind, "defaultPrompt": if kind == "prompt" { "bob" } else { "" }}),
        );
    }

    fn close_dialog(&mut self, session: &str, frame: Option<&str>, result: bool, input: &str) {
        let mut params = json!({"result": result, "userInput": input});
        if let Some(f) = frame {
            params["frameId"] = json!(f);
        }
        self.event(Some(session), "Page.javascriptDialogClosed", params);
    }

    /// A bridge request paused on `session` for frame `frame`.
    fn bridge_dialog(&mut self, session: &str, frame: &str, request: &str, message: &str) {
        self.event(
            Some(session),
            "Fetch.requestPaused",
            json!({"requestId": request, "frameId": frame, "request": {"url": format!(
                "http://{}/?kind=confirm&message={message}", crate::bridge::BRIDGE_HOST)}}),
        );
    }

    /// Session `child` (on `parent`) attached to OOPIF `frame`, whose parent frame is `parent_frame`.
    fn oopif(&mut self, parent: &str, child: &str, frame: &str, parent_frame: &str) -> Out {
        self.event(
            Some(parent),
            "Target.attachedToTarget",
            json!({"sessionId": child, "waitingForDebugger": true,
                   "targetInfo": {"targetId": frame, "type": "iframe",
                                  "url": format!("http://{}.test/", frame.to_lowercase()),
                                  "parentFrameId": parent_frame}}),
        );
        self.step()
    }

    fn frame_attached(&mut self, session: &str, frame: &str, parent: &str) {
        self.event(
            Some(session),
            "Page.frameAttached",
            json!({"frameId": frame, "parentFrameId": parent}),
        );
    }

    fn frame_navigated(&mut self, session: &str, frame: &str, parent: Option<&str>, url: &str) {
        let mut f = json!({"id": frame, "url": url});
        if let Some(p) = parent {
            f["parentId"] = json!(p);
        }
        self.event(Some(session), "Page.frameNavigated", json!({"frame": f}));
    }
}

/// The snapshot of `core`'s state built from scratch, from every part in full (what publishing
/// must always equal).
fn rebuilt(core: &Core) -> Snapshot {
    let mut s = Snapshot::empty(&core.task_id, &core.published.cdp_url);
    s.state = core.state.clone();
    s.disconnect_reason = core.disconnect_reason.clone();
    s.page_target_id = core.page_target_id.clone();
    s.page_session_id = core.page_session_id.clone();
    s.blocked = core.blocked.clone();
    s.blocked_session = core.blocked_session.clone();
    s.crashed = (core.page_session_id.as_deref()).is_some_and(|p| core.sessions.is_crashed(p));
    (s.pending_dialogs, s.unanswerable) = core.dialogs.published_open();
    s.recent_dialogs = core.dialogs.published_recent();
    s.console_errors = core.console.published();
    (s.frames, s.frame_tree) = core.frames.published();
    let main = (core.page_target_id.as_deref())
        .map(|t| (t, core.page_session_id.as_deref().unwrap_or_default()));
    let pages = core.pages.published(main, &core.frames);
    (s.pages, s.pages_truncated, s.watched_pages) = (pages.pages, pages.truncated, pages.watched);
    s.popups_let_go = pages.let_go;
    (s.created_targets, s.created_contexts) = core.created.published();
    s.renderers = Arc::new(core.renderers());
    s
}

/// Every field but `version` is the same.
fn assert_same_content(a: &Snapshot, b: &Snapshot) {
    assert_eq!(a.task_id, b.task_id);
    assert_eq!(a.cdp_url, b.cdp_url);
    assert_eq!(a.state, b.state);
    assert_eq!(a.disconnect_reason, b.disconnect_reason);
    assert_eq!(a.page_target_id, b.page_target_id);
    assert_eq!(a.page_session_id, b.page_session_id);
    assert_eq!(a.blocked, b.blocked);
    assert_eq!(a.blocked_session, b.blocked_session);
    assert_eq!(a.crashed, b.crashed);
    assert_eq!(a.pending_dialogs, b.pending_dialogs);
    assert_eq!(a.unanswerable, b.unanswerable);
    assert_eq!(a.recent_dialogs, b.recent_dialogs);
    assert_eq!(a.console_errors, b.console_errors);
    assert_eq!(a.frames, b.frames);
    assert_eq!(a.frame_tree, b.frame_tree);
    assert_eq!(a.pages, b.pages);
    assert_eq!(a.pages_truncated, b.pages_truncated);
    assert_eq!(a.watched_pages, b.watched_pages);
    assert_eq!(a.renderers, b.renderers);
    assert_eq!(a.created_targets, b.created_targets);
    assert_eq!(a.created_contexts, b.created_contexts);
    assert_eq!(a.popups_let_go, b.popups_let_go);
}

fn ok(rx: &Receiver<CallResult>) -> Value {
    match rx.try_recv() {
        Ok(Ok(v)) => v,
        other => panic!("expected a success, got {other:?}"),
    }
}

fn err(rx: &Receiver<CallResult>) -> Error {
    match rx.try_recv() {
        Ok(Err(e)) => e,
        other => panic!("expected an error, got {other:?}"),
    }
}

fn nothing_yet(rx: &Receiver<CallResult>) {
    assert!(
        matches!(rx.try_recv(), Err(TryRecvError::Empty)),
        "no reply yet"
    );
}

fn parent_of(s: &Snapshot, frame: &str) -> Option<String> {
    s.frames.get(frame).and_then(|r| r.parent_frame_id.clone())
}

fn tree_ids(s: &Snapshot) -> Vec<String> {
    s.frame_tree
        .children
        .iter()
        .map(|e| e.frame_id.clone())
        .collect()
}

// ------------------------------------------------------------------ the dialog lifecycle

/// Opening -> pending -> the agent's answer -> Closed -> the acknowledgement -> recent, for
/// each kind of dialog, with the watchdog armed at opened + dialog_timeout and cancelled.
#[test]
fn dialog_lifecycle_for_every_kind() {
    let cases = [
        ("alert", true, None, ""),
        ("confirm", true, None, ""),
        ("prompt", true, Some("typed"), "typed"),
        ("beforeunload", false, None, ""),
    ];
    for (n, (kind, accept, text, input)) in cases.into_iter().enumerate() {
        let mut sim = Sim::must_respond();
        let opened = sim.now;
        sim.open_dialog(S1, PAGE, kind, "Sure?");
        let out = sim.step();
        assert!(
            out.commands.is_empty(),
            "{kind}: must_respond sends nothing"
        );
        let deadline = opened.after(Duration::from_secs(300)).instant;
        assert_eq!(out.armed, vec![("d-1".to_string(), deadline)], "{kind}");

        let d = sim.pending("d-1");
        assert_eq!(d.kind, kind);
        assert_eq!(d.message, "Sure?");
        assert_eq!(d.default_prompt, if kind == "prompt" { "bob" } else { "" });
        assert_eq!(d.opened_at, opened.epoch);
        assert_eq!(d.frame_id.as_deref(), Some(PAGE));
        assert_eq!(d.origin, "http://a.test");
        assert_eq!(d.target_id, PAGE);
        assert_eq!(d.session_id, S1);

        sim.advance(1500);
        let (id, rx) = sim.answer("d-1", accept, text, ClosedBy::Agent);
        let mut expect = json!({"accept": accept});
        if let Some(t) = text {
            expect["promptText"] = json!(t);
        }
        nothing_yet(&rx);

        // Chromium sends the Closed event first, then the reply.
        sim.advance(2);
        sim.close_dialog(S1, Some(PAGE), accept, input);
        let out = sim.step();
        assert_eq!(out.cancelled, vec!["d-1".to_string()], "{kind}");
        let snap = sim.snap();
        assert!(
            snap.pending_dialogs.is_empty(),
            "{kind}: closed, not pending"
        );
        assert!(snap.recent_dialogs.is_empty(), "{kind}: the ack decides");

        sim.advance(1);
        sim.reply(id, json!({}));
        assert_eq!(ok(&rx), json!({}));
        let c = sim.closed("d-1");
        assert_eq!(c.closed_by, ClosedBy::Agent, "{kind}");
        assert_eq!(c.accepted, Some(accept));
        assert_eq!(c.user_input.as_deref(), Some(input));
        assert_eq!(c.closed_at, sim.now.epoch);
        assert_eq!(c.dialog.id, "d-1");
        assert_eq!(c.to_json()["closed_by"], "agent");
        assert!(sim.snap().pending_dialogs.is_empty(), "case {n}");
        // The command the agent's answer was.
        let sent = answer_command(&d, accept, text, ClosedBy::Agent);
        assert_eq!(sent.method, "Page.handleJavaScriptDialog");
        assert_eq!(sent.params, expect);
        assert_eq!(sent.session_id.as_deref(), Some(S1));
    }
}

/// An acknowledgement that comes before the Closed event (it does not on Chromium, but the order
/// must not matter): what we sent is recorded, and the late event changes nothing.
#[test]
fn an_ack_before_the_closed_event_records_what_was_sent() {
    let mut sim = Sim::must_respond();
    sim.open_dialog(S1, PAGE, "prompt", "Name?");
    let (id, rx) = sim.answer("d-1", true, Some("ann"), ClosedBy::Agent);
    sim.reply(id, json!({}));
    assert_eq!(ok(&rx), json!({}));
    let c = sim.closed("d-1");
    assert_eq!(
        (c.closed_by, c.accepted, c.user_input.as_deref()),
        (ClosedBy::Agent, Some(true), Some("ann"))
    );
    sim.close_dialog(S1, Some(PAGE), true, "ann");
    assert_eq!(sim.snap().recent_dialogs.len(), 1);
}

/// The browser's own account (the Closed event) wins over what the answer said.
#[test]
fn the_closed_event_is_the_record_of_what_the_page_got() {
    let mut sim = Sim::must_respond();
    sim.open_dialog(S1, PAGE, "prompt", "Name?");
    let (id, rx) = sim.answer("d-1", true, Some("ann"), ClosedBy::Agent);
    sim.close_dialog(S1, Some(PAGE), true, "ANN");
    sim.reply(id, json!({}));
    ok(&rx);
    assert_eq!(sim.closed("d-1").user_input.as_deref(), Some("ANN"));
}

// ------------------------------------------------------------------ closed_by races

#[test]
fn a_dialog_closed_by_something_else_is_remote() {
    let mut sim = Sim::must_respond();
    sim.open_dialog(S1, PAGE, "confirm", "Sure?");
    sim.step();
    sim.advance(500);
    sim.close_dialog(S1, Some(PAGE), false, "");
    let out = sim.step();
    assert_eq!(out.cancelled, vec!["d-1".to_string()]);
    let c = sim.closed("d-1");
    assert_eq!(
        (c.closed_by, c.accepted, c.closed_at),
        (ClosedBy::Remote, Some(false), sim.now.epoch)
    );
    assert!(sim.snap().pending_dialogs.is_empty());
}

/// Answer in flight when another client closes the dialog and the page opens the next one: the
/// first is `remote`, the answer lands on the second (module doc of `dialogs.rs`), and the
/// caller is told which dialog it answered.
#[test]
fn an_answer_overtaken_by_a_remote_close_lands_on_the_next_dialog() {
    let mut sim = Sim::must_respond();
    sim.open_dialog(S1, PAGE, "confirm", "First?");
    let (id, rx) = sim.answer("d-1", true, None, ClosedBy::Agent);
    // Another client dismissed d-1; the page went on and opened d-2.
    sim.close_dialog(S1, Some(PAGE), false, "");
    assert!(
        sim.snap().recent_dialogs.is_empty(),
        "our answer may yet be it"
    );
    sim.open_dialog(S1, PAGE, "confirm", "Second?");
    let out = sim.step();
    assert!(out.cancelled.contains(&"d-1".to_string()));
    let c1 = sim.closed("d-1");
    assert_eq!((c1.closed_by, c1.accepted), (ClosedBy::Remote, Some(false)));
    assert_eq!(sim.pending("d-2").message, "Second?");
    // The browser applies our answer to d-2.
    sim.close_dialog(S1, Some(PAGE), true, "");
    sim.reply(id, json!({}));
    match err(&rx) {
        Error::AnswerAppliedToOtherDialog { named, received } => {
            assert_eq!((named.as_str(), received.id.as_str()), ("d-1", "d-2"));
        }
        e => panic!("{e:?}"),
    }
    let c2 = sim.closed("d-2");
    assert_eq!((c2.closed_by, c2.accepted), (ClosedBy::Agent, Some(true)));
    assert!(sim.snap().pending_dialogs.is_empty());
}

/// An answer registered after its dialog already closed: refused by the browser, the caller
/// learns who closed it.
#[test]
fn an_answer_to_a_dialog_already_closed_remotely_says_so() {
    let mut sim = Sim::must_respond();
    sim.open_dialog(S1, PAGE, "alert", "Hi");
    let d = sim.pending("d-1");
    sim.close_dialog(S1, Some(PAGE), true, "");
    let (id, rx) = sim.send(answer_command(&d, true, None, ClosedBy::Agent));
    sim.error(id, "No dialog is showing");
    match err(&rx) {
        Error::DialogAlreadyClosed { id, closed_by, .. } => {
            assert_eq!(
                (id.as_str(), closed_by.to_string()),
                ("d-1", "remote".into())
            );
        }
        e => panic!("{e:?}"),
    }
    assert_eq!(sim.snap().recent_dialogs.len(), 1);
}

/// Same, with another dialog showing on the session by the time the answer is written: the
/// browser applies it to that one.
#[test]
fn a_late_answer_is_attached_to_the_dialog_its_session_shows() {
    let mut sim = Sim::must_respond();
    sim.open_dialog(S1, PAGE, "confirm", "First?");
    let first = sim.pending("d-1");
    sim.close_dialog(S1, Some(PAGE), false, "");
    sim.open_dialog(S1, PAGE, "confirm", "Second?");
    let (id, rx) = sim.send(answer_command(&first, true, None, ClosedBy::Agent));
    sim.close_dialog(S1, Some(PAGE), true, "");
    sim.reply(id, json!({}));
    assert!(matches!(err(&rx), Error::AnswerAppliedToOtherDialog { .. }));
    assert_eq!(sim.closed("d-1").closed_by, ClosedBy::Remote);
    assert_eq!(sim.closed("d-2").closed_by, ClosedBy::Agent);
}

/// The watchdog's dismissal (the supervisor registers it as a `DialogAnswer` by the watchdog
/// when the deadline the core asked for passes).
#[test]
fn the_watchdog_dismisses_at_opened_plus_dialog_timeout() {
    let mut sim = Sim::attached(CoreSettings {
        dialog_timeout: Duration::from_secs(7),
        ..settings(DialogPolicy::MustRespond, BridgeMode::Off)
    });
    sim.advance(3000);
    let opened = sim.now;
    sim.open_dialog(S1, PAGE, "confirm", "Sure?");
    let out = sim.step();
    let (_, deadline) = &out.armed[0];
    assert_eq!(*deadline, opened.instant + Duration::from_secs(7));
    assert_eq!(
        deadline.duration_since(opened.instant),
        Duration::from_secs(7)
    );

    sim.advance(7000);
    assert_eq!(sim.now.instant, *deadline);
    let (id, _) = sim.answer("d-1", false, None, ClosedBy::Watchdog);
    sim.close_dialog(S1, Some(PAGE), false, "");
    sim.reply(id, json!({}));
    let c = sim.closed("d-1");
    assert_eq!((c.closed_by, c.accepted), (ClosedBy::Watchdog, Some(false)));
    assert!((c.closed_at - c.dialog.opened_at - 7.0).abs() < 1e-3);
    assert_eq!(c.to_json()["closed_by"], "watchdog");
}

/// The agent's answer and the watchdog's both in flight: the first acknowledgement closes it,
/// the second is refused and learns who did.
#[test]
fn agent_answer_and_watchdog_race_the_first_ack_wins() {
    let mut sim = Sim::must_respond();
    sim.open_dialog(S1, PAGE, "confirm", "Sure?");
    let (agent, agent_rx) = sim.answer("d-1", true, None, ClosedBy::Agent);
    let (dog, dog_rx) = sim.answer("d-1", false, None, ClosedBy::Watchdog);
    sim.close_dialog(S1, Some(PAGE), true, "");
    sim.reply(agent, json!({}));
    ok(&agent_rx);
    sim.error(dog, "No dialog is showing");
    match err(&dog_rx) {
        Error::DialogAlreadyClosed { closed_by, .. } => {
            assert_eq!(closed_by.to_string(), "agent");
        }
        e => panic!("{e:?}"),
    }
    let c = sim.closed("d-1");
    assert_eq!((c.closed_by, c.accepted), (ClosedBy::Agent, Some(true)));
}

/// The watchdog's dismissal is refused because something else closed the dialog meanwhile:
/// `remote`, never `watchdog`.
#[test]
fn a_refused_watchdog_dismissal_leaves_the_dialog_remote() {
    let mut sim = Sim::must_respond();
    sim.open_dialog(S1, PAGE, "confirm", "Sure?");
    sim.advance(300_000);
    let (dog, dog_rx) = sim.answer("d-1", false, None, ClosedBy::Watchdog);
    sim.close_dialog(S1, Some(PAGE), true, "");
    sim.error(dog, "No dialog is showing");
    assert!(matches!(err(&dog_rx), Error::DialogAlreadyClosed { .. }));
    let c = sim.closed("d-1");
    assert_eq!((c.closed_by, c.accepted), (ClosedBy::Remote, Some(true)));
}

/// A navigation closes the dialog while the agent's answer is on its way (Closed, then the new
/// document, then the refusal): `remote`, and the caller learns it.
#[test]
fn a_navigation_that_closes_the_dialog_before_the_answer_is_remote() {
    let mut sim = Sim::must_respond();
    sim.open_dialog(S1, PAGE, "beforeunload", "Leave?");
    let (id, rx) = sim.answer("d-1", false, None, ClosedBy::Agent);
    sim.close_dialog(S1, Some(PAGE), true, "");
    sim.frame_navigated(S1, PAGE, None, "http://b.test/");
    sim.error(id, "No dialog is showing");
    match err(&rx) {
        Error::DialogAlreadyClosed { closed_by, .. } => {
            assert_eq!(closed_by.to_string(), "remote");
        }
        e => panic!("{e:?}"),
    }
    let c = sim.closed("d-1");
    assert_eq!((c.closed_by, c.accepted), (ClosedBy::Remote, Some(true)));
}

/// A bridge dialog dies with its document: a new document in its frame (or the frame's detach)
/// closes it `remote`; a `swap` detach (the frame moving process) does not.
#[test]
fn a_new_document_closes_the_bridge_dialogs_of_its_frame() {
    let mut sim = Sim::attached(settings(DialogPolicy::MustRespond, BridgeMode::On));
    sim.frame_attached(S1, "F1", PAGE);
    sim.frame_navigated(S1, "F1", Some(PAGE), "http://a.test/f1");
    sim.bridge_dialog(S1, PAGE, "R1", "Main?");
    sim.bridge_dialog(S1, "F1", "R2", "Frame?");
    assert_eq!(sim.snap().pending_dialogs.len(), 2);
    assert_eq!(sim.pending("d-1").bridge_request_id.as_deref(), Some("R1"));

    sim.event(
        Some(S1),
        "Page.frameDetached",
        json!({"frameId": "F1", "reason": "swap"}),
    );
    assert_eq!(
        sim.snap().pending_dialogs.len(),
        2,
        "a swap keeps the document"
    );

    sim.frame_navigated(S1, "F1", Some(PAGE), "http://a.test/f1-reloaded");
    assert_eq!(sim.closed("d-2").closed_by, ClosedBy::Remote);
    assert_eq!(sim.pending("d-1").message, "Main?");

    sim.frame_navigated(S1, PAGE, None, "http://a.test/next");
    let c = sim.closed("d-1");
    assert_eq!((c.closed_by, c.accepted), (ClosedBy::Remote, None));
    assert!(sim.snap().pending_dialogs.is_empty());
}

/// A native answer refused with "No dialog is showing" and no Closed event: the dialog still
/// blocks its frame but cannot be answered (SPEC §11) until a reload ends it.
#[test]
fn an_unanswerable_dialog_blocks_until_a_reload_ends_it() {
    let mut sim = Sim::must_respond();
    sim.open_dialog(S1, PAGE, "alert", "Stuck");
    let (id, rx) = sim.answer("d-1", true, None, ClosedBy::Agent);
    sim.error(id, "No dialog is showing");
    assert!(matches!(err(&rx), Error::DialogUnanswerable { .. }));
    let out = sim.step();
    assert_eq!(out.cancelled, vec!["d-1".to_string()]);
    let snap = sim.snap();
    assert!(snap.pending_dialogs.is_empty());
    assert!(snap.recent_dialogs.is_empty());
    let b = snap.blocked.clone().expect("blocked");
    assert_eq!(b.reason, BlockedReason::UnanswerableDialog);
    assert_eq!(b.frame_id.as_deref(), Some(PAGE));

    sim.frame_navigated(S1, PAGE, None, "http://a.test/");
    let snap = sim.snap();
    assert_eq!(snap.blocked, None);
    assert_eq!(sim.closed("d-1").closed_by, ClosedBy::Remote);
}

#[test]
fn auto_dismiss_answers_at_once_and_records_auto_policy() {
    let mut sim = Sim::attached(settings(DialogPolicy::AutoDismiss, BridgeMode::Off));
    sim.open_dialog(S1, PAGE, "confirm", "Sure?");
    let out = sim.step();
    assert!(out.armed.is_empty(), "no watchdog for an auto policy");
    let (id, c) = out.only("Page.handleJavaScriptDialog");
    assert_eq!(c.params, json!({"accept": false}));
    assert_eq!(c.session_id.as_deref(), Some(S1));
    assert!(matches!(
        c.kind,
        CallKind::DialogAnswer {
            by: ClosedBy::AutoPolicy,
            ..
        }
    ));
    sim.close_dialog(S1, Some(PAGE), false, "");
    sim.reply(id, json!({}));
    let c = sim.closed("d-1");
    assert_eq!(
        (c.closed_by, c.accepted),
        (ClosedBy::AutoPolicy, Some(false))
    );
    assert_eq!(c.to_json()["closed_by"], "auto_policy");
}

#[test]
fn auto_accept_gives_a_prompt_its_default_text() {
    let mut sim = Sim::attached(settings(DialogPolicy::AutoAccept, BridgeMode::Off));
    sim.open_dialog(S1, PAGE, "prompt", "Name?");
    let out = sim.step();
    let (id, c) = out.only("Page.handleJavaScriptDialog");
    assert_eq!(c.params, json!({"accept": true, "promptText": "bob"}));
    sim.close_dialog(S1, Some(PAGE), true, "bob");
    sim.reply(id, json!({}));
    let c = sim.closed("d-1");
    assert_eq!(
        (c.closed_by, c.accepted, c.user_input.as_deref()),
        (ClosedBy::AutoPolicy, Some(true), Some("bob"))
    );

    sim.open_dialog(S1, PAGE, "confirm", "Sure?");
    let out = sim.step();
    assert_eq!(
        out.only("Page.handleJavaScriptDialog").1.params,
        json!({"accept": true})
    );
}

/// An auto-policy answer overtaken by another client's close: `remote`.
#[test]
fn an_auto_answer_refused_after_a_remote_close_is_remote() {
    let mut sim = Sim::attached(settings(DialogPolicy::AutoDismiss, BridgeMode::Off));
    sim.open_dialog(S1, PAGE, "alert", "Hi");
    let out = sim.step();
    let (id, _) = out.only("Page.handleJavaScriptDialog");
    sim.close_dialog(S1, Some(PAGE), true, "");
    sim.error(id, "No dialog is showing");
    let c = sim.closed("d-1");
    assert_eq!((c.closed_by, c.accepted), (ClosedBy::Remote, Some(true)));
}

/// A native dialog past `limits.pending_dialogs_max` is dismissed at once, never pending.
#[test]
fn a_native_dialog_past_the_cap_is_dismissed_unseen() {
    let mut sim = Sim::attached(CoreSettings {
        limits: Limits {
            pending_dialogs_max: 1,
            ..Limits::default()
        },
        ..settings(DialogPolicy::MustRespond, BridgeMode::Off)
    });
    sim.open_dialog(S1, PAGE, "alert", "One");
    sim.step();
    sim.open_dialog("S2", "OTHER", "alert", "Two");
    let out = sim.step();
    let (id, c) = out.only("Page.handleJavaScriptDialog");
    assert_eq!(c.params, json!({"accept": false}));
    let snap = sim.snap();
    assert_eq!(snap.pending_dialogs.len(), 1);
    assert_eq!(snap.pending_dialogs[0].id, "d-1");
    sim.close_dialog("S2", Some("OTHER"), false, "");
    sim.reply(id, json!({}));
    assert_eq!(sim.closed("d-2").closed_by, ClosedBy::AutoPolicy);
}

// ------------------------------------------------------------------ connection loss

#[test]
fn a_dialog_pending_at_a_drop_is_recorded_as_connection_lost() {
    let mut sim = Sim::must_respond();
    sim.open_dialog(S1, PAGE, "confirm", "Leave?");
    sim.step();
    let (_, waiting) = sim.send(Command {
        method: "Runtime.evaluate".into(),
        params: json!({"expression": "1"}),
        session_id: None,
        kind: CallKind::Plain,
    });
    sim.advance(40);
    sim.core
        .on_disconnect("the browser closed the connection", sim.now);
    sim.deliver();
    assert!(matches!(err(&waiting), Error::ConnectionLost(_)));
    sim.core.reconnecting(1, 5);
    let snap = sim.snap();
    assert!(snap.pending_dialogs.is_empty());
    let c = snap.closed_dialog("d-1").expect("recorded");
    assert_eq!(c.closed_by, ClosedBy::ConnectionLost);
    assert_eq!(c.closed_at, sim.now.epoch);
    assert_eq!(c.to_json()["closed_by"], "connection_lost");
    assert!(!snap.is_active());
    assert_eq!(
        snap.state,
        SupervisorState::Reconnecting { attempt: 1, of: 5 }
    );
    assert_eq!(sim.step().cancelled, vec!["d-1".to_string()]);
}

/// The Closed event came for our answer, then the connection dropped before its ack: the
/// answerer closed it.
#[test]
fn a_dialog_whose_close_came_while_our_answer_was_in_flight_stays_the_answerers() {
    let mut sim = Sim::must_respond();
    sim.open_dialog(S1, PAGE, "confirm", "Transfer?");
    let (_, rx) = sim.answer("d-1", true, None, ClosedBy::Agent);
    sim.close_dialog(S1, Some(PAGE), true, "");
    sim.core.on_disconnect("gone", sim.now);
    sim.deliver();
    assert!(matches!(err(&rx), Error::ConnectionLost(_)));
    let c = sim.closed("d-1");
    assert_eq!((c.closed_by, c.accepted), (ClosedBy::Agent, Some(true)));
}

#[test]
fn re_attaching_after_a_reconnect_makes_the_state_active_again() {
    let mut sim = Sim::must_respond();
    sim.core.on_disconnect("gone", sim.now);
    sim.core.reconnecting(2, 3);
    assert_eq!(sim.core.reset_for_reconnect().as_deref(), Some(PAGE));
    let snap = sim.snap();
    assert!(!snap.is_active());
    assert!(snap.frames.is_empty(), "the frame map starts over");
    let attach = sim.register(
        "Target.attachToTarget",
        None,
        CallKind::AttachPage {
            target_id: PAGE.into(),
        },
    );
    sim.reply(attach, json!({"sessionId": "S2"}));
    let snap = sim.snap();
    assert!(snap.is_active());
    assert_eq!(snap.state, SupervisorState::Active);
    assert_eq!(snap.disconnect_reason, None);
    assert_eq!(snap.page_session_id.as_deref(), Some("S2"));
    assert_eq!(snap.to_json()["state"], "active");
}

// ------------------------------------------------------------------ the bridge's proxy rule

/// `auto` bridge mode: a native dialog closed remotely within 100 ms of opening turns the bridge
/// on (SPEC §6); at 100 ms or later it does not. On the simulated clock, both sides of the edge.
#[test]
fn the_proxy_signature_is_a_remote_close_within_100_ms() {
    for (after_ms, turns_on) in [
        (0, true),
        (10, true),
        (99, true),
        (100, false),
        (250, false),
    ] {
        let mut sim = Sim::attached(settings(DialogPolicy::MustRespond, BridgeMode::Auto));
        sim.open_dialog(S1, PAGE, "alert", "Hi");
        sim.step();
        sim.advance(after_ms);
        sim.close_dialog(S1, Some(PAGE), true, "");
        let out = sim.step();
        let expect: Vec<(&str, Option<&str>)> = if turns_on {
            vec![
                ("Page.addScriptToEvaluateOnNewDocument", Some(S1)),
                ("Fetch.enable", Some(S1)),
            ]
        } else {
            vec![]
        };
        assert_eq!(out.methods(), expect, "closed {after_ms} ms after opening");
        assert_eq!(sim.closed("d-1").closed_by, ClosedBy::Remote);
        // Once on, it stays on: an OOPIF attached later gets it as part of its set-up.
        let out = sim.oopif(S1, "C1", "F1", PAGE);
        assert_eq!(
            out.commands_only(),
            [
                session_setup("C1", SessionKind::Iframe, bridge_only(turns_on)),
                vec![session::resume("C1")]
            ]
            .concat()
        );
    }
}

/// The bridge goes on every session that shows documents, once.
#[test]
fn the_proxy_signature_turns_the_bridge_on_for_every_document_session() {
    let mut sim = Sim::attached(settings(DialogPolicy::MustRespond, BridgeMode::Auto));
    sim.oopif(S1, "C1", "F1", PAGE);
    sim.event(
        Some(S1),
        "Target.attachedToTarget",
        json!({"sessionId": "W1", "waitingForDebugger": true,
               "targetInfo": {"targetId": "W", "type": "worker", "url": "http://a.test/w.js"}}),
    );
    sim.step();
    sim.open_dialog(S1, PAGE, "alert", "Hi");
    sim.close_dialog(S1, Some(PAGE), true, "");
    let out = sim.step();
    let mut got = out.methods();
    got.sort();
    assert_eq!(
        got,
        vec![
            ("Fetch.enable", Some("C1")),
            ("Fetch.enable", Some(S1)),
            ("Page.addScriptToEvaluateOnNewDocument", Some("C1")),
            ("Page.addScriptToEvaluateOnNewDocument", Some(S1)),
        ]
    );
    // A second fast close changes nothing.
    sim.open_dialog(S1, PAGE, "alert", "Again");
    sim.close_dialog(S1, Some(PAGE), true, "");
    assert!(sim.step().commands.is_empty());
}

/// Not the signature: a close without `frameId` (a guess about which dialog closed), a close
/// our own answer made, or bridge mode `off`.
#[test]
fn what_is_not_the_proxy_signature() {
    let mut sim = Sim::attached(settings(DialogPolicy::MustRespond, BridgeMode::Auto));
    sim.open_dialog(S1, PAGE, "alert", "Hi");
    sim.close_dialog(S1, None, true, "");
    assert!(sim.step().commands.is_empty(), "no frameId");

    sim.open_dialog(S1, PAGE, "alert", "Hi");
    let (id, _) = sim.answer("d-2", true, None, ClosedBy::Agent);
    sim.close_dialog(S1, Some(PAGE), true, "");
    sim.reply(id, json!({}));
    assert!(sim.step().commands.is_empty(), "our own answer");
    assert_eq!(sim.closed("d-2").closed_by, ClosedBy::Agent);

    let mut sim = Sim::attached(settings(DialogPolicy::MustRespond, BridgeMode::Off));
    sim.open_dialog(S1, PAGE, "alert", "Hi");
    sim.close_dialog(S1, Some(PAGE), true, "");
    assert!(sim.step().commands.is_empty(), "bridge off");
}

/// With the bridge on, a paused bridge request is a dialog answered by `Fetch.fulfillRequest`
/// and any other paused request is let through.
#[test]
fn a_bridge_dialog_is_answered_by_fulfilling_its_request() {
    let mut sim = Sim::attached(settings(DialogPolicy::MustRespond, BridgeMode::On));
    sim.event(
        Some(S1),
        "Fetch.requestPaused",
        json!({"requestId": "X", "request": {"url": "http://a.test/api"}}),
    );
    let out = sim.step();
    assert_eq!(
        out.only("Fetch.continueRequest").1.params,
        json!({"requestId": "X"})
    );
    let opened = sim.now;
    sim.bridge_dialog(S1, PAGE, "R1", "Sure%3F");
    let out = sim.step();
    assert_eq!(
        out.armed,
        vec![("d-1".into(), opened.after(Duration::from_secs(300)).instant)]
    );
    assert_eq!(sim.pending("d-1").message, "Sure?");
    let (id, rx) = sim.answer("d-1", true, None, ClosedBy::Agent);
    sim.reply(id, json!({}));
    ok(&rx);
    let c = sim.closed("d-1");
    assert_eq!((c.closed_by, c.accepted), (ClosedBy::Agent, Some(true)));
}

// ------------------------------------------------------------------ session set-up

/// What each kind of session is sent. By default nothing a page can observe (SPEC §19): no
/// `Runtime.enable` anywhere; console capture adds it right after `Page.enable` (alone on a
/// worker), the bridge its two commands last.
#[test]
fn session_setup_lists_per_kind() {
    let methods = |kind: SessionKind, bridge: bool, console: bool| -> Vec<String> {
        session_setup("S", kind, Extras { bridge, console })
            .iter()
            .map(|c| c.method.to_string())
            .collect()
    };
    let page = [
        "Page.enable",
        "Page.getFrameTree",
        "Target.setAutoAttach",
        "Runtime.getIsolateId",
        "Page.setInterceptFileChooserDialog",
    ];
    let bridge = ["Page.addScriptToEvaluateOnNewDocument", "Fetch.enable"];
    let with_console = |list: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = list.iter().map(|m| m.to_string()).collect();
        v.insert(1, "Runtime.enable".into());
        v
    };
    assert_eq!(methods(SessionKind::Page, false, false), page);
    assert_eq!(methods(SessionKind::Popup, false, false), page);
    assert_eq!(
        methods(SessionKind::Popup, true, false),
        [&page[..], &bridge[..]].concat()
    );
    assert_eq!(methods(SessionKind::Page, false, true), with_console(&page));
    assert_eq!(
        methods(SessionKind::Popup, true, true),
        [with_console(&page), bridge.map(String::from).to_vec()].concat()
    );
    let iframe = [
        "Page.enable",
        "Target.setAutoAttach",
        "Page.getFrameTree",
        "Runtime.getIsolateId",
        "Page.setInterceptFileChooserDialog",
    ];
    assert_eq!(methods(SessionKind::Iframe, false, false), iframe);
    assert_eq!(
        methods(SessionKind::Iframe, true, false),
        [&iframe[..], &bridge[..]].concat()
    );
    assert_eq!(
        methods(SessionKind::Iframe, false, true),
        with_console(&iframe)
    );
    assert!(
        methods(SessionKind::Worker, true, false).is_empty(),
        "a worker is only tracked and resumed"
    );
    assert_eq!(methods(SessionKind::Worker, true, true), ["Runtime.enable"]);
    for console in [false, true] {
        assert_eq!(
            methods(SessionKind::Watched, true, console),
            ["Page.enable", "Runtime.getIsolateId"],
            "a watched page: its dialogs and its renderer, nothing else"
        );
    }
    for kind in [
        SessionKind::Page,
        SessionKind::Popup,
        SessionKind::Iframe,
        SessionKind::Worker,
        SessionKind::Watched,
    ] {
        let sent = methods(kind, false, false);
        assert!(
            !sent.iter().any(|m| m == "Runtime.enable"
                || m == "Page.addScriptToEvaluateOnNewDocument"
                || m == "Runtime.addBinding"),
            "{kind:?}: the default set-up sends nothing a page can see: {sent:?}"
        );
    }

    // What the attach sequence waits on for the page: exactly the first three.
    let kinds: Vec<CallKind> = session_setup("S", SessionKind::Page, Extras::default())
        .into_iter()
        .map(|c| c.kind)
        .collect();
    assert_eq!(
        kinds,
        [
            CallKind::Responds {
                session_id: "S".into()
            },
            CallKind::SeedFrameTree {
                session_id: "S".into()
            },
            CallKind::Plain,
            CallKind::IsolateId {
                session_id: "S".into(),
                generation: 0
            },
            CallKind::Automatic,
        ]
    );
    for c in session_setup(
        "S",
        SessionKind::Iframe,
        Extras {
            bridge: true,
            console: true,
        },
    ) {
        assert_eq!(c.session_id.as_deref(), Some("S"));
        assert!(
            !matches!(c.kind, CallKind::Plain),
            "nobody waits on a child's set-up"
        );
    }
    let auto = &session_setup("S", SessionKind::Popup, Extras::default())[2];
    assert_eq!(auto.method, "Target.setAutoAttach");
    assert_eq!(
        auto.params,
        json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true})
    );
}

/// A followed popup (issue 14) gets the page's set-up, then is resumed.
#[test]
fn a_followed_popup_is_set_up_as_a_page_then_resumed() {
    let mut sim = Sim::attached(CoreSettings {
        follow_popups: true,
        ..settings(DialogPolicy::MustRespond, BridgeMode::On)
    });
    sim.event(
        None,
        "Target.attachedToTarget",
        json!({"sessionId": "P2", "waitingForDebugger": true,
               "targetInfo": {"targetId": "POP", "type": "page", "url": "about:blank",
                              "openerId": PAGE}}),
    );
    let out = sim.step();
    assert_eq!(
        out.commands_only(),
        [
            session_setup("P2", SessionKind::Popup, bridge_only(true)),
            vec![session::resume("P2")]
        ]
        .concat()
    );
    let snap = sim.snap();
    assert_eq!(snap.pages.len(), 2);
    assert_eq!(snap.pages[1].target_id, "POP");
    // A dialog there belongs to the popup.
    sim.open_dialog("P2", "POP", "alert", "Pop");
    assert_eq!(sim.pending("d-1").target_id, "POP");
    // It goes away: the dialog is `remote`, the page leaves the list.
    sim.event(
        None,
        "Target.detachedFromTarget",
        json!({"sessionId": "P2"}),
    );
    assert_eq!(sim.closed("d-1").closed_by, ClosedBy::Remote);
    assert_eq!(sim.snap().pages.len(), 1);
}

/// A page that is not the task's to follow is resumed and let go.
#[test]
fn a_page_of_someone_else_is_resumed_and_detached() {
    let mut sim = Sim::attached(CoreSettings {
        follow_popups: true,
        ..settings(DialogPolicy::MustRespond, BridgeMode::Off)
    });
    sim.event(
        None,
        "Target.attachedToTarget",
        json!({"sessionId": "X", "waitingForDebugger": true,
               "targetInfo": {"targetId": "OTHER", "type": "page", "url": "about:blank"}}),
    );
    assert_eq!(
        sim.step().methods(),
        [
            ("Runtime.runIfWaitingForDebugger", Some("X")),
            ("Target.detachFromTarget", None)
        ]
    );
}

/// A worker is tracked with `Runtime.enable` only; a target of a type we do not track is only
/// resumed; an OOPIF past `limits.frames_max` sessions too.
#[test]
fn workers_and_untracked_targets_are_resumed() {
    let mut sim = Sim::attached(CoreSettings {
        limits: Limits {
            frames_max: 3,
            ..Limits::default()
        },
        ..settings(DialogPolicy::MustRespond, BridgeMode::On)
    });
    let attach = |sim: &mut Sim, sid: &str, kind: &str, waiting: bool| -> Vec<(String, String)> {
        sim.event(
            Some(S1),
            "Target.attachedToTarget",
            json!({"sessionId": sid, "waitingForDebugger": waiting,
                   "targetInfo": {"targetId": format!("T-{sid}"), "type": kind, "url": ""}}),
        );
        let out = sim.step();
        out.methods()
            .into_iter()
            .map(|(m, s)| (m.to_string(), s.unwrap_or_default().to_string()))
            .collect()
    };
    let pair = |m: &str, s: &str| (m.to_string(), s.to_string());
    let resume = |s| pair("Runtime.runIfWaitingForDebugger", s);
    // Without console capture, a worker is only tracked and resumed.
    assert_eq!(
        attach(&mut sim, "W1", "service_worker", true),
        [resume("W1")]
    );
    assert!(attach(&mut sim, "W2", "worker", false).is_empty());
    let mut capturing = Sim::attached(CoreSettings {
        capture_console: true,
        ..settings(DialogPolicy::MustRespond, BridgeMode::Off)
    });
    assert_eq!(
        attach(&mut capturing, "W3", "service_worker", true),
        [pair("Runtime.enable", "W3"), resume("W3")]
    );
    assert_eq!(
        attach(&mut capturing, "W4", "worker", false),
        [pair("Runtime.enable", "W4")]
    );
    assert_eq!(attach(&mut sim, "U1", "other", true), [resume("U1")]);
    assert!(attach(&mut sim, "U2", "other", false).is_empty());
    // Three sessions tracked (page, two workers): no room for the OOPIF, resumed all the same.
    assert_eq!(attach(&mut sim, "C9", "iframe", false), [resume("C9")]);
    assert!(!sim.snap().frames.contains_key("T-C9"));
}

// ------------------------------------------------------------------ the frame map

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

// ------------------------------------------------------------------ time in the core

/// Console entries carry the time of the message that logged them.
#[test]
fn console_entries_are_stamped_with_the_time_passed_in() {
    let mut sim = Sim::must_respond();
    sim.advance(1234);
    sim.event(
        Some(S1),
        "Runtime.consoleAPICalled",
        json!({"type": "error", "args": [{"type": "string", "value": "boom"}]}),
    );
    let snap = sim.snap();
    assert_eq!(snap.console_errors.len(), 1);
    assert_eq!(snap.console_errors[0].ts, sim.now.epoch);
    assert_eq!(snap.console_errors[0].text, "boom");
}

/// Once the call table is large, a registration purges the calls whose callers gave up: by the
/// time passed in, not the wall clock.
#[test]
fn abandoned_calls_are_purged_by_the_time_passed_in() {
    let mut sim = Sim::must_respond();
    let expires = Deadline::from_start(sim.now.instant, Duration::from_secs(1));
    let mut first = None;
    // Calls nobody waits on (the page's isolate probe) are never purged.
    let kept = sim.core.calls.len();
    // The table already holds the attach calls; fill it to a power of two past PURGE_EVERY.
    while sim.core.calls.len() < PURGE_EVERY {
        let (tx, rx) = bounded(1);
        sim.register_call(PendingCall {
            method: "Runtime.evaluate".into(),
            session_id: Some(S1.into()),
            kind: CallKind::Plain,
            reply: Some(tx),
            expires,
        });
        first.get_or_insert(rx);
    }
    let first = first.unwrap();
    // Just before the deadline: nothing is purged.
    sim.advance(999);
    sim.register("Browser.getVersion", None, CallKind::Plain);
    assert_eq!(sim.core.calls.len(), PURGE_EVERY + 1);
    nothing_yet(&first);
    // Grow to the next power of two, then reach the deadline: those callers have given up.
    while !sim.core.calls.len().is_power_of_two() {
        sim.register("Browser.getVersion", None, CallKind::Plain);
    }
    assert_eq!(sim.core.calls.len(), 2 * PURGE_EVERY);
    sim.advance(1);
    sim.register("Browser.getVersion", None, CallKind::Plain);
    assert_eq!(sim.core.calls.len(), PURGE_EVERY + 1 + kept);
    assert!(matches!(first.try_recv(), Err(TryRecvError::Disconnected)));
}

// ------------------------------------------------------------------ dialogs block their renderer

impl Sim {
    /// Browser-level auto-attach hands over page `target` on `sid`, opened by `opener`
    /// (`canAccessOpener` as given: false for a `noopener` popup), then its first document
    /// commits at `url`.
    fn popup(&mut self, sid: &str, target: &str, opener: &str, can_access: bool, url: &str) -> Out {
        self.event(
            None,
            "Target.attachedToTarget",
            json!({"sessionId": sid, "waitingForDebugger": true,
                   "targetInfo": {"targetId": target, "type": "page", "url": "about:blank",
                                  "openerId": opener, "openerFrameId": opener,
                                  "canAccessOpener": can_access}}),
        );
        let mut out = self.step();
        self.frame_navigated(sid, target, None, url);
        out.commands.extend(self.step().commands);
        out
    }

    /// Answers the latest `Runtime.getIsolateId` sent on `sid` with `isolate`.
    fn isolate(&mut self, sid: &str, isolate: &str) {
        let id = self
            .core
            .calls
            .iter()
            .filter_map(|(id, c)| match &c.kind {
                CallKind::IsolateId {
                    session_id,
                    generation,
                } if session_id == sid => Some((*generation, *id)),
                _ => None,
            })
            .max()
            .map(|(_, id)| id)
            .unwrap_or_else(|| panic!("no Runtime.getIsolateId in flight on {sid}"));
        self.reply(id, json!({"id": isolate}));
    }

    /// A caller's `method` on `sid`, in flight; `known` are the dialogs it saw pending.
    fn agent(&mut self, method: &str, sid: &str, known: &[&str]) -> Receiver<CallResult> {
        let kind = CallKind::Agent {
            main_world: None,
            known_dialogs: known.iter().map(|d| d.to_string()).collect(),
        };
        self.send(
            Command::new(method.to_string(), json!({}))
                .on(sid)
                .kind(kind),
        )
        .1
    }

    /// Followed popups and `must_respond`.
    fn with_popups() -> Sim {
        Sim::attached(CoreSettings {
            follow_popups: true,
            ..settings(DialogPolicy::MustRespond, BridgeMode::Off)
        })
    }
}

fn blocked_by(rx: &Receiver<CallResult>) -> String {
    match err(rx) {
        Error::BlockedByDialog { dialog, .. } => dialog.id,
        other => panic!("expected BlockedByDialog, got {other:?}"),
    }
}

/// Issue 24: a task whose popups a watcher hands over sends no browser-level auto-attach, and a
/// popup its own connection attached to (not paused on it: the watcher holds the pause) is
/// followed like one its own auto-attach handed it.
#[test]
fn a_popup_handed_over_by_the_watcher_is_followed_without_browser_level_auto_attach() {
    let mut sim = Sim::new(CoreSettings {
        follow_popups: true,
        browser_auto_attach: false,
        ..settings(DialogPolicy::MustRespond, BridgeMode::Off)
    });
    let attach = sim.register(
        "Target.attachToTarget",
        None,
        CallKind::AttachPage {
            target_id: PAGE.into(),
        },
    );
    sim.reply(attach, json!({"sessionId": S1}));
    let out = sim.step();
    assert!(
        !out.methods().contains(&("Target.setAutoAttach", None)),
        "{:?}",
        out.methods()
    );
    sim.event(
        None,
        "Target.attachedToTarget",
        json!({"sessionId": "P2", "waitingForDebugger": false,
               "targetInfo": {"targetId": "POPUP", "type": "page", "url": "about:blank",
                              "openerId": PAGE, "canAccessOpener": true}}),
    );
    let out = sim.step();
    let methods = out.methods();
    for m in [
        "Page.enable",
        "Page.getFrameTree",
        "Runtime.runIfWaitingForDebugger",
    ] {
        assert!(methods.contains(&(m, Some("P2"))), "{m}: {methods:?}");
    }
    assert!(
        !methods.contains(&("Runtime.enable", Some("P2"))),
        "{methods:?}"
    );
    assert!(
        !methods.contains(&("Target.detachFromTarget", None)),
        "{methods:?}"
    );
    let snap = sim.snap();
    let pages: Vec<&str> = snap.pages.iter().map(|p| p.target_id.as_str()).collect();
    assert_eq!(pages, [PAGE, "POPUP"]);
}

/// A task whose popup watcher has gone follows its popups itself: each re-attach of its page
/// turns browser-level auto-attach on, in the step that makes it active again (the reader
/// writes a step's commands before it publishes), so no popup opened after the task is seen
/// active again can slip past.
#[test]
fn a_task_whose_watcher_has_gone_turns_auto_attach_on_when_it_re_attaches() {
    let mut sim = Sim::new(CoreSettings {
        follow_popups: true,
        browser_auto_attach: false,
        ..settings(DialogPolicy::MustRespond, BridgeMode::Off)
    });
    let attach_page = |sim: &mut Sim, sid: &str| {
        let attach = sim.register(
            "Target.attachToTarget",
            None,
            CallKind::AttachPage {
                target_id: PAGE.into(),
            },
        );
        sim.reply(attach, json!({ "sessionId": sid }));
        sim.step()
    };
    let out = attach_page(&mut sim, S1);
    assert!(!out.methods().contains(&("Target.setAutoAttach", None)));
    sim.core.follow_popups_itself_from_now();
    sim.core.on_disconnect("gone", sim.now);
    sim.core.reconnecting(1, 3);
    sim.core.reset_for_reconnect();
    assert!(!sim.snap().is_active());
    let out = attach_page(&mut sim, "S2");
    assert!(
        out.methods().contains(&("Target.setAutoAttach", None)),
        "{:?}",
        out.methods()
    );
    assert_eq!(sim.snap().state, SupervisorState::Active);
}

/// What the call path decides from the published snapshot, for a call made now: the pending
/// dialogs that block a call of `method` on `sid` (`crate::core::policy`).
fn blocking_in_snapshot(snap: &Snapshot, sid: &str, method: &str) -> Vec<String> {
    snap.pending_dialogs
        .iter()
        .filter(|d| policy::dialog_blocks(snap, d, sid, method))
        .map(|d| d.id.clone())
        .collect()
}

/// Measured on Chromium 156: a same-site popup runs in its opener's renderer (same isolate), a
/// cross-site one and a `noopener` one in their own. A dialog fails the calls in flight on every
/// session of its renderer, at once, and no other.
#[test]
fn a_dialog_fails_the_calls_in_flight_on_every_session_of_its_renderer_and_no_other() {
    let mut sim = Sim::with_popups();
    sim.isolate(S1, "I-A");
    sim.popup("P2", "SAME", PAGE, true, "http://sub.a.test/");
    sim.popup("P3", "CROSS", PAGE, true, "http://b.test/");
    sim.popup("P4", "NOOPENER", PAGE, false, "http://a.test/");
    sim.isolate("P2", "I-A");
    sim.isolate("P3", "I-B");
    sim.isolate("P4", "I-N");
    let on_page = sim.agent("Runtime.evaluate", S1, &[]);
    let on_cross = sim.agent("Runtime.evaluate", "P3", &[]);
    let on_noopener = sim.agent("DOM.getDocument", "P4", &[]);
    let browser = sim.send(Command::new("Browser.getVersion", json!({}))).1;
    sim.open_dialog("P2", "SAME", "alert", "in the same-site popup");
    assert_eq!(
        blocked_by(&on_page),
        "d-1",
        "the opener shares the popup's renderer"
    );
    nothing_yet(&on_cross);
    nothing_yet(&on_noopener);
    nothing_yet(&browser);
    // Made now, with the dialog pending and unseen by the caller: refused at registration.
    let late = sim.agent("Runtime.evaluate", S1, &[]);
    assert_eq!(blocked_by(&late), "d-1");
    // The call path's view of the published snapshot says the same.
    let snap = sim.snap();
    assert_eq!(blocking_in_snapshot(&snap, S1, "Runtime.evaluate"), ["d-1"]);
    assert_eq!(
        blocking_in_snapshot(&snap, "P2", "Runtime.evaluate"),
        ["d-1"]
    );
    assert!(blocking_in_snapshot(&snap, "P3", "Runtime.evaluate").is_empty());
    assert!(blocking_in_snapshot(&snap, "P4", "Input.dispatchKeyEvent").is_empty());
    // The other way round: the opener's dialog blocks the same-site popup only.
    let on_popup = sim.agent("Runtime.evaluate", "P2", &[]);
    let on_cross = sim.agent("Runtime.evaluate", "P3", &["d-1"]);
    sim.open_dialog(S1, PAGE, "confirm", "in the opener");
    assert_eq!(blocked_by(&on_popup), "d-1", "d-1 comes first");
    nothing_yet(&on_cross);
}

/// A-B-A: an A frame inside a B iframe inside an A page is its own OOPIF session, in A's
/// renderer (measured). A dialog in the page blocks the grandchild, not the B iframe, and a
/// dialog in the grandchild (delivered on the page session with its frame id) blocks the page.
#[test]
fn an_a_frame_inside_a_b_iframe_shares_the_a_pages_renderer() {
    let mut sim = Sim::must_respond();
    sim.isolate(S1, "I-A");
    sim.oopif(S1, "C1", "FB", PAGE);
    sim.frame_navigated("C1", "FB", Some(PAGE), "http://b.test/");
    sim.oopif("C1", "C2", "FA", "FB");
    sim.frame_navigated("C2", "FA", Some("FB"), "http://a.test/grand");
    sim.step();
    sim.isolate("C1", "I-B");
    sim.isolate("C2", "I-A");
    let in_b = sim.agent("Runtime.evaluate", "C1", &[]);
    let in_grandchild = sim.agent("Runtime.evaluate", "C2", &[]);
    sim.open_dialog(S1, PAGE, "alert", "top");
    assert_eq!(blocked_by(&in_grandchild), "d-1");
    nothing_yet(&in_b);
    sim.close_dialog(S1, Some(PAGE), true, "");
    let on_page = sim.agent("Runtime.evaluate", S1, &[]);
    sim.open_dialog(S1, "FA", "confirm", "grandchild");
    assert_eq!(blocked_by(&on_page), "d-2");
    nothing_yet(&in_b);
    let snap = sim.snap();
    assert_eq!(blocking_in_snapshot(&snap, S1, "Runtime.evaluate"), ["d-2"]);
    assert!(blocking_in_snapshot(&snap, "C1", "Runtime.evaluate").is_empty());
}

/// Until a session's renderer is known (its isolate probe unanswered, e.g. after a new
/// document), the coarse rule stands in: same browsing-context group and same site. A reply
/// about an older document is ignored.
#[test]
fn without_isolate_ids_same_group_and_site_decide_and_stale_replies_are_ignored() {
    let mut sim = Sim::with_popups();
    sim.popup("P2", "SAME", PAGE, true, "http://sub.a.test/");
    sim.popup("P3", "CROSS", PAGE, true, "http://b.test/");
    sim.popup("P4", "NOOPENER", PAGE, false, "http://a.test/");
    let on_page = sim.agent("Runtime.evaluate", S1, &[]);
    let on_cross = sim.agent("Runtime.evaluate", "P3", &[]);
    let on_noopener = sim.agent("Runtime.evaluate", "P4", &[]);
    sim.open_dialog("P2", "SAME", "alert", "same site, same group");
    assert_eq!(blocked_by(&on_page), "d-1");
    nothing_yet(&on_cross);
    nothing_yet(&on_noopener);
    // The cross-site popup's probe is answered: another renderer, so still not blocked.
    sim.isolate("P3", "I-B");
    nothing_yet(&on_cross);
    sim.close_dialog("P2", Some("SAME"), true, "");
    // P3 navigates to A's site: its old isolate is forgotten, the coarse rule says A's renderer.
    sim.isolate(S1, "I-A");
    sim.frame_navigated("P3", "CROSS", None, "http://a.test/now");
    sim.step();
    // The probe sent when P3 was set up (for its initial document) answers only now: it is
    // about an older document and not taken for the new one.
    let stale = sim
        .core
        .calls
        .iter()
        .filter_map(|(id, c)| match &c.kind {
            CallKind::IsolateId {
                session_id,
                generation,
            } if session_id == "P3" => Some((*generation, *id)),
            _ => None,
        })
        .min()
        .expect("P3's first probe is still unanswered");
    assert_eq!(stale.0, 0);
    sim.reply(stale.1, json!({"id": "I-B"}));
    let snap = sim.snap();
    assert_eq!(snap.renderers["P3"].isolate, None);
    assert_eq!(snap.renderers["P3"].site.as_deref(), Some("a.test"));
    assert_eq!(snap.renderers[S1].group, PAGE);
    assert_eq!(snap.renderers["P4"].group, "NOOPENER");
    let on_p3 = sim.agent("Runtime.evaluate", "P3", &[]);
    sim.open_dialog(S1, PAGE, "alert", "opener");
    assert_eq!(blocked_by(&on_p3), "d-2");
    // Its current probe answers once the dialog is gone.
    sim.close_dialog(S1, Some(PAGE), true, "");
    sim.isolate("P3", "I-A");
    assert_eq!(sim.snap().renderers["P3"].isolate.as_deref(), Some("I-A"));
}

/// When a session's renderer becomes known while a dialog is open, calls in flight on it are
/// checked again (Chromium answers the probe and the dialog event in either order).
#[test]
fn a_renderer_learnt_while_a_dialog_is_open_fails_the_calls_it_blocks() {
    let mut sim = Sim::with_popups();
    sim.isolate(S1, "I-A");
    // A cross-site popup by its URL, so the coarse rule says "not the opener's renderer" ...
    sim.popup("P2", "POP", PAGE, true, "http://b.test/");
    let on_page = sim.agent("Runtime.evaluate", S1, &[]);
    sim.open_dialog("P2", "POP", "alert", "x");
    nothing_yet(&on_page);
    // ... but its probe says it is (a process reused for it: the isolate id decides).
    sim.isolate("P2", "I-A");
    assert_eq!(blocked_by(&on_page), "d-1");
}

/// A dialog that CDP can no longer answer (SPEC §11) still blocks its renderer: a call made
/// while it was pending (a method not measured, waiting out its grace) fails the moment it
/// becomes unanswerable, new calls into that renderer are refused, and `Page.reload` goes
/// through. Calls on other renderers carry on.
#[test]
fn calls_into_the_renderer_of_an_unanswerable_dialog_are_refused_up_front() {
    let mut sim = Sim::must_respond();
    sim.isolate(S1, "I-A");
    sim.oopif(S1, "C1", "FB", PAGE);
    sim.frame_navigated("C1", "FB", Some(PAGE), "http://b.test/");
    sim.oopif(S1, "C2", "FB2", PAGE);
    sim.frame_navigated("C2", "FB2", Some(PAGE), "http://sub.b.test/");
    sim.step();
    sim.isolate("C1", "I-B");
    sim.isolate("C2", "I-B");
    // Chromium: Opening(main), Opening(iframe), Closed(main); the iframe's confirm is left
    // unanswerable.
    sim.open_dialog(S1, PAGE, "alert", "main");
    sim.open_dialog(S1, "FB", "confirm", "iframe");
    sim.close_dialog(S1, Some(PAGE), true, "");
    let grace = sim.agent("Page.notMeasured", "C2", &["d-2"]);
    let reload = sim.agent("Page.reload", "C1", &["d-2"]);
    let elsewhere = sim.agent("Runtime.evaluate", S1, &[]);
    let (answer, rx) = sim.answer("d-2", true, None, ClosedBy::Agent);
    sim.error(answer, "No dialog is showing");
    assert!(matches!(err(&rx), Error::DialogUnanswerable { .. }));
    match err(&grace) {
        Error::DialogUnanswerable { id, frame_id } => {
            assert_eq!((id.as_str(), frame_id.as_deref()), ("d-2", Some("FB")));
        }
        other => panic!("expected DialogUnanswerable, got {other:?}"),
    }
    nothing_yet(&reload);
    nothing_yet(&elsewhere);
    let refused = sim.agent("DOM.getDocument", "C1", &[]);
    assert!(matches!(err(&refused), Error::DialogUnanswerable { .. }));
    let snap = sim.snap();
    assert!(snap.pending_dialogs.is_empty());
    assert_eq!(snap.unanswerable.len(), 1);
    let d = &snap.unanswerable[0];
    assert!(policy::dialog_blocks(&snap, d, "C2", "Runtime.evaluate"));
    assert!(!policy::dialog_blocks(&snap, d, S1, "Runtime.evaluate"));
}

/// SPEC §8 "No silent wedge": a popup past `limits.pages_max` is watched for its dialogs only,
/// up to `limits.watched_pages_max`; its dialog is pending with its target id, answerable on
/// its session, and fails the calls into the renderer it shares with the task's page.
#[test]
fn a_popup_past_pages_max_is_watched_for_dialogs_and_its_dialog_blocks_its_renderer() {
    let mut sim = Sim::attached(CoreSettings {
        follow_popups: true,
        limits: Limits {
            pages_max: 1,
            watched_pages_max: 2,
            ..Limits::default()
        },
        ..settings(DialogPolicy::MustRespond, BridgeMode::On)
    });
    sim.isolate(S1, "I-A");
    sim.popup("P2", "FOLLOWED", PAGE, true, "http://a.test/1");
    let out = sim.popup("P3", "WATCHED", PAGE, true, "http://a.test/2");
    assert_eq!(
        out.methods(),
        [
            ("Page.enable", Some("P3")),
            ("Runtime.getIsolateId", Some("P3")),
            ("Runtime.runIfWaitingForDebugger", Some("P3")),
            // Its first document: its renderer is asked again.
            ("Runtime.getIsolateId", Some("P3")),
        ],
        "a dialog-only watch: no frames, console, iframes or bridge"
    );
    // A popup of the watched page is the task's too, and watched.
    sim.popup("P4", "WATCHED2", "WATCHED", true, "http://a.test/3");
    let out = sim.popup("P5", "LET-GO", PAGE, true, "http://a.test/4");
    assert_eq!(
        out.methods(),
        [
            ("Runtime.runIfWaitingForDebugger", Some("P5")),
            ("Target.detachFromTarget", None)
        ]
    );
    let snap = sim.snap();
    assert_eq!(snap.pages.len(), 2);
    assert!(snap.pages_truncated);
    let watched: Vec<&str> = snap
        .watched_pages
        .iter()
        .map(|p| p.target_id.as_str())
        .collect();
    assert_eq!(watched, ["WATCHED", "WATCHED2"]);
    assert!(
        snap.frames.get("WATCHED").is_none(),
        "its frames are not tracked"
    );
    sim.isolate("P3", "I-A");
    let on_page = sim.agent("Input.dispatchMouseEvent", S1, &[]);
    sim.open_dialog("P3", "WATCHED", "alert", "on load");
    assert_eq!(
        blocked_by(&on_page),
        "d-1",
        "the task's page shares its renderer"
    );
    let d = sim.pending("d-1");
    assert_eq!(d.target_id, "WATCHED");
    let (id, rx) = sim.answer("d-1", true, None, ClosedBy::Agent);
    sim.close_dialog("P3", Some("WATCHED"), true, "");
    sim.reply(id, json!({}));
    ok(&rx);
    assert_eq!(sim.closed("d-1").closed_by, ClosedBy::Agent);
    // It closes with a dialog pending: remote, and it leaves the watch list.
    sim.open_dialog("P3", "WATCHED", "confirm", "again");
    sim.event(
        None,
        "Target.detachedFromTarget",
        json!({"sessionId": "P3"}),
    );
    assert_eq!(sim.closed("d-2").closed_by, ClosedBy::Remote);
    assert_eq!(sim.snap().watched_pages.len(), 1);
}

/// A watched popup whose renderer is not known yet (its probe waits behind its own on-load
/// dialog) is judged by its document's site: a cross-site one does not block the task's page,
/// a same-site one does.
#[test]
fn a_watched_popup_without_an_isolate_id_is_judged_by_its_site() {
    let mut sim = Sim::attached(CoreSettings {
        follow_popups: true,
        limits: Limits {
            pages_max: 0,
            ..Limits::default()
        },
        ..settings(DialogPolicy::MustRespond, BridgeMode::Off)
    });
    sim.isolate(S1, "I-A");
    sim.popup("P2", "CROSS", PAGE, true, "http://b.test/alert");
    sim.popup("P3", "SAME", PAGE, true, "http://sub.a.test/alert");
    let on_page = sim.agent("Runtime.evaluate", S1, &[]);
    sim.open_dialog("P2", "CROSS", "alert", "cross-site, on load");
    nothing_yet(&on_page);
    sim.open_dialog("P3", "SAME", "alert", "same-site, on load");
    assert_eq!(blocked_by(&on_page), "d-2");
    let snap = sim.snap();
    assert_eq!(snap.renderers["P2"].site.as_deref(), Some("b.test"));
    assert_eq!(snap.watched_pages.len(), 2);
}

/// What a watched popup shows (`watched_pages`) follows its document: its URL, and the site its
/// renderer is judged by.
#[test]
fn a_watched_popup_shows_its_new_document() {
    let mut sim = Sim::attached(CoreSettings {
        follow_popups: true,
        limits: Limits {
            pages_max: 0,
            ..Limits::default()
        },
        ..settings(DialogPolicy::MustRespond, BridgeMode::Off)
    });
    sim.popup("P2", "W", PAGE, true, "http://b.test/first");
    let before = sim.snap();
    assert_eq!(before.watched_pages[0].url, "http://b.test/first");
    assert_eq!(before.renderers["P2"].site.as_deref(), Some("b.test"));
    sim.frame_navigated("P2", "W", None, "http://a.test/second");
    let after = sim.snap();
    assert_eq!(after.watched_pages[0].url, "http://a.test/second");
    assert_eq!(after.renderers["P2"].site.as_deref(), Some("a.test"));
}

/// Publishing costs nothing when nothing visible changed: no new snapshot for a call
/// registered, an event nobody tracks, or a bridge turned on; one for each visible change.
#[test]
fn only_a_visible_change_publishes() {
    let mut sim = Sim::must_respond();
    sim.snap();
    assert!(sim.core.take_published().is_none(), "nothing since");
    sim.register("Runtime.evaluate", Some(S1), CallKind::Plain);
    sim.event(Some(S1), "Network.requestWillBeSent", json!({}));
    sim.event(
        Some("STRAY"),
        "Page.frameNavigated",
        json!({"frame": {"id": "X"}}),
    );
    sim.core.activate_bridge();
    sim.step();
    assert!(
        sim.core.take_published().is_none(),
        "nothing visible changed"
    );
    sim.event(
        Some(S1),
        "Runtime.consoleAPICalled",
        json!({"type": "error", "args": [{"type": "string", "value": "boom"}]}),
    );
    let s = sim
        .core
        .take_published()
        .expect("a console error is visible");
    assert_eq!(s.console_errors.len(), 1);
    assert!(sim.core.take_published().is_none(), "published once");
    sim.core.reconnecting(1, 3);
    assert!(sim.core.take_published().is_some(), "the state is visible");
    sim.core.reconnecting(1, 3);
    assert!(sim.core.take_published().is_none(), "the same state again");
}

// ------------------------------------------------------------------ the call rules (core/policy.rs)

/// Whether a call of `method` on `sid`, in flight when dialog `d-N` opens, fails at once.
fn fails_in_flight(sim: &mut Sim, sid: &str, method: &str, open: impl FnOnce(&mut Sim)) -> bool {
    let rx = sim.agent(method, sid, &[]);
    open(sim);
    match rx.try_recv() {
        Ok(Err(Error::BlockedByDialog { .. })) => true,
        Err(TryRecvError::Empty) => false,
        other => panic!("{method} on {sid}: {other:?}"),
    }
}

/// The call path (`policy::admit` on the published snapshot, for a call made while the dialog
/// is pending) and the state machine (for a call in flight when it opens) apply one rule: the
/// sessions a dialog blocks are the same for both, and which methods it holds up is the measured
/// table read two ways (refused unsent / failed in flight, sent, sent with a grace).
#[test]
fn the_call_path_and_the_core_agree_on_which_calls_a_dialog_blocks() {
    let methods = [
        ("Runtime.evaluate", WithDialog::Refuse, true),
        ("Page.navigate", WithDialog::Send, false),
        ("Input.dispatchMouseEvent", WithDialog::Refuse, true),
        ("Page.notMeasured", WithDialog::Grace, true),
    ];
    // S1 and the same-site popup share a renderer; the cross-site popup does not.
    for (sid, blocked) in [(S1, true), ("P2", true), ("P3", false)] {
        for (method, with_dialog, in_flight) in methods {
            let mut sim = Sim::with_popups();
            sim.isolate(S1, "I-A");
            sim.popup("P2", "SAME", PAGE, true, "http://sub.a.test/");
            sim.popup("P3", "CROSS", PAGE, true, "http://b.test/");
            sim.isolate("P2", "I-A");
            sim.isolate("P3", "I-B");
            assert_eq!(policy::with_dialog_pending(method), with_dialog, "{method}");
            let failed = fails_in_flight(&mut sim, sid, method, |sim| {
                sim.open_dialog(S1, PAGE, "confirm", "sure?");
            });
            assert_eq!(failed, blocked && in_flight, "in flight: {method} on {sid}");
            let snap = sim.snap();
            let admitted = policy::admit(&snap, true, sid, method);
            match (blocked, with_dialog) {
                (false, _) | (true, WithDialog::Send) => {
                    let a = admitted.unwrap_or_else(|e| panic!("{method} on {sid}: {e}"));
                    assert!(a.grace.is_none());
                    assert_eq!(a.known.len(), usize::from(blocked), "{method} on {sid}");
                }
                (true, WithDialog::Refuse) => assert!(
                    matches!(admitted, Err(Error::BlockedByDialog { ref dialog, .. }) if dialog.id == "d-1"),
                    "{method} on {sid}: {admitted:?}"
                ),
                (true, WithDialog::Grace) => {
                    let a = admitted.unwrap_or_else(|e| panic!("{method} on {sid}: {e}"));
                    assert_eq!(a.grace.map(|d| d.id.as_str()), Some("d-1"));
                }
            }
            // A policy that answers dialogs itself holds nothing up.
            assert!(policy::admit(&snap, false, sid, method).is_ok());
        }
    }
}

/// A `beforeunload` dialog holds up the navigation that raised it (its reply waits for the
/// answer), although `Page.navigate` answers under any other dialog.
#[test]
fn a_beforeunload_dialog_holds_up_the_navigation_in_flight() {
    for (kind, held) in [("beforeunload", true), ("alert", false)] {
        let mut sim = Sim::must_respond();
        let failed = fails_in_flight(&mut sim, S1, "Page.navigate", |sim| {
            sim.open_dialog(S1, PAGE, kind, "");
        });
        assert_eq!(failed, held, "{kind}");
    }
}

/// A method nobody measured is sent with a grace: if no reply came within `DIALOG_GRACE` while
/// the dialog is still pending, it fails naming the dialog; once the dialog is gone it waits on;
/// a dialog CDP can no longer answer fails it as unanswerable.
#[test]
fn a_call_sent_with_a_grace_fails_only_while_its_dialog_still_blocks() {
    let mut sim = Sim::must_respond();
    sim.open_dialog(S1, PAGE, "alert", "hi");
    let before = sim.snap();
    let admitted = policy::admit(&before, true, S1, "Page.notMeasured").unwrap();
    let dialog = admitted.grace.expect("sent with a grace").clone();
    sim.advance(policy::DIALOG_GRACE.as_millis() as u64);
    assert!(matches!(
        policy::after_grace(&sim.snap(), &dialog, "Page.notMeasured"),
        Some(Error::BlockedByDialog { .. })
    ));
    let (answer, rx) = sim.answer("d-1", true, None, ClosedBy::Agent);
    sim.error(answer, "No dialog is showing");
    assert!(matches!(err(&rx), Error::DialogUnanswerable { .. }));
    assert!(matches!(
        policy::after_grace(&sim.snap(), &dialog, "Page.notMeasured"),
        Some(Error::DialogUnanswerable { .. })
    ));
    sim.frame_navigated(S1, PAGE, None, "http://a.test/reloaded");
    assert!(policy::after_grace(&sim.snap(), &dialog, "Page.notMeasured").is_none());
}

/// The second look: a dialog published after the caller's first look and before its call was
/// registered is caught right after the write, unless the caller already knew it.
#[test]
fn a_dialog_published_after_the_first_look_is_caught_by_the_second() {
    let mut sim = Sim::must_respond();
    let first = sim.snap();
    let admitted = policy::admit(&first, true, S1, "Runtime.evaluate").unwrap();
    assert!(admitted.known.is_empty());
    sim.open_dialog(S1, PAGE, "alert", "raced");
    let second = sim.snap();
    assert!(matches!(
        policy::opened_since(&second, &admitted.known, S1, "Runtime.evaluate"),
        Some(Error::BlockedByDialog { ref dialog, .. }) if dialog.id == "d-1"
    ));
    let known: Vec<&PendingDialog> = second.pending_dialogs.iter().collect();
    assert!(policy::opened_since(&second, &known, S1, "Runtime.evaluate").is_none());
    assert!(policy::opened_since(&second, &[], S1, "Page.reload").is_none());
}

/// SPEC §10: a crashed renderer fails the calls waiting on it and refuses new ones at once,
/// except `Page.navigate` and `Page.reload`, which bring a new renderer; the snapshot says
/// `crashed` until a new document comes.
#[test]
fn a_crashed_renderer_refuses_every_call_but_the_two_that_recover_it() {
    let mut sim = Sim::must_respond();
    let waiting = sim.agent("Runtime.evaluate", S1, &[]);
    let navigating = sim.agent("Page.navigate", S1, &[]);
    sim.event(Some(S1), "Inspector.targetCrashed", json!({}));
    let crashed =
        |e: Error| matches!(e, Error::TargetCrashed { ref what, .. } if what == "the page");
    assert!(crashed(err(&waiting)));
    nothing_yet(&navigating);
    assert!(crashed(err(&sim.agent("DOM.getDocument", S1, &[]))));
    nothing_yet(&sim.agent("Page.reload", S1, &[]));
    assert!(sim.snap().crashed);
    for method in [
        "Runtime.evaluate",
        "Page.navigate",
        "Page.reload",
        "Input.insertText",
    ] {
        assert_eq!(
            policy::crash_refusal("the page", method).is_none(),
            policy::answered_when_crashed(method),
            "{method}"
        );
    }
    sim.frame_navigated(S1, PAGE, None, "http://a.test/again");
    assert!(!sim.snap().crashed);
    nothing_yet(&sim.agent("Runtime.evaluate", S1, &[]));
}

/// What `blocked` costs a caller: a dialog a probe proved orphaned refuses the calls on its
/// session that would hang (not `Page.reload`, which clears it, nor calls elsewhere); a page
/// that merely does not answer refuses nothing (it may answer again); `respond_to_dialog` gets
/// the error that names the cause.
#[test]
fn blocked_refuses_what_it_proves_and_names_its_cause() {
    for (reason, refuses) in [
        (BlockedReason::OrphanedDialog, true),
        (BlockedReason::Unresponsive, false),
    ] {
        let mut sim = Sim::must_respond();
        sim.oopif(S1, "C1", "FB", PAGE);
        sim.register(
            "Page.enable",
            Some(S1),
            CallKind::Responds {
                session_id: S1.into(),
            },
        );
        let hint = match reason {
            BlockedReason::OrphanedDialog => policy::ORPHAN_HINT,
            _ => policy::UNRESPONSIVE_HINT,
        };
        let blocked = Blocked {
            reason,
            hint: hint.into(),
            frame_id: None,
            target_ids: Vec::new(),
        };
        let probe = sim.register(
            "Browser.getVersion",
            None,
            CallKind::ProbeBlocked {
                session_id: S1.into(),
                blocked: blocked.clone(),
            },
        );
        sim.reply(probe, json!({}));
        let snap = sim.snap();
        assert_eq!(snap.blocked.as_ref(), Some(&blocked));
        let refused = policy::admit(&snap, true, S1, "Runtime.evaluate");
        assert_eq!(
            matches!(refused, Err(Error::OrphanedDialog)),
            refuses,
            "{reason}"
        );
        assert!(policy::admit(&snap, true, S1, "Page.reload").is_ok());
        assert!(policy::admit(&snap, true, "C1", "Runtime.evaluate").is_ok());
    }
    let error = |reason| {
        policy::blocked_error(&Blocked {
            reason,
            hint: String::new(),
            frame_id: Some("F".into()),
            target_ids: Vec::new(),
        })
    };
    assert!(matches!(
        error(BlockedReason::OrphanedDialog),
        Error::OrphanedDialog
    ));
    assert!(matches!(
        error(BlockedReason::Unresponsive),
        Error::PageUnresponsive
    ));
    assert!(matches!(
        error(BlockedReason::UnanswerableDialog),
        Error::DialogUnanswerable { ref id, frame_id: Some(ref f) } if id.is_empty() && f == "F"
    ));
}

/// A session's renderer is judged by the site of its own document until its isolate id is
/// known: the page session's site appears with the first frame tree (the attach's
/// `Page.getFrameTree`), and an iframe session's goes when its frame does.
#[test]
fn a_sessions_site_follows_its_own_documents_origin() {
    let mut sim = Sim::new(settings(DialogPolicy::MustRespond, BridgeMode::Off));
    let attach = sim.register(
        "Target.attachToTarget",
        None,
        CallKind::AttachPage {
            target_id: PAGE.into(),
        },
    );
    sim.reply(attach, json!({"sessionId": S1}));
    assert_eq!(sim.snap().renderers[S1].site, None, "no document yet");
    let seed = sim.register(
        "Page.getFrameTree",
        Some(S1),
        CallKind::SeedFrameTree {
            session_id: S1.into(),
        },
    );
    sim.reply(
        seed,
        json!({"frameTree": {"frame": {"id": PAGE, "url": "http://www.a.test/"}}}),
    );
    assert_eq!(sim.snap().renderers[S1].site.as_deref(), Some("a.test"));
    sim.oopif(S1, "C1", "FB", PAGE);
    assert_eq!(sim.snap().renderers["C1"].site.as_deref(), Some("fb.test"));
    // Its parent removes the frame before the browser detaches its session.
    sim.event(Some(S1), "Page.frameDetached", json!({"frameId": "FB"}));
    assert_eq!(sim.snap().renderers["C1"].site, None);
}

// ------------------------------------------------------------------ issue 31: files, navigation

fn with_files(dir: &str, answer_choosers: bool) -> Sim {
    let mut sim = Sim::new(settings(DialogPolicy::MustRespond, BridgeMode::Off));
    sim.core.set_files(FilesSettings {
        download_dir: Some(dir.into()),
        download_behavior: Some(json!({"behavior": "allowAndName", "downloadPath": dir})),
        answer_file_choosers: answer_choosers,
    });
    let attach = sim.register(
        "Target.attachToTarget",
        None,
        CallKind::AttachPage {
            target_id: PAGE.into(),
        },
    );
    sim.reply(attach, json!({"sessionId": S1}));
    sim.event(
        Some(S1),
        "Page.frameNavigated",
        json!({"frame": {"id": PAGE, "url": "http://a.test/", "loaderId": "L0",
                         "securityOrigin": "http://a.test"}}),
    );
    sim
}

#[test]
fn the_page_attached_tells_the_browser_where_the_tasks_downloads_go() {
    let mut sim = with_files("/dl/task", false);
    let out = sim.step();
    let (_, c) = out.only("Browser.setDownloadBehavior");
    assert_eq!(c.session_id, None, "browser-level");
    assert_eq!(c.params["downloadPath"], "/dl/task");
}

#[test]
fn a_download_of_the_tasks_page_is_followed_and_moved_into_its_directory() {
    let mut sim = with_files("/dl/task", false);
    sim.step();
    // Another task's download (a frame this task does not have): not ours.
    sim.event(
        None,
        "Browser.downloadWillBegin",
        json!({"frameId": "OTHER", "guid": "G0", "url": "http://b.test/x", "suggestedFilename": "x"}),
    );
    sim.event(
        Some(S1),
        "Page.downloadWillBegin",
        json!({"frameId": PAGE, "guid": "G1", "url": "http://a.test/f", "suggestedFilename": "../report.txt"}),
    );
    sim.event(
        None,
        "Browser.downloadWillBegin",
        json!({"frameId": PAGE, "guid": "G1", "url": "http://a.test/f", "suggestedFilename": "../report.txt"}),
    );
    let s = sim.snap();
    assert_eq!(s.downloads.len(), 1, "{:?}", s.downloads);
    assert_eq!(s.downloads[0].state, DownloadState::InProgress);
    sim.event(
        None,
        "Browser.downloadProgress",
        json!({"guid": "G1", "totalBytes": 10, "receivedBytes": 4, "state": "inProgress"}),
    );
    assert_eq!(sim.snap().downloads[0].received_bytes, 4);
    // The page-level "completed" comes first and does not say where the file is.
    sim.event(
        Some(S1),
        "Page.downloadProgress",
        json!({"guid": "G1", "totalBytes": 10, "receivedBytes": 10, "state": "completed"}),
    );
    assert_eq!(sim.snap().downloads[0].state, DownloadState::InProgress);
    sim.event(
        None,
        "Browser.downloadProgress",
        json!({"guid": "G1", "totalBytes": 10, "receivedBytes": 10, "state": "completed",
               "filePath": "/dl/other-task/G1"}),
    );
    let out = sim.step();
    let to = std::path::PathBuf::from("/dl/task/report.txt");
    assert_eq!(
        out.moves,
        [("G1".to_string(), "/dl/other-task/G1".into(), to.clone())]
    );
    let d = sim.snap().downloads[0].clone();
    assert_eq!(d.state, DownloadState::Completed);
    assert_eq!(d.path.as_deref(), Some(to.as_path()));
    assert_eq!((d.received_bytes, d.total_bytes), (10, Some(10)));
    // A second file of the same name gets a name of its own; a failed move keeps where the
    // browser wrote it.
    sim.event(
        Some(S1),
        "Page.downloadWillBegin",
        json!({"frameId": PAGE, "guid": "G2", "url": "u", "suggestedFilename": "report.txt"}),
    );
    sim.event(
        None,
        "Browser.downloadProgress",
        json!({"guid": "G2", "receivedBytes": 3, "state": "completed", "filePath": "/dl/task/G2"}),
    );
    let out = sim.step();
    assert_eq!(
        out.moves[0].2,
        std::path::PathBuf::from("/dl/task/report (1).txt")
    );
    sim.core
        .download_move_failed("G2", std::path::Path::new("/dl/task/G2"), "EXDEV");
    let d = sim.snap().downloads[1].clone();
    assert_eq!(d.path.as_deref(), Some(std::path::Path::new("/dl/task/G2")));
    // A cancelled one says so, and stays cancelled.
    sim.event(
        Some(S1),
        "Page.downloadWillBegin",
        json!({"frameId": PAGE, "guid": "G3", "url": "u", "suggestedFilename": "big.bin"}),
    );
    sim.event(
        None,
        "Browser.downloadProgress",
        json!({"guid": "G3", "receivedBytes": 5, "state": "canceled"}),
    );
    sim.event(
        None,
        "Browser.downloadProgress",
        json!({"guid": "G3", "receivedBytes": 9, "state": "inProgress"}),
    );
    let d = sim.snap().downloads[2].clone();
    assert_eq!(
        (d.state, d.received_bytes, d.path.clone()),
        (DownloadState::Canceled, 5, None)
    );
    assert_eq!(
        sim.snap().to_json()["downloads"][2],
        json!({"guid": "G3", "url": "u", "suggested_filename": "big.bin", "state": "canceled",
               "received_bytes": 5})
    );
}

#[test]
fn a_file_chooser_is_pending_with_file_access_and_refused_without() {
    for answerable in [true, false] {
        let mut sim = with_files("/dl/t", answerable);
        sim.step();
        sim.event(
            Some(S1),
            "Page.fileChooserOpened",
            json!({"frameId": PAGE, "mode": "selectMultiple", "backendNodeId": 42}),
        );
        let s = sim.snap();
        let j = s.to_json();
        if answerable {
            assert_eq!(s.file_choosers.len(), 1);
            let c = &s.file_choosers[0];
            assert_eq!(
                (c.id.as_str(), c.mode, c.backend_node_id),
                ("fc-1", ChooserMode::Multiple, 42)
            );
            assert_eq!(c.target_id, PAGE);
            assert!(
                s.pending_dialogs.is_empty(),
                "not a dialog: it blocks nothing"
            );
            let entry = &j["pending_dialogs"][0];
            assert_eq!(entry["type"], "file_chooser");
            assert_eq!(entry["mode"], "multiple");
            assert_eq!(entry["backend_node_id"], 42);
            assert!(j.get("file_chooser_refused").is_none());
            // Answered: gone.
            let done = sim.register(
                "DOM.setFileInputFiles",
                Some(S1),
                CallKind::ChooserDone { id: "fc-1".into() },
            );
            sim.reply(done, json!({}));
            assert!(sim.snap().file_choosers.is_empty());
            // A new document of its frame takes a pending chooser with it.
            sim.event(
                Some(S1),
                "Page.fileChooserOpened",
                json!({"frameId": PAGE, "mode": "selectSingle", "backendNodeId": 7}),
            );
            assert_eq!(sim.snap().file_choosers[0].id, "fc-2");
            sim.event(
                Some(S1),
                "Page.frameNavigated",
                json!({"frame": {"id": PAGE, "url": "http://a.test/2", "loaderId": "L9", "securityOrigin": "http://a.test"}}),
            );
            assert!(sim.snap().file_choosers.is_empty());
        } else {
            assert!(s.file_choosers.is_empty());
            let r = s.file_chooser_refused.clone().expect("refused");
            assert_eq!((r.mode, r.count), (ChooserMode::Multiple, 1));
            assert!(j["pending_dialogs"].as_array().unwrap().is_empty());
            assert_eq!(
                j["file_chooser_refused"]["option"],
                "security.allow_file_access"
            );
            assert!(
                j["file_chooser_refused"]["hint"]
                    .as_str()
                    .unwrap()
                    .contains("allow_file_access = true"),
                "{j}"
            );
        }
    }
}

#[test]
fn the_main_documents_loader_and_load_are_published_for_navigations() {
    let mut sim = with_files("/dl/t", false);
    sim.step();
    assert_eq!(
        sim.snap().document,
        Some(crate::snapshot::MainDocument {
            loader_id: "L0".into(),
            loaded: false
        })
    );
    // An OOPIF's load is not the page's.
    sim.event(
        Some("OTHER"),
        "Page.loadEventFired",
        json!({"timestamp": 1.0}),
    );
    assert!(!sim.snap().document.unwrap().loaded);
    sim.event(Some(S1), "Page.loadEventFired", json!({"timestamp": 1.0}));
    assert!(sim.snap().document.unwrap().loaded);
    // A child frame's navigation is not the page's document.
    sim.event(
        Some(S1),
        "Page.frameNavigated",
        json!({"frame": {"id": "CHILD", "parentId": PAGE, "url": "http://a.test/c", "loaderId": "LC"}}),
    );
    assert_eq!(sim.snap().document.unwrap().loader_id, "L0");
    sim.event(
        Some(S1),
        "Page.frameNavigated",
        json!({"frame": {"id": PAGE, "url": "http://a.test/n", "loaderId": "L1"}}),
    );
    assert_eq!(
        sim.snap().document,
        Some(crate::snapshot::MainDocument {
            loader_id: "L1".into(),
            loaded: false
        })
    );
}

#[test]
fn a_new_page_after_a_reconnect_is_reported_as_a_replacement() {
    let mut sim = Sim::must_respond();
    assert!(sim.snap().page_replaced.is_none());
    sim.core.on_disconnect("dropped", sim.now);
    sim.core.reconnecting(1, 3);
    assert_eq!(sim.core.reset_for_reconnect().as_deref(), Some(PAGE));
    // The same page again: nothing to report.
    let attach = sim.register(
        "Target.attachToTarget",
        None,
        CallKind::AttachPage {
            target_id: PAGE.into(),
        },
    );
    sim.reply(attach, json!({"sessionId": "S2"}));
    assert!(sim.snap().page_replaced.is_none());
    sim.core.on_disconnect("dropped", sim.now);
    sim.core.reconnecting(1, 3);
    sim.core.reset_for_reconnect();
    let attach = sim.register(
        "Target.attachToTarget",
        None,
        CallKind::AttachPage {
            target_id: "NEW".into(),
        },
    );
    sim.reply(attach, json!({"sessionId": "S3"}));
    let s = sim.snap();
    assert_eq!(s.page_replaced.as_deref(), Some(PAGE));
    assert_eq!(s.page_target_id.as_deref(), Some("NEW"));
    assert_eq!(s.to_json()["page_replaced"]["old_target_id"], PAGE);
    assert!(s.is_active());
}

// ------------------------------------------------------------------ invisible supervision

/// SPEC §19: by default no session is sent `Runtime.enable` (the page's, an OOPIF's, a
/// popup's, a worker's); with `capture_console` every one of them is, the page's once per
/// session the moment it is learnt.
#[test]
fn runtime_is_enabled_only_when_the_console_is_captured() {
    for capture in [false, true] {
        let mut sim = Sim::new(CoreSettings {
            capture_console: capture,
            follow_popups: true,
            ..settings(DialogPolicy::MustRespond, BridgeMode::Off)
        });
        let attach = sim.register(
            "Target.attachToTarget",
            None,
            CallKind::AttachPage {
                target_id: PAGE.into(),
            },
        );
        sim.reply(attach, json!({"sessionId": S1}));
        let mut sent = sim.step().methods_owned();
        sent.extend(sim.oopif(S1, "C1", "F1", PAGE).methods_owned());
        sim.event(
            Some(S1),
            "Target.attachedToTarget",
            json!({"sessionId": "W1", "waitingForDebugger": true,
                   "targetInfo": {"targetId": "T-W1", "type": "worker", "url": ""}}),
        );
        sent.extend(sim.step().methods_owned());
        sim.event(
            None,
            "Target.attachedToTarget",
            json!({"sessionId": "P2", "waitingForDebugger": true,
                   "targetInfo": {"targetId": "POPUP", "type": "page", "url": "about:blank",
                                  "openerId": PAGE, "canAccessOpener": true}}),
        );
        sent.extend(sim.step().methods_owned());
        let enabled: Vec<&str> = sent
            .iter()
            .filter(|(m, _)| m == "Runtime.enable")
            .map(|(_, s)| s.as_str())
            .collect();
        if capture {
            assert_eq!(enabled, [S1, "C1", "W1", "P2"], "{sent:?}");
        } else {
            assert!(enabled.is_empty(), "{sent:?}");
        }
        assert!(
            sent.iter()
                .any(|(m, s)| m == "Runtime.runIfWaitingForDebugger" && s == "W1"),
            "the worker is resumed either way: {sent:?}"
        );
    }
}

/// A same-process frame's main world found through the DOM (`supervisor/main_world.rs`): the
/// checked call's success records it for the document the frame showed then; a new document
/// forgets it, and an answer about an older document, or a failed check, is not recorded.
#[test]
fn a_main_world_found_through_the_dom_is_kept_for_its_document() {
    let mut sim = Sim::must_respond();
    sim.frame_attached(S1, "SAME", PAGE);
    sim.frame_navigated(S1, "SAME", Some(PAGE), "http://a.test/inner");
    let record = |sim: &mut Sim| sim.snap().frames.get("SAME").cloned().expect("SAME known");
    let first = record(&mut sim);
    assert_eq!(first.default_context, None);
    let check = |sim: &mut Sim, document: u64, context: i64| {
        sim.send(
            Command::new("Runtime.callFunctionOn", json!({}))
                .on(S1)
                .kind(CallKind::Agent {
                    known_dialogs: vec![],
                    main_world: Some(MainWorld {
                        frame_id: "SAME".into(),
                        document,
                        context,
                    }),
                }),
        )
    };
    // A failed check records nothing.
    let (id, rx) = check(&mut sim, first.document, 7);
    sim.error(
        id,
        "Argument should belong to the same JavaScript world as target object",
    );
    assert!(rx.try_recv().expect("answered").is_err());
    assert_eq!(record(&mut sim).default_context, None);
    // A successful one does, and the caller gets its reply.
    let (id, rx) = check(&mut sim, first.document, 7);
    sim.reply(id, json!({"result": {"type": "undefined"}}));
    assert!(rx.try_recv().expect("answered").is_ok());
    assert_eq!(record(&mut sim).default_context, Some(7));
    // The frame navigates: a new document, no context; a late answer about the old one is
    // not taken for it.
    let (late, _rx) = check(&mut sim, first.document, 7);
    sim.frame_navigated(S1, "SAME", Some(PAGE), "http://a.test/next");
    let second = record(&mut sim);
    assert_ne!(second.document, first.document);
    assert_eq!(second.default_context, None);
    sim.reply(late, json!({"result": {"type": "undefined"}}));
    assert_eq!(record(&mut sim).default_context, None);
    // The same check from another session (not the frame's owner) is not taken either.
    let (id, _rx) = sim.send(
        Command::new("Runtime.callFunctionOn", json!({}))
            .on("OTHER")
            .kind(CallKind::Agent {
                known_dialogs: vec![],
                main_world: Some(MainWorld {
                    frame_id: "SAME".into(),
                    document: second.document,
                    context: 8,
                }),
            }),
    );
    sim.reply(id, json!({}));
    assert_eq!(record(&mut sim).default_context, None);
    let (id, _rx) = check(&mut sim, second.document, 9);
    sim.reply(id, json!({}));
    assert_eq!(record(&mut sim).default_context, Some(9));
    // A crash forgets it too.
    sim.event(Some(S1), "Inspector.targetCrashed", json!({}));
    assert_eq!(record(&mut sim).default_context, None);
}

/// With the Runtime domain on (`capture_console`), its events keep contexts: a navigation does
/// not forget one its events announced before the navigation event came (Chromium announces a
/// new document's context before `Page.frameNavigated`).
#[test]
fn with_the_runtime_domain_on_its_events_keep_contexts() {
    let mut sim = Sim::attached(CoreSettings {
        capture_console: true,
        ..settings(DialogPolicy::MustRespond, BridgeMode::Off)
    });
    sim.frame_attached(S1, "SAME", PAGE);
    sim.event(
        Some(S1),
        "Runtime.executionContextCreated",
        json!({"context": {"id": 5, "auxData": {"isDefault": true, "frameId": "SAME"}}}),
    );
    sim.frame_navigated(S1, "SAME", Some(PAGE), "http://a.test/inner");
    assert_eq!(sim.snap().frames["SAME"].default_context, Some(5));
    sim.event(
        Some(S1),
        "Runtime.executionContextDestroyed",
        json!({"executionContextId": 5}),
    );
    assert_eq!(sim.snap().frames["SAME"].default_context, None);
}

/// Issue 28: what a task creates through raw calls is its own (`security.isolate_tasks`): the
/// page and browser-context ids the browser answered are in the snapshot by the time the reply
/// is handed over (the reader publishes before it delivers). Failed calls and other methods
/// record nothing, and the record keeps the newest `CREATED_MAX` of each kind.
#[test]
fn pages_and_contexts_the_task_creates_are_its_own_when_their_reply_arrives() {
    let mut sim = Sim::must_respond();
    let (id, page) = sim.send(Command::new(
        "Target.createTarget",
        json!({"url": "about:blank"}),
    ));
    sim.reply(id, json!({"targetId": "NEW"}));
    assert_eq!(ok(&page)["targetId"], "NEW");
    let (id, context) = sim.send(Command::new("Target.createBrowserContext", json!({})));
    sim.reply(id, json!({"browserContextId": "CTX"}));
    ok(&context);
    let (id, failed) = sim.send(Command::new("Target.createTarget", json!({})));
    sim.error(id, "Failed to open a new tab");
    err(&failed);
    let (id, other) = sim.send(Command::new("Target.getTargetInfo", json!({})));
    sim.reply(id, json!({"targetId": "NOT-CREATED"}));
    ok(&other);
    let snap = sim.snap();
    assert_eq!(&*snap.created_targets, ["NEW".to_string()]);
    assert_eq!(&*snap.created_contexts, ["CTX".to_string()]);
    for i in 0..super::created::CREATED_MAX {
        let (id, _) = sim.send(Command::new("Target.createTarget", json!({})));
        sim.reply(id, json!({"targetId": format!("T{i}")}));
    }
    let snap = sim.snap();
    assert_eq!(snap.created_targets.len(), super::created::CREATED_MAX);
    assert_eq!(snap.created_targets[0], "T0", "the oldest went");
    assert_eq!(&*snap.created_contexts, ["CTX".to_string()]);
}

/// Issue 28 item 9 (SPEC §8 "No silent wedge"): past both caps a popup is let go, the
/// snapshot says so (calls into the task's renderer then probe it when they stall), and each
/// popup let go tells the watchdog to probe it (no popup followed or watched does). Once the
/// probe has proved a dialog there (its `Performance.getMetrics` unanswered, its verdict a
/// `ProbeBlocked`), `blocked` says `dialog_in_unfollowed_page` with the page to close; calls in
/// flight into that renderer fail at once (not those Chromium answers with a dialog open, nor
/// those into another renderer), later ones are refused before they are sent, and the task may
/// close that page. The renderer answering again clears it all.
#[test]
fn a_dialog_in_a_popup_let_go_past_both_caps_is_reported_and_fails_calls_into_its_renderer() {
    use crate::security::isolation::Reach as _;
    let mut sim = Sim::attached(CoreSettings {
        follow_popups: true,
        limits: Limits {
            pages_max: 1,
            watched_pages_max: 1,
            ..Limits::default()
        },
        ..settings(DialogPolicy::MustRespond, BridgeMode::Off)
    });
    sim.isolate(S1, "I-A");
    let followed = sim.popup("P2", "FOLLOWED", PAGE, true, "http://a.test/1");
    sim.isolate("P2", "I-A");
    let watched = sim.popup("P3", "WATCHED", PAGE, false, "http://b.other/2");
    sim.isolate("P3", "I-B");
    assert!(!sim.snap().popups_let_go);
    assert_eq!(
        (followed.watch_renderer, watched.watch_renderer),
        (0, 0),
        "no renderer probe while every popup is followed or watched"
    );
    let out = sim.popup("P4", "LET-GO", PAGE, true, "about:blank");
    assert_eq!(
        out.watch_renderer, 1,
        "letting a popup go starts the watchdog's renderer probe"
    );
    let again = sim.popup("P5", "LET-GO-2", PAGE, true, "about:blank");
    assert_eq!(
        again.watch_renderer, 1,
        "so does every later one (the probe stops when none is left)"
    );
    assert_eq!(
        out.methods(),
        [
            ("Runtime.runIfWaitingForDebugger", Some("P4")),
            ("Target.detachFromTarget", None)
        ]
    );
    assert!(sim.snap().popups_let_go);
    let eval = sim.agent("Runtime.evaluate", S1, &[]);
    let in_popup = sim.agent("DOM.getDocument", "P2", &[]);
    let navigate = sim.agent("Page.navigate", S1, &[]);
    let elsewhere = sim.agent("Runtime.evaluate", "P3", &[]);
    // The probe: its renderer call stays unanswered, then its verdict.
    let alive = sim.register(
        "Performance.getMetrics",
        Some(S1),
        CallKind::Responds {
            session_id: S1.into(),
        },
    );
    let blocked = Blocked {
        reason: BlockedReason::DialogInUnfollowedPage,
        hint: policy::UNFOLLOWED_HINT.into(),
        frame_id: None,
        target_ids: vec!["LET-GO".into()],
    };
    let verdict = sim.register(
        "Browser.getVersion",
        None,
        CallKind::ProbeBlocked {
            session_id: S1.into(),
            blocked: blocked.clone(),
        },
    );
    sim.reply(verdict, json!({}));
    let snap = sim.snap();
    assert_eq!(snap.blocked.as_ref(), Some(&blocked));
    let shown = &snap.to_json()["blocked"];
    assert_eq!(shown["reason"], "dialog_in_unfollowed_page");
    assert_eq!(shown["target_id"], "LET-GO");
    assert_eq!(shown["target_ids"], json!(["LET-GO"]));
    let frozen = |e: Error| matches!(e, Error::DialogInUnfollowedPage { ref target_ids } if target_ids == &["LET-GO"]);
    assert!(frozen(err(&eval)), "the call in flight fails at once");
    assert!(
        frozen(err(&in_popup)),
        "so does one into the popup of that renderer"
    );
    nothing_yet(&navigate);
    nothing_yet(&elsewhere);
    for (sid, method) in [(S1, "Runtime.evaluate"), ("P2", "Input.dispatchMouseEvent")] {
        let refused = policy::admit(&snap, true, sid, method).map(|_| ());
        assert!(frozen(refused.expect_err(method)), "{sid} {method}");
    }
    assert!(policy::admit(&snap, true, S1, "Page.navigate").is_ok());
    assert!(policy::admit(&snap, true, "P3", "Runtime.evaluate").is_ok());
    assert!(snap.owns_target("LET-GO"), "the task may close it");
    // The page was closed: the renderer answers again.
    sim.reply(alive, json!({"id": "I-A"}));
    let snap = sim.snap();
    assert_eq!(snap.blocked, None);
    assert!(policy::admit(&snap, true, S1, "Runtime.evaluate").is_ok());
}

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
    /// `Ack` requests (a hand-over, `core/handover.rs`).
    acks: usize,
    /// `CheckAnswers` requests (a page followed): its session and target.
    checks: Vec<(String, String)>,
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
                Outgoing::Watchdog(WatchdogMsg::Ack(_)) => out.acks += 1,
                Outgoing::Watchdog(WatchdogMsg::CheckAnswers {
                    session_id,
                    target_id,
                }) => out.checks.push((session_id, target_id)),
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
    s.handover = core.handover;
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
    assert_eq!(a.handover, b.handover);
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

/// Scenario steps shared by the renderer, call-rule and popup tests.
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

mod blocked_renderers;
mod call_rules;
mod clock;
mod drops;
mod files_and_navigation;
mod frame_map;
mod handover;
mod invisible;
mod lifecycle;
mod proxy_rule;
mod set_up;

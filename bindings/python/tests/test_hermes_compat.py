"""``cdp_supervisor.hermes`` as a drop-in for Hermes Agent's browser supervisor.

The scenarios of Hermes's own test file (``tests/tools/test_browser_supervisor.py``: a real
headless Chromium, pages as ``data:`` URLs, a second CDP client that navigates the supervisor's
page and runs a script there), written again here against the drop-in: none of Hermes's code is
in this repository. As Hermes now does, every task has a tab of its own (issue 31), so the second
client drives that tab; ``test_hermes_current.py`` has the scenarios of what Hermes added since
(import paths, the owned tab, navigation, tab references, frame sessions, downloads, file
choosers). ``test_hermes_upstream.py`` runs Hermes's file itself when it is at hand (``.ci/run``
downloads it at a pinned commit). Hermes's test that writes into its private asyncio state
(``test_browser_cdp_frame_id_routes_via_supervisor``: ``_state_lock``, ``_frames``,
``_page_session_id``) is replaced by the same check on a real cross-origin iframe.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import threading
import time
from typing import Any, Iterator, Tuple

import pytest

from cdp_supervisor import hermes
from cdp_supervisor.hermes import (
    DIALOG_POLICY_AUTO_DISMISS,
    SUPERVISOR_REGISTRY,
    CDPSupervisor,
    PendingDialog,
    _SupervisorRegistry,
    browser_cdp,
    browser_dialog,
)
from cdp_supervisor.testing import FakeBrowser
from conftest import Cdp, Chromium, Pages, navigate_and_run


def data_url(html: str) -> str:
    return "data:text/html;base64," + base64.b64encode(html.encode()).decode()


TEST_PAGE = data_url(
    "<!doctype html><html><head><title>Supervisor pytest</title></head><body>"
    "<h1>Supervisor pytest</h1>"
    '<iframe id="inner" srcdoc="<body><h2>frame-marker</h2></body>" width="400" height="100">'
    "</iframe></body></html>"
)


def title_page(title: str) -> str:
    return data_url(f"<!doctype html><html><head><title>{title}</title></head><body>{title}</body></html>")


def fire_on_page(chromium: Chromium, supervisor: CDPSupervisor, expression: str) -> None:
    """Hermes's ``_fire_on_page``: the supervisor's tab goes to the test page, then runs
    `expression`."""
    navigate_and_run(chromium.ws_url, TEST_PAGE, expression, target_id=supervisor.page_target_id())


@pytest.fixture
def supervisor_registry(chromium: Chromium) -> Iterator[_SupervisorRegistry]:
    """Hermes's fixture (every supervisor stops after the test), on a browser that the module
    shares where Hermes starts one per test: the tabs the supervisors opened for themselves
    close as they stop, and the next test starts once Chromium no longer lists them."""
    yield SUPERVISOR_REGISTRY
    own_pages = [s.page_target_id() for s in list(SUPERVISOR_REGISTRY._by_task.values())]
    SUPERVISOR_REGISTRY.stop_all()
    chromium.wait_until_gone([t for t in own_pages if t is not None])


def wait_for_dialog(supervisor: CDPSupervisor, timeout: float = 5.0) -> Tuple[PendingDialog, ...]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        snap = supervisor.snapshot()
        if snap.pending_dialogs:
            return snap.pending_dialogs
        time.sleep(0.02)
    return ()


# ── The public surface ───────────────────────────────────────────────────────


def test_public_names_constants_and_dataclasses_are_hermes_s() -> None:
    for name in [
        "CDPSupervisor",
        "ConsoleEvent",
        "DEFAULT_DIALOG_POLICY",
        "DEFAULT_DIALOG_TIMEOUT_S",
        "DIALOG_POLICY_AUTO_ACCEPT",
        "DIALOG_POLICY_AUTO_DISMISS",
        "DIALOG_POLICY_MUST_RESPOND",
        "DialogRecord",
        "FrameInfo",
        "PendingDialog",
        "SUPERVISOR_REGISTRY",
        "SupervisorSnapshot",
        "_SupervisorRegistry",
    ]:
        assert name in hermes.__all__ and hasattr(hermes, name), name
    assert hermes.DEFAULT_DIALOG_POLICY == "must_respond"
    assert hermes.DEFAULT_DIALOG_TIMEOUT_S == 300.0
    assert hermes._VALID_POLICIES == frozenset({"must_respond", "auto_dismiss", "auto_accept"})
    assert (hermes.RECENT_DIALOGS_MAX, hermes.FRAME_TREE_MAX_ENTRIES) == (20, 30)
    assert (hermes.FRAME_TREE_MAX_OOPIF_DEPTH, hermes.CONSOLE_HISTORY_MAX) == (2, 50)
    assert hermes.DIALOG_BRIDGE_HOST == "cdp-dialog-bridge.invalid"
    assert isinstance(SUPERVISOR_REGISTRY, _SupervisorRegistry)
    fields = {
        hermes.PendingDialog: [
            "id", "type", "message", "default_prompt", "opened_at", "cdp_session_id",
            "frame_id", "bridge_request_id",
        ],
        hermes.DialogRecord: [
            "id", "type", "message", "opened_at", "closed_at", "closed_by", "frame_id",
        ],
        hermes.FrameInfo: [
            "frame_id", "url", "origin", "parent_frame_id", "is_oopif", "cdp_session_id", "name",
        ],
        hermes.ConsoleEvent: ["ts", "level", "text", "url"],
        hermes.SupervisorSnapshot: [
            "pending_dialogs", "recent_dialogs", "frame_tree", "console_errors", "active",
            "cdp_url", "task_id", "page_target_id",
        ],
    }
    for cls, names in fields.items():
        assert [f.name for f in dataclasses.fields(cls)] == names, cls
        assert getattr(cls, "__dataclass_params__").frozen, cls
        assert callable(getattr(cls, "to_dict"))
    d = hermes.PendingDialog("d-1", "prompt", "m", "x", 1.5, "S", "F", "B")
    assert d.to_dict() == {
        "id": "d-1", "type": "prompt", "message": "m", "default_prompt": "x",
        "opened_at": 1.5, "frame_id": "F",
    }
    r = hermes.DialogRecord("d-1", "alert", "m", 1.0, 2.0, "agent")
    assert r.to_dict()["closed_by"] == "agent" and r.to_dict()["frame_id"] is None
    f = hermes.FrameInfo("F", "u", "o", None, True, "S", "n")
    assert f.to_dict() == {
        "frame_id": "F", "url": "u", "origin": "o", "is_oopif": True, "name": "n",
    }, "no session id in what an LLM sees"
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.message = "x"  # type: ignore[misc]
    with pytest.raises(ValueError, match="Invalid dialog_policy"):
        CDPSupervisor("t", "ws://x", dialog_policy="sometimes")


def test_browser_dialog_tool_no_supervisor() -> None:
    r = json.loads(browser_dialog(action="accept", task_id="nonexistent-task"))
    assert r["success"] is False
    assert "No CDP supervisor" in r["error"]


def test_browser_cdp_frame_id_missing_supervisor() -> None:
    r = json.loads(
        browser_cdp(
            method="Runtime.evaluate",
            params={"expression": "1"},
            frame_id="any-frame-id",
            task_id="no-such-task",
        )
    )
    assert r.get("success") is not True
    assert "supervisor" in (r.get("error") or "").lower()


# ── Hermes's scenarios on Chromium ──────────────────────────────────────────


def test_supervisor_start_and_snapshot(chromium: Chromium, supervisor_registry: _SupervisorRegistry) -> None:
    supervisor = supervisor_registry.get_or_start(task_id="pytest-1", cdp_url=chromium.ws_url)
    fire_on_page(chromium, supervisor, "/* no dialog */ void 0")
    deadline = time.monotonic() + 5
    while supervisor.snapshot().frame_tree.get("top") is None and time.monotonic() < deadline:
        time.sleep(0.02)
    snap = supervisor.snapshot()
    assert snap.active is True
    assert snap.task_id == "pytest-1"
    assert snap.pending_dialogs == ()
    assert snap.frame_tree.get("top") is not None
    assert supervisor.snapshot() is snap, "the same object while nothing changed"
    assert snap.page_target_id == supervisor.page_target_id()


def test_two_supervisors_navigate_distinct_owned_pages(
    chromium: Chromium, supervisor_registry: _SupervisorRegistry
) -> None:
    first = supervisor_registry.get_or_start(task_id="pytest-nav-a", cdp_url=chromium.ws_url)
    second = supervisor_registry.get_or_start(task_id="pytest-nav-b", cdp_url=chromium.ws_url)
    assert first.page_target_id()
    assert second.page_target_id()
    assert first.page_target_id() != second.page_target_id()
    nav = first.navigate_page(title_page("owned-page-a"))
    assert nav["ok"] is True and nav["target_id"] == first.page_target_id()
    assert nav["frame_id"] and nav["loader_id"]
    assert second.navigate_page(title_page("owned-page-b"))["ok"] is True
    deadline = time.monotonic() + 5
    titles: Tuple[Any, Any] = (None, None)
    while time.monotonic() < deadline:
        titles = (
            first.evaluate_runtime("document.title").get("result"),
            second.evaluate_runtime("document.title").get("result"),
        )
        if titles == ("owned-page-a", "owned-page-b"):
            break
        time.sleep(0.05)
    assert titles == ("owned-page-a", "owned-page-b")


def test_every_start_gets_a_fresh_page_never_one_the_browser_holds(chromium: Chromium) -> None:
    """Hermes's owned tab: a task never adopts a page the browser already holds (its first page
    stays as it was), even right after another task's tab closed; a start after a stop gets a
    new tab."""
    registry = _SupervisorRegistry()
    first_page = chromium.page_ids()
    try:
        seen = set()
        for round in range(3):
            own = registry.get_or_start(task_id=f"pytest-own-{round}", cdp_url=chromium.ws_url)
            page = own.page_target_id()
            assert page is not None and page not in first_page and page not in seen, round
            seen.add(page)
            assert own.navigate_page(title_page(f"own-{round}"))["ok"] is True
            assert own.evaluate_runtime("1 + 1")["result"] == 2
            registry.stop_all()
            chromium.wait_until_gone([page])
        assert all(p in chromium.page_ids() for p in first_page), "the browser's pages stay"
    finally:
        registry.stop_all()


def test_the_drop_in_opens_a_tab_and_never_attaches_to_the_existing_page(fake: FakeBrowser) -> None:
    """The same on the fake browser, from the commands it received: ``Target.createTarget``
    for an ``about:blank`` tab, attached; the fake's own page is never attached."""
    registry = _SupervisorRegistry()
    try:
        supervisor = registry.get_or_start(task_id="t", cdp_url=fake.ws_url)
        assert supervisor.page_target_id() != fake.page_target_id
        received = fake.received()
        created = [m for m in received if m.get("method") == "Target.createTarget"]
        assert [m["params"]["url"] for m in created] == ["about:blank"]
        attached = [
            m["params"]["targetId"] for m in received if m.get("method") == "Target.attachToTarget"
        ]
        assert attached == [supervisor.page_target_id()]
    finally:
        registry.stop_all()
    closed = [m["params"]["targetId"] for m in fake.received() if m.get("method") == "Target.closeTarget"]
    assert supervisor.page_target_id() in closed, "stop closes the task's tab"


def test_main_frame_alert_detection_and_dismiss(
    chromium: Chromium, supervisor_registry: _SupervisorRegistry
) -> None:
    supervisor = supervisor_registry.get_or_start(task_id="pytest-2", cdp_url=chromium.ws_url)
    fire_on_page(chromium, supervisor, "setTimeout(() => alert('PYTEST-MAIN-ALERT'), 50)")
    dialogs = wait_for_dialog(supervisor)
    assert dialogs, "no dialog detected"
    d = dialogs[0]
    assert d.type == "alert"
    assert "PYTEST-MAIN-ALERT" in d.message
    assert d.bridge_request_id is not None, "like Hermes, the bridge catches it"
    result = supervisor.respond_to_dialog("dismiss")
    assert result["ok"] is True
    assert result["dialog"]["id"] == d.id
    time.sleep(0.3)
    assert supervisor.snapshot().pending_dialogs == ()


def test_iframe_contentwindow_alert(chromium: Chromium, supervisor_registry: _SupervisorRegistry) -> None:
    supervisor = supervisor_registry.get_or_start(task_id="pytest-3", cdp_url=chromium.ws_url)
    fire_on_page(
        chromium,
        supervisor,
        "setTimeout(() => document.querySelector('#inner').contentWindow.alert('PYTEST-IFRAME'), 50)",
    )
    dialogs = wait_for_dialog(supervisor)
    assert dialogs, "no iframe dialog detected"
    assert any("PYTEST-IFRAME" in d.message for d in dialogs)
    result = supervisor.respond_to_dialog("accept")
    assert result["ok"] is True


def test_prompt_dialog_with_response_text(chromium: Chromium, supervisor_registry: _SupervisorRegistry) -> None:
    supervisor = supervisor_registry.get_or_start(task_id="pytest-4", cdp_url=chromium.ws_url)
    fire_on_page(
        chromium,
        supervisor,
        "setTimeout(() => { window.__promptResult = prompt('give me a token', 'default-x'); }, 50)",
    )
    dialogs = wait_for_dialog(supervisor)
    assert dialogs
    d = dialogs[0]
    assert d.type == "prompt"
    assert d.default_prompt == "default-x"
    result = supervisor.respond_to_dialog("accept", prompt_text="PYTEST-PROMPT-REPLY")
    assert result["ok"] is True
    out = supervisor.evaluate_runtime("window.__promptResult")
    assert out == {"ok": True, "result": "PYTEST-PROMPT-REPLY", "result_type": "string"}


def test_respond_with_no_pending_dialog_errors_cleanly(
    chromium: Chromium, supervisor_registry: _SupervisorRegistry
) -> None:
    supervisor = supervisor_registry.get_or_start(task_id="pytest-5", cdp_url=chromium.ws_url)
    result = supervisor.respond_to_dialog("accept")
    assert result["ok"] is False
    assert "no dialog" in result["error"].lower()
    bad = supervisor.respond_to_dialog("eat")
    assert bad["ok"] is False and "accept" in bad["error"] and "dismiss" in bad["error"]


def test_auto_dismiss_policy(chromium: Chromium, supervisor_registry: _SupervisorRegistry) -> None:
    supervisor = supervisor_registry.get_or_start(
        task_id="pytest-6", cdp_url=chromium.ws_url, dialog_policy=DIALOG_POLICY_AUTO_DISMISS
    )
    fire_on_page(chromium, supervisor, "setTimeout(() => alert('PYTEST-AUTO-DISMISS'), 50)")
    deadline = time.monotonic() + 5
    while not supervisor.snapshot().recent_dialogs and time.monotonic() < deadline:
        time.sleep(0.02)
    snap = supervisor.snapshot()
    assert snap.pending_dialogs == ()
    assert snap.recent_dialogs and snap.recent_dialogs[0].closed_by == "auto_policy"


def test_registry_idempotent_get_or_start(chromium: Chromium, supervisor_registry: _SupervisorRegistry) -> None:
    a = supervisor_registry.get_or_start(task_id="pytest-idem", cdp_url=chromium.ws_url)
    b = supervisor_registry.get_or_start(task_id="pytest-idem", cdp_url=chromium.ws_url)
    assert a is b
    assert supervisor_registry.get("pytest-idem") is a


def test_concurrent_get_or_start_share_one_supervisor(
    chromium: Chromium, supervisor_registry: _SupervisorRegistry
) -> None:
    got: list[CDPSupervisor] = []
    threads = [
        threading.Thread(
            target=lambda: got.append(
                supervisor_registry.get_or_start(task_id="pytest-race", cdp_url=chromium.ws_url)
            )
        )
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert len(got) == 4
    assert all(s.page_target_id() == got[0].page_target_id() for s in got)
    assert supervisor_registry.get("pytest-race") in got


def test_registry_stop(chromium: Chromium, supervisor_registry: _SupervisorRegistry) -> None:
    supervisor = supervisor_registry.get_or_start(task_id="pytest-stop", cdp_url=chromium.ws_url)
    assert supervisor.snapshot().active is True
    supervisor_registry.stop("pytest-stop")
    assert supervisor.snapshot().active is False
    assert supervisor_registry.get("pytest-stop") is None


def test_browser_dialog_invalid_action(chromium: Chromium, supervisor_registry: _SupervisorRegistry) -> None:
    supervisor_registry.get_or_start(task_id="pytest-bad-action", cdp_url=chromium.ws_url)
    r = json.loads(browser_dialog(action="eat", task_id="pytest-bad-action"))
    assert r["success"] is False
    assert "accept" in r["error"] and "dismiss" in r["error"]


def test_recent_dialogs_ring_buffer(chromium: Chromium, supervisor_registry: _SupervisorRegistry) -> None:
    sv = supervisor_registry.get_or_start(
        task_id="pytest-recent", cdp_url=chromium.ws_url, dialog_policy=DIALOG_POLICY_AUTO_DISMISS
    )
    fire_on_page(chromium, sv, "setTimeout(() => alert('PYTEST-RECENT'), 50)")
    deadline = time.time() + 5
    while time.time() < deadline:
        recent = sv.snapshot().recent_dialogs
        if recent and any("PYTEST-RECENT" in r.message for r in recent):
            break
        time.sleep(0.05)
    recent = sv.snapshot().recent_dialogs
    assert recent, "recent_dialogs should contain the auto-dismissed dialog"
    match = next((r for r in recent if "PYTEST-RECENT" in r.message), None)
    assert match is not None
    assert match.type == "alert"
    assert match.closed_by == "auto_policy"
    assert match.closed_at >= match.opened_at
    assert sv.snapshot().to_dict()["recent_dialogs"][0]["closed_by"] == "auto_policy"


def test_browser_dialog_tool_end_to_end(chromium: Chromium, supervisor_registry: _SupervisorRegistry) -> None:
    supervisor = supervisor_registry.get_or_start(task_id="pytest-tool", cdp_url=chromium.ws_url)
    fire_on_page(chromium, supervisor, "setTimeout(() => alert('PYTEST-TOOL-END2END'), 50)")
    assert wait_for_dialog(supervisor), "no dialog detected"
    r = json.loads(browser_dialog(action="dismiss", task_id="pytest-tool"))
    assert r["success"] is True
    assert r["action"] == "dismiss"
    assert "PYTEST-TOOL-END2END" in r["dialog"]["message"]


def test_browser_cdp_frame_id_routes_via_supervisor(
    chromium: Chromium, pages: Pages, supervisor_registry: _SupervisorRegistry
) -> None:
    """Hermes injects a fake OOPIF into its private state; here a real cross-origin iframe."""
    inner = pages.add("hermes-inner", "<title>INNER-FRAME-XYZ</title>").replace("127.0.0.1", "localhost")
    outer = pages.add("hermes-outer", f'<iframe src="{inner}"></iframe>')
    sv = supervisor_registry.get_or_start(task_id="frame-id-test", cdp_url=chromium.ws_url)
    navigate_and_run(chromium.ws_url, outer, "void 0", target_id=sv.page_target_id())
    deadline = time.monotonic() + 10
    child = None
    while child is None and time.monotonic() < deadline:
        # Listed from its attach on; its URL once its document commits.
        child = next(
            (f for f in sv.snapshot().frame_tree["children"] if f["is_oopif"] and f["url"] == inner),
            None,
        )
        time.sleep(0.02)
    assert child is not None
    r = json.loads(
        browser_cdp(
            method="Runtime.evaluate",
            params={"expression": "document.title", "returnByValue": True},
            frame_id=child["frame_id"],
            task_id="frame-id-test",
        )
    )
    assert r.get("success") is True, r
    assert r.get("frame_id") == child["frame_id"]
    # No session id in the tool's result or the frame tree: get_frame_session names it.
    assert "session_id" not in r and "session_id" not in child
    found = sv.get_frame_session(child["frame_id"])
    assert found is not None
    info, session = found
    assert info.frame_id == child["frame_id"] and info.is_oopif
    native = sv._native
    assert native is not None
    assert session and session != native.snapshot().page_session_id, "the OOPIF's own session"
    assert "session_id" not in info.to_dict()
    assert r["result"]["result"]["value"] == "INNER-FRAME-XYZ"
    top = json.loads(browser_cdp(method="Target.getTargets", task_id="frame-id-test"))
    assert top["success"] is True and top["result"]["targetInfos"]


def test_browser_cdp_frame_id_not_in_frame_tree(
    chromium: Chromium, supervisor_registry: _SupervisorRegistry
) -> None:
    sv = supervisor_registry.get_or_start(task_id="bad-frame-test", cdp_url=chromium.ws_url)
    assert sv.snapshot().active
    r = json.loads(
        browser_cdp(
            method="Runtime.evaluate",
            params={"expression": "1"},
            frame_id="nonexistent-frame",
            task_id="bad-frame-test",
        )
    )
    assert r.get("success") is not True
    assert "not found" in (r.get("error") or "").lower()


def test_bridge_captures_prompt_and_returns_reply_text(
    chromium: Chromium, supervisor_registry: _SupervisorRegistry
) -> None:
    """The page's own load-time prompt() gets the agent's text back through the bridge."""
    sv = supervisor_registry.get_or_start(task_id="pytest-bridge-prompt", cdp_url=chromium.ws_url)
    url = data_url(
        "<!doctype html><html><body><script>window.__ret = null;"
        "setTimeout(() => { window.__ret = prompt('PROMPT-MSG', 'default'); }, 50);"
        "</script></body></html>"
    )
    cdp = Cdp(chromium.ws_url)
    try:
        _, session = cdp.page_session(sv.page_target_id())
        nav = cdp.send("Page.navigate", {"url": url}, session=session)
        deadline = time.monotonic() + 10
        dialog = None
        while time.monotonic() < deadline:
            snap = sv.snapshot()
            if snap.pending_dialogs:
                dialog = snap.pending_dialogs[0]
                break
            time.sleep(0.02)
        assert dialog is not None, "no dialog captured"
        assert dialog.bridge_request_id is not None, "expected bridge path"
        assert dialog.type == "prompt"
        resp = sv.respond_to_dialog("accept", prompt_text="AGENT-SUPPLIED-REPLY")
        assert resp["ok"] is True
        cdp.reply(nav)
        deadline = time.monotonic() + 5
        value = None
        while time.monotonic() < deadline:
            r = cdp.call(
                "Runtime.evaluate", {"expression": "window.__ret", "returnByValue": True}, session=session
            )
            value = r.get("result", {}).get("result", {}).get("value")
            if value is not None:
                break
            time.sleep(0.05)
    finally:
        cdp.close()
    assert value == "AGENT-SUPPLIED-REPLY"


@pytest.mark.parametrize(
    "expression, expected",
    [
        ("1 + 41", {"ok": True, "result": 42, "result_type": "number"}),
        ('({foo: "bar", n: 7})', {"ok": True, "result": {"foo": "bar", "n": 7}, "result_type": "object"}),
        ("document.querySelector('h1')", {"ok": True, "result": {}, "result_type": "object"}),
        ("Infinity", {"ok": True, "result": "Infinity", "result_type": "number"}),
        ("void 0", {"ok": True, "result": None, "result_type": "undefined"}),
    ],
)
def test_evaluate_runtime(
    chromium: Chromium, supervisor_registry: _SupervisorRegistry, expression: str, expected: Any
) -> None:
    supervisor = supervisor_registry.get_or_start(task_id="pytest-eval", cdp_url=chromium.ws_url)
    fire_on_page(chromium, supervisor, "void 0")
    assert supervisor.evaluate_runtime(expression) == expected


def test_evaluate_runtime_js_exception(chromium: Chromium, supervisor_registry: _SupervisorRegistry) -> None:
    supervisor = supervisor_registry.get_or_start(task_id="pytest-eval-3", cdp_url=chromium.ws_url)
    fire_on_page(chromium, supervisor, "void 0")
    out = supervisor.evaluate_runtime("nonExistentVar.nope")
    assert out["ok"] is False
    assert "ReferenceError" in out["error"] or "not defined" in out["error"]

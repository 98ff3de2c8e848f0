"""The Python API on the fake browser: identity, frozen cached snapshots, dialogs, calls,
exceptions, configuration."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

import cdp_supervisor
from cdp_supervisor import (
    BlockedByDialog,
    CdpError,
    CdpSupervisorError,
    Config,
    ConfigError,
    ConnectError,
    InvalidArgument,
    InvalidConfig,
    NoDialog,
    NotActive,
    SecurityPolicy,
    Snapshot,
    SupervisorRegistry,
    Timeout,
    UnknownDialog,
    UnknownFrame,
)
from cdp_supervisor.testing import FakeBrowser

REPO = Path(__file__).resolve().parents[3]


def test_get_or_start_returns_the_same_object_for_the_same_task_and_url(
    fake: FakeBrowser, registry: SupervisorRegistry
) -> None:
    a = registry.get_or_start("t", fake.ws_url)
    b = registry.get_or_start("t", fake.ws_url)
    assert a is b
    assert registry.get("t") is a
    assert registry.tasks() == ["t"]
    assert a.state == "active" and a.is_alive and a.is_active
    assert a.task_id == "t"
    assert a.page_target_id == fake.page_target_id


def test_another_url_rebinds_to_a_new_supervisor(registry: SupervisorRegistry) -> None:
    with FakeBrowser() as one, FakeBrowser() as two:
        a = registry.get_or_start("t", one.ws_url)
        b = registry.get_or_start("t", two.ws_url)
        assert a is not b
        assert a.state == "stopped" and not a.is_alive
        assert registry.get("t") is b


def test_snapshot_is_the_same_object_until_something_is_published(
    fake: FakeBrowser, registry: SupervisorRegistry
) -> None:
    sup = registry.get_or_start("t", fake.ws_url)
    first = sup.snapshot()
    assert sup.snapshot() is first
    assert registry.snapshot("t") is first
    assert first.pending_dialogs is sup.snapshot().pending_dialogs
    fake.open_dialog("alert", "hello")
    assert sup.wait_for_dialog(5.0) is not None
    second = sup.snapshot()
    assert second is not first and second.version > first.version
    assert [d.message for d in second.pending_dialogs] == ["hello"]
    # Collections the reader did not change are shared with the previous snapshot.
    assert second.frame_tree is first.frame_tree
    assert second.pages is first.pages


def test_an_unchanged_snapshot_read_allocates_nothing(
    fake: FakeBrowser, registry: SupervisorRegistry
) -> None:
    import tracemalloc

    sup = registry.get_or_start("t", fake.ws_url)
    fake.open_dialog("alert", "x")
    assert sup.wait_for_dialog(5.0) is not None
    first = sup.snapshot()

    def reads() -> None:
        for _ in range(10_000):
            sup.snapshot().pending_dialogs
            registry.snapshot("t")

    reads()  # warm: per-thread state of the lock-free loads
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        reads()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    grown = [s for s in after.compare_to(before, "filename") if s.size_diff > 0]
    assert sum(s.size_diff for s in grown) < 1024, grown[:5]
    assert sup.snapshot() is first


def test_snapshot_and_its_parts_are_frozen(fake: FakeBrowser, registry: SupervisorRegistry) -> None:
    sup = registry.get_or_start("t", fake.ws_url)
    fake.open_dialog("confirm", "sure?")
    d = sup.wait_for_dialog(5.0)
    assert d is not None
    snap = sup.snapshot()
    with pytest.raises(AttributeError):
        snap.active = False  # type: ignore[misc]
    with pytest.raises(AttributeError):
        d.message = "changed"  # type: ignore[misc]
    with pytest.raises(TypeError):
        snap.pending_dialogs[0] = d  # type: ignore[index]
    assert isinstance(snap, Snapshot)
    assert snap.task_id == "t" and snap.state == "active" and snap.active
    assert snap.page_target_id == fake.page_target_id
    assert snap.frame_tree.top is not None and snap.frame_tree.top.frame_id == fake.page_target_id
    assert snap.frame_tree.children == () and snap.frame_tree.truncated is False
    assert [p.target_id for p in snap.pages] == [fake.page_target_id]
    assert snap.blocked is None and snap.console_errors == () and not snap.crashed
    as_dict = snap.to_dict()
    assert as_dict["pending_dialogs"][0]["message"] == "sure?"
    assert as_dict["state"] == "active"
    assert snap.find_frame(fake.page_target_id) is not None
    assert snap.find_frame("nope") is None


def test_a_dialog_is_caught_and_answered(fake: FakeBrowser, registry: SupervisorRegistry) -> None:
    sup = registry.get_or_start("t", fake.ws_url)
    fake.open_dialog("prompt", "Name?", "Bob")
    d = sup.wait_for_dialog(5.0)
    assert d is not None
    assert (d.id, d.type, d.message, d.default_prompt) == ("d-1", "prompt", "Name?", "Bob")
    assert d.frame_id == fake.page_target_id and d.target_id == fake.page_target_id
    assert d.session_id and d.bridge_request_id is None
    assert d.opened_at == pytest.approx(time.time(), abs=60)
    answered = sup.respond_to_dialog("accept", prompt_text="Ada", dialog_id=d.id)
    assert answered.id == d.id
    assert not fake.dialog_open()
    sent = [c for c in fake.received() if c.get("method") == "Page.handleJavaScriptDialog"]
    assert sent[-1]["params"] == {"accept": True, "promptText": "Ada"}
    snap = sup.snapshot()
    assert snap.pending_dialogs == ()
    (closed,) = snap.recent_dialogs
    assert (closed.id, closed.closed_by, closed.type) == ("d-1", "agent", "prompt")
    assert closed.closed_at >= closed.opened_at


def test_wait_for_dialog_returns_none_at_its_deadline(
    fake: FakeBrowser, registry: SupervisorRegistry
) -> None:
    sup = registry.get_or_start("t", fake.ws_url)
    started = time.monotonic()
    assert sup.wait_for_dialog(0.2) is None
    assert 0.15 < time.monotonic() - started < 2.0
    assert sup.wait_for_dialog(0) is None


def test_wait_for_dialog_returns_none_once_the_supervisor_has_stopped(
    fake: FakeBrowser, registry: SupervisorRegistry
) -> None:
    sup = registry.get_or_start("t", fake.ws_url)
    threading.Timer(0.2, sup.stop).start()
    started = time.monotonic()
    assert sup.wait_for_dialog(10.0) is None
    assert time.monotonic() - started < 3.0


def test_dialog_errors_are_exception_classes(fake: FakeBrowser, registry: SupervisorRegistry) -> None:
    sup = registry.get_or_start("t", fake.ws_url)
    with pytest.raises(NoDialog):
        sup.respond_to_dialog("accept")
    with pytest.raises(InvalidArgument):
        sup.respond_to_dialog("eat")
    fake.open_dialog("alert", "one")
    assert sup.wait_for_dialog(5.0) is not None
    with pytest.raises(UnknownDialog) as unknown:
        sup.respond_to_dialog("dismiss", dialog_id="d-9")
    assert unknown.value.dialog_id == "d-9"
    assert isinstance(unknown.value, CdpSupervisorError)


def test_a_call_blocked_by_a_dialog_raises_with_the_dialog(
    fake: FakeBrowser, registry: SupervisorRegistry
) -> None:
    sup = registry.get_or_start("t", fake.ws_url)
    fake.open_dialog("confirm", "Leave?")
    assert sup.wait_for_dialog(5.0) is not None
    started = time.monotonic()
    with pytest.raises(BlockedByDialog) as blocked:
        sup.call("Runtime.evaluate", {"expression": "1"})
    assert time.monotonic() - started < 2.0, "fails at once, not at its deadline"
    assert blocked.value.method == "Runtime.evaluate"
    assert blocked.value.dialog.message == "Leave?"
    assert blocked.value.dialog.type == "confirm"


def test_call_returns_the_result_and_routes_by_domain(
    fake: FakeBrowser, registry: SupervisorRegistry
) -> None:
    sup = registry.get_or_start("t", fake.ws_url)
    version = sup.call("Browser.getVersion")
    assert version["product"] == "FakeChrome/1.0"
    fake.set_reply("Runtime.evaluate", {"result": {"type": "number", "value": 42}})
    out = sup.call("Runtime.evaluate", {"expression": "6*7", "returnByValue": True}, timeout_s=5)
    assert out == {"result": {"type": "number", "value": 42}}
    sent = [c for c in fake.received() if c.get("method") == "Runtime.evaluate"][-1]
    assert sent["params"] == {"expression": "6*7", "returnByValue": True}
    assert "sessionId" in sent, "page methods go to the page session"
    on_target = sup.call("Runtime.evaluate", {"expression": "1"}, target_id=fake.page_target_id)
    assert on_target["result"]["value"] == 42


def test_cdp_errors_carry_their_code(fake: FakeBrowser, registry: SupervisorRegistry) -> None:
    sup = registry.get_or_start("t", fake.ws_url)
    fake.set_error("DOM.getDocument", -32000, "no document")
    with pytest.raises(CdpError) as e:
        sup.call("DOM.getDocument")
    assert (e.value.code, e.value.method, e.value.cdp_message) == (-32000, "DOM.getDocument", "no document")


def test_a_call_without_a_reply_times_out(fake: FakeBrowser, registry: SupervisorRegistry) -> None:
    sup = registry.get_or_start("t", fake.ws_url)
    fake.ignore("Page.reload")
    started = time.monotonic()
    with pytest.raises(Timeout) as e:
        sup.call("Page.reload", timeout_s=0.3)
    assert isinstance(e.value, TimeoutError)
    assert e.value.method == "Page.reload" and e.value.after_s == pytest.approx(0.3)
    assert time.monotonic() - started < 3.0


def test_bad_arguments_are_invalid_argument(fake: FakeBrowser, registry: SupervisorRegistry) -> None:
    sup = registry.get_or_start("t", fake.ws_url)
    with pytest.raises(InvalidArgument):
        sup.call("Runtime.evaluate", [1, 2])  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        sup.call("Runtime.evaluate", {}, frame_id="a", target_id="b")
    with pytest.raises(InvalidArgument):
        sup.call("Runtime.evaluate", {}, timeout_s=float("nan"))
    with pytest.raises(TypeError):
        sup.call("Runtime.evaluate", {"x": object()})
    with pytest.raises(UnknownFrame) as frame:
        sup.call("Runtime.evaluate", {}, frame_id="nope")
    assert frame.value.frame_id == "nope"
    with pytest.raises(ValueError):
        sup.call("", {})


def test_the_security_policy_refuses_with_its_option(fake: FakeBrowser) -> None:
    with SupervisorRegistry(Config(cdp_deny=["Browser.close"])) as reg:
        sup = reg.get_or_start("t", fake.ws_url)
        with pytest.raises(SecurityPolicy) as e:
            sup.call("Browser.close")
        assert e.value.option == "security.cdp_deny"
        with pytest.raises(SecurityPolicy) as f:
            sup.call("Page.navigate", {"url": "file:///etc/passwd"})
        assert f.value.option == "security.allow_file_urls"


def test_tasks_reach_only_their_own_pages_unless_isolate_tasks_is_false(fake: FakeBrowser) -> None:
    assert Config().isolate_tasks is True
    assert Config(isolate_tasks=False).isolate_tasks is False
    with SupervisorRegistry(Config()) as reg:
        a = reg.get_or_start("a", fake.ws_url)
        page = a.snapshot().page_target_id
        assert page == fake.page_target_id
        with pytest.raises(SecurityPolicy) as e:
            reg.get_or_start("b", fake.ws_url, target_id=page)
        assert e.value.option == "security.isolate_tasks"
        b = reg.get_or_start("b", fake.ws_url)
        own = b.snapshot().page_target_id
        assert own is not None and own != page
        listed = [t["targetId"] for t in b.call("Target.getTargets")["targetInfos"]]
        assert listed == [own]
        with pytest.raises(SecurityPolicy) as f:
            b.call("Target.closeTarget", {"targetId": page})
        assert f.value.option == "security.isolate_tasks"
    with SupervisorRegistry(Config(isolate_tasks=False)) as reg:
        a = reg.get_or_start("a", fake.ws_url)
        b = reg.get_or_start("b", fake.ws_url, target_id=a.snapshot().page_target_id)
        assert b.snapshot().page_target_id == a.snapshot().page_target_id


def test_a_stopped_supervisor_is_not_active(fake: FakeBrowser, registry: SupervisorRegistry) -> None:
    sup = registry.get_or_start("t", fake.ws_url)
    assert registry.stop("t") is True
    assert registry.stop("t") is False
    assert sup.state == "stopped" and not sup.is_alive
    assert sup.snapshot().active is False
    with pytest.raises(NotActive):
        sup.call("Browser.getVersion")
    assert registry.get("t") is None and registry.snapshot("t") is None


def test_stop_dismisses_pending_dialogs(fake: FakeBrowser, registry: SupervisorRegistry) -> None:
    sup = registry.get_or_start("t", fake.ws_url)
    fake.open_dialog("alert", "left open")
    assert sup.wait_for_dialog(5.0) is not None
    registry.stop_all()
    assert not fake.dialog_open()
    assert registry.tasks() == []


def test_a_connect_failure_is_connect_error(registry: SupervisorRegistry) -> None:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(ConnectError) as e:
        registry.get_or_start("t", f"ws://user:secret@127.0.0.1:{port}/devtools/browser/x")
    assert isinstance(e.value, ConnectionError)
    assert "secret" not in str(e.value) and "secret" not in e.value.url
    assert registry.tasks() == []


def test_start_timeout_s_bounds_the_start(fake: FakeBrowser, registry: SupervisorRegistry) -> None:
    fake.ignore("Target.getTargets")
    started = time.monotonic()
    with pytest.raises(cdp_supervisor.StartTimeout) as e:
        registry.get_or_start("t", fake.ws_url, start_timeout_s=0.3)
    assert e.value.after_s == pytest.approx(0.3)
    assert time.monotonic() - started < 3.0
    with pytest.raises(ConfigError):
        registry.get_or_start("t", fake.ws_url, start_timeout_s=0)


def test_per_task_options(fake: FakeBrowser, registry: SupervisorRegistry) -> None:
    sup = registry.get_or_start("t", fake.ws_url, dialog_policy="auto_accept")
    fake.open_dialog("prompt", "Name?", "Bob")
    deadline = time.monotonic() + 5
    while not sup.snapshot().recent_dialogs and time.monotonic() < deadline:
        time.sleep(0.01)
    (closed,) = sup.snapshot().recent_dialogs
    assert closed.closed_by == "auto_policy"
    with pytest.raises(ConfigError) as e:
        registry.get_or_start("u", fake.ws_url, dialog_policy="sometimes")
    assert e.value.key == "browser.dialog_policy"
    with pytest.raises(ConfigError):
        registry.get_or_start("u", fake.ws_url, dialog_timeout_s=-1)


def test_config_keywords_are_validated_like_the_toml_file() -> None:
    cases: List[Tuple[Dict[str, Any], str]] = [
        ({"dialog_policy": "sometimes"}, '[browser]\ndialog_policy = "sometimes"'),
        ({"dialog_timeout_s": 0}, "[browser]\ndialog_timeout_s = 0"),
        ({"dialog_bridge": "maybe"}, '[browser]\ndialog_bridge = "maybe"'),
        ({"recent_dialogs_max": -3}, "[limits]\nrecent_dialogs_max = -3"),
        ({"cdp_deny": ["not a pattern"]}, '[security]\ncdp_deny = ["not a pattern"]'),
        ({"cdp_url": "ftp://x"}, '[browser]\ncdp_url = "ftp://x"'),
    ]
    for kwargs, toml in cases:
        with pytest.raises(ConfigError) as from_kwargs:
            Config(**kwargs)
        with pytest.raises(ConfigError) as from_toml:
            Config.from_toml(toml)
        assert str(from_kwargs.value) == str(from_toml.value)
        assert from_kwargs.value.key == from_toml.value.key
    with pytest.raises(InvalidArgument, match="unknown configuration keyword"):
        Config(dialogpolicy="must_respond")  # type: ignore[call-arg]


def test_config_keywords_apply() -> None:
    c = Config(
        dialog_policy="auto_dismiss",
        dialog_timeout_s=0.25,
        dialog_bridge="on",
        call_timeout_s=7,
        follow_popups=False,
        cdp_deny=("Browser.*",),
        cdp_allow=["Runtime.*", "Page.*"],
        allow_file_urls=True,
    )
    assert (c.dialog_policy, c.dialog_timeout_s, c.dialog_bridge) == ("auto_dismiss", 0.25, "on")
    assert (c.call_timeout_s, c.follow_popups, c.allow_file_urls) == (7.0, False, True)
    assert (c.cdp_deny, c.cdp_allow) == (["Browser.*"], ["Runtime.*", "Page.*"])
    assert Config() == Config.from_toml("")
    assert Config(dialog_policy=None) == Config()
    assert Config(cdp_url="ws://u:p@h:1/x?token=s").cdp_url == "ws://***:***@h:1/x?token=***"
    # Invisible by default (README "Invisible supervision"); console capture is an opt-in.
    assert (Config().capture_console, Config().chrome_args) == (False, [])
    c = Config(capture_console=True, chrome_args=("--window-size=1280,800", "--lang=de"))
    assert (c.capture_console, c.chrome_args) == (True, ["--window-size=1280,800", "--lang=de"])
    with pytest.raises(ConfigError, match="chrome_args"):
        Config(chrome_args=["--user-data-dir=/tmp/x"])


def test_every_setting_of_the_default_toml_is_a_keyword() -> None:
    tomllib: Any = pytest.importorskip("tomllib")
    defaults = tomllib.loads((REPO / "config" / "default.toml").read_text())
    # [mcp] configures the MCP server over HTTP (the binary's), which the binding does not have.
    defaults.pop("mcp")
    keys: List[str] = [k for section in defaults.values() for k in section]
    assert sorted(keys) == sorted(cdp_supervisor._native.CONFIG_KEYWORDS)
    flat = {k: v for section in defaults.values() for k, v in section.items()}
    assert Config(**flat) == Config()


def test_config_load_reads_a_file(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('[browser]\ndialog_policy = "auto_accept"\n')
    assert Config.load(f).dialog_policy == "auto_accept"
    assert Config.load(str(f)).dialog_policy == "auto_accept"
    with pytest.raises(InvalidConfig, match="does not exist"):
        Config.load(tmp_path / "missing.toml")
    with pytest.raises(InvalidConfig, match="cannot read configuration"):
        Config.from_toml("[browser\ndialog_policy = ")


def test_registry_uses_its_config(fake: FakeBrowser) -> None:
    with SupervisorRegistry(Config(dialog_policy="auto_dismiss")) as reg:
        assert reg.config.dialog_policy == "auto_dismiss"
        sup = reg.get_or_start("t", fake.ws_url)
        fake.open_dialog("alert", "x")
        deadline = time.monotonic() + 5
        while not sup.snapshot().recent_dialogs and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sup.snapshot().recent_dialogs[0].closed_by == "auto_policy"
        assert not fake.dialog_open()


def test_the_fake_browser_has_the_rust_names(fake: FakeBrowser) -> None:
    assert fake.ws_url.startswith("ws://127.0.0.1:")
    assert fake.http_url.startswith("http://127.0.0.1:")
    assert fake.page_target_id == "PAGE-1"
    assert not fake.dialog_open()
    with SupervisorRegistry() as reg:
        sup = reg.get_or_start("t", fake.http_url)
        fake.open_dialog("beforeunload", "", "")
        assert fake.dialog_open()
        d = sup.wait_for_dialog(5.0)
        assert d is not None and d.type == "beforeunload"
        fake.close_dialog_remotely()
        assert not fake.dialog_open()
        deadline = time.monotonic() + 5
        while not sup.snapshot().recent_dialogs and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sup.snapshot().recent_dialogs[0].closed_by == "remote"
    fake.close()
    fake.close()
    with pytest.raises(InvalidArgument):
        fake.open_dialog("alert", "closed")


def test_blocking_calls_release_the_gil(fake: FakeBrowser, registry: SupervisorRegistry) -> None:
    sup = registry.get_or_start("t", fake.ws_url)
    fake.ignore("Page.reload")
    counts: List[int] = []

    def count_while(blocking: Any) -> int:
        stop = threading.Event()
        n = [0]

        def spin() -> None:
            while not stop.is_set():
                n[0] += 1

        t = threading.Thread(target=spin)
        t.start()
        try:
            blocking()
        except CdpSupervisorError:
            pass
        stop.set()
        t.join()
        return n[0]

    counts.append(count_while(lambda: sup.wait_for_dialog(0.3)))
    counts.append(count_while(lambda: sup.call("Page.reload", timeout_s=0.3)))
    fake.ignore("Target.getTargets")
    counts.append(
        count_while(lambda: registry.get_or_start("u", fake.ws_url, start_timeout_s=0.3))
    )
    # A thread that never got the GIL would count 0; with it released it spins freely.
    assert all(c > 10_000 for c in counts), counts


def test_tools_return_the_mcp_json(fake: FakeBrowser, registry: SupervisorRegistry) -> None:
    import json

    from cdp_supervisor import tools

    assert json.loads(tools.browser_snapshot(registry, task_id="t")) == {
        "success": False,
        "error": 'no browser supervisor for task "t": call browser_connect first',
    }
    registry.get_or_start("t", fake.ws_url)
    snap = json.loads(tools.browser_snapshot(registry, task_id="t"))
    assert snap["success"] is True and snap["state"] == "active"
    fake.open_dialog("prompt", "Name?", "x")
    assert registry.get("t") is not None
    sup = registry.get("t")
    assert sup is not None and sup.wait_for_dialog(5.0) is not None
    blocked = json.loads(
        tools.browser_cdp(registry, method="Runtime.evaluate", params={"expression": "1"}, task_id="t")
    )
    assert blocked["success"] is False and blocked["blocked_by_dialog"]["message"] == "Name?"
    assert blocked["pending_dialogs"][0]["id"] == "d-1"
    answered = json.loads(tools.browser_dialog(registry, "accept", prompt_text="y", task_id="t"))
    assert answered["success"] is True and answered["dialog"]["id"] == "d-1"
    odd = json.loads(tools.browser_cdp(registry, method="Browser.getVersion", targetId="x", task_id="t"))
    assert odd["success"] is False and '"targetId"' in odd["error"]
    assert json.loads(tools.call(registry, "browser_cdp", {"method": "Browser.getVersion", "task_id": "t"}))[
        "routed_to"
    ] == "browser"
    bad_task = json.loads(tools.browser_snapshot(registry, task_id=""))
    assert bad_task["success"] is False

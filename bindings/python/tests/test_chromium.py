"""The Python API on real headless Chromium (required under ``CDP_SUPERVISOR_E2E=require``):
dialogs caught and answered, routing into a cross-origin iframe, dialog-aware calls, a browser
launched when no URL is given, the JSON tools."""

from __future__ import annotations

import json
import time
from typing import Optional

import pytest

from cdp_supervisor import BlockedByDialog, CdpError, Supervisor, SupervisorRegistry, tools
from conftest import Chromium, Pages, navigate_and_run, need_chromium


def evaluate(sup: Supervisor, expression: str, frame_id: Optional[str] = None) -> object:
    out = sup.call(
        "Runtime.evaluate", {"expression": expression, "returnByValue": True}, frame_id=frame_id
    )
    assert isinstance(out, dict)
    return out["result"].get("value")


def test_a_prompt_is_caught_and_answered(
    chromium: Chromium, pages: Pages, registry: SupervisorRegistry
) -> None:
    sup = registry.get_or_start("prompt", chromium.ws_url)
    url = pages.add("prompt", "<title>prompt</title><p>a page</p>")
    navigate_and_run(
        chromium.ws_url,
        url,
        "setTimeout(() => { window.__r = prompt('Name?', 'Bob'); }, 50)",
        target_id=sup.page_target_id,
    )
    d = sup.wait_for_dialog(10.0)
    assert d is not None, "the prompt is caught"
    assert (d.type, d.message, d.default_prompt) == ("prompt", "Name?", "Bob")
    assert d.origin == f"http://127.0.0.1:{pages.port}"
    assert sup.snapshot().pending_dialogs[0].id == d.id
    sup.respond_to_dialog("accept", prompt_text="Ada Lovelace", dialog_id=d.id)
    assert evaluate(sup, "window.__r") == "Ada Lovelace"
    (closed,) = sup.snapshot().recent_dialogs
    assert closed.closed_by == "agent" and closed.user_input in (None, "Ada Lovelace")


def test_a_call_that_opens_a_dialog_fails_at_once_with_it(
    chromium: Chromium, pages: Pages, registry: SupervisorRegistry
) -> None:
    sup = registry.get_or_start("blocked", chromium.ws_url)
    navigate_and_run(
        chromium.ws_url, pages.add("blank", "<p>x</p>"), "void 0", target_id=sup.page_target_id
    )
    started = time.monotonic()
    with pytest.raises(BlockedByDialog) as e:
        sup.call("Runtime.evaluate", {"expression": "confirm('sure?')"}, timeout_s=30)
    assert time.monotonic() - started < 5.0
    assert e.value.dialog.type == "confirm" and e.value.dialog.message == "sure?"
    sup.respond_to_dialog("dismiss", dialog_id=e.value.dialog.id)
    assert evaluate(sup, "1 + 1") == 2


def test_a_call_reaches_a_cross_origin_iframe(
    chromium: Chromium, pages: Pages, registry: SupervisorRegistry
) -> None:
    inner = pages.add("inner", "<title>INNER-FRAME</title><p>inner</p>")
    inner_other_site = inner.replace("127.0.0.1", "localhost")
    outer = pages.add("outer", f'<title>outer</title><iframe src="{inner_other_site}"></iframe>')
    sup = registry.get_or_start("oopif", chromium.ws_url)
    navigate_and_run(chromium.ws_url, outer, "void 0", target_id=sup.page_target_id)
    # The OOPIF is listed from its attach on, with origin "null" until its document commits:
    # wait for the committed one.
    origin = f"http://localhost:{pages.port}"
    deadline = time.monotonic() + 10
    oopif = None
    while oopif is None and time.monotonic() < deadline:
        oopif = next(
            (f for f in sup.snapshot().frame_tree.children if f.is_oopif and f.origin == origin),
            None,
        )
        time.sleep(0.02)
    assert oopif is not None, sup.snapshot().to_dict()
    assert oopif.session_id
    assert evaluate(sup, "document.title", frame_id=oopif.frame_id) == "INNER-FRAME"
    assert evaluate(sup, "document.title") == "outer"
    with pytest.raises(CdpError) as e:
        sup.call("Nope.nothing")
    assert e.value.code == -32601


def test_without_a_url_the_registry_launches_chromium() -> None:
    need_chromium()
    with SupervisorRegistry() as reg:
        sup = reg.get_or_start("launched")
        assert sup.is_active
        version = sup.call("Browser.getVersion")
        assert "Chrome" in version["product"] or "Chromium" in version["product"]
        other = reg.get_or_start("launched-2")
        assert other.page_target_id != sup.page_target_id, "each task gets a page of its own"


def test_the_tools_answer_in_json(
    chromium: Chromium, pages: Pages, registry: SupervisorRegistry
) -> None:
    sup = registry.get_or_start("tools", chromium.ws_url)
    navigate_and_run(
        chromium.ws_url,
        pages.add("titled", "<title>T1</title>"),
        "void 0",
        target_id=sup.page_target_id,
    )
    out = json.loads(
        tools.browser_cdp(
            registry,
            method="Runtime.evaluate",
            params={"expression": "document.title", "returnByValue": True},
            task_id="tools",
        )
    )
    assert out["success"] is True and out["routed_to"] == "page"
    assert out["result"]["result"]["value"] == "T1"
    snap = json.loads(tools.browser_snapshot(registry, task_id="tools"))
    assert snap["frame_tree"]["top"]["url"].endswith("/titled")


def test_cdp_endpoint_carries_a_raw_client_to_the_tasks_page(
    chromium: Chromium, pages: Pages, registry: SupervisorRegistry
) -> None:
    import urllib.request

    from cdp_supervisor import CdpEndpoint, NotActive
    from conftest import Cdp

    sup = registry.get_or_start("endpoint", chromium.ws_url)
    url = pages.add("endpoint", "<title>through the endpoint</title><p>x</p>")
    navigate_and_run(chromium.ws_url, url, "void 0", target_id=sup.page_target_id)
    ep = sup.cdp_endpoint()
    assert isinstance(ep, CdpEndpoint) and ep == sup.cdp_endpoint()
    token = ep.http_url.rsplit("/", 1)[1]
    assert len(token) >= 32 and ep.ws_url.startswith("ws://127.0.0.1:")
    assert f"/{token}/devtools/browser/" in ep.ws_url
    assert token not in repr(ep) and "***" in repr(ep)
    with pytest.raises(AttributeError):
        ep.ws_url = "ws://elsewhere"  # type: ignore[misc]
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(ep.http_url + "/json/version", timeout=10) as r:
        version = json.loads(r.read())
    assert version["webSocketDebuggerUrl"] == ep.ws_url
    cdp = Cdp(ep.ws_url)
    try:
        infos = cdp.call("Target.getTargets")["result"]["targetInfos"]
        assert [t["targetId"] for t in infos if t["type"] == "page"] == [sup.page_target_id]
        _, session = cdp.page_session(sup.page_target_id)
        title = cdp.call(
            "Runtime.evaluate", {"expression": "document.title", "returnByValue": True}, session
        )
        assert title["result"]["result"]["value"] == "through the endpoint"
    finally:
        cdp.close()
    registry.stop("endpoint")
    with pytest.raises(NotActive):
        sup.cdp_endpoint()

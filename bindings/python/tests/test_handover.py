"""Taking a task over (SPEC §20) from Python, on real headless Chromium: while held, a
``must_respond`` dialog outlives its 2 s watchdog, the agent's calls raise ``HeldByHuman``,
and the person's answer is recorded as ``closed_by == "human"``; taking back restores the
watchdog. And a thumbnail of the page, refused at once while a dialog is open."""

from __future__ import annotations

import time

import pytest

from cdp_supervisor import CannotCapture, HeldByHuman, Supervisor, SupervisorRegistry, tools
from conftest import Chromium, Pages, navigate_and_run


def evaluate(sup: Supervisor, expression: str) -> object:
    out = sup.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
    assert isinstance(out, dict)
    return out["result"].get("value")


def test_a_held_task_keeps_its_dialog_for_the_person(
    chromium: Chromium, pages: Pages, registry: SupervisorRegistry
) -> None:
    sup = registry.get_or_start("held", chromium.ws_url, dialog_timeout_s=2.0)
    assert sup.snapshot().handover is None
    held = sup.hand_over()
    assert held["held"] is True and held["holds"] == 1 and sup.is_held
    assert sup.hand_over() == held, "idempotent"
    navigate_and_run(
        chromium.ws_url,
        pages.add("held", "<title>held</title><p>a page</p>"),
        "setTimeout(() => { window.__r = prompt('Name?', 'Bob'); }, 50)",
        target_id=sup.page_target_id,
    )
    d = sup.wait_for_dialog(10.0)
    assert d is not None
    with pytest.raises(HeldByHuman) as e:
        sup.call("Runtime.evaluate", {"expression": "1"})
    assert e.value.task_id == "held" and e.value.since == held["held_since"]
    with pytest.raises(HeldByHuman):
        sup.respond_to_dialog("accept")
    assert '"success":false' in tools.browser_cdp(registry, method="Page.reload", task_id="held")
    # Past the watchdog's 2 s the prompt still waits (a deadline, not a sleep: it must not close).
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        assert sup.snapshot().pending_dialogs, "the dialog was closed while held"
        time.sleep(0.05)
    sup.respond_as_human("accept", prompt_text="Ada", dialog_id=d.id)
    (closed,) = sup.snapshot().recent_dialogs
    assert closed.closed_by == "human"
    assert sup.snapshot().to_dict()["recent_dialogs"][0]["closed_by"] == "human"

    back = sup.take_back()
    assert back["held"] is False and back["ended_holds_s"] >= 3.0 and not sup.is_held
    assert evaluate(sup, "window.__r") == "Ada", "the page's prompt() got the person's answer"
    handover = sup.snapshot().handover
    assert handover is not None and handover["holds"] == 1
    # The watchdog is back: an unanswered confirm is dismissed after about 2 s.
    sup.call("Runtime.evaluate", {"expression": "setTimeout(() => { window.__c = confirm('x'); }, 0)"})
    c = sup.wait_for_dialog(10.0)
    assert c is not None
    deadline = time.monotonic() + 10.0
    while sup.snapshot().pending_dialogs and time.monotonic() < deadline:
        time.sleep(0.05)
    last = sup.snapshot().recent_dialogs[-1]
    assert (last.id, last.closed_by) == (c.id, "watchdog")
    assert last.closed_at - last.opened_at >= 1.9


def test_a_thumbnail_is_a_small_jpeg_and_refused_during_a_dialog(
    chromium: Chromium, pages: Pages, registry: SupervisorRegistry
) -> None:
    sup = registry.get_or_start("thumb", chromium.ws_url)
    navigate_and_run(
        chromium.ws_url,
        pages.add("thumb", "<title>thumb</title><body style='background:#c33'><h1>hi</h1>"),
        "void 0",
        target_id=sup.page_target_id,
    )
    shot = None
    deadline = time.monotonic() + 15.0
    while shot is None and time.monotonic() < deadline:
        try:
            shot = sup.thumbnail()
        except CannotCapture:
            time.sleep(0.2)
    assert shot is not None, "a thumbnail of the idle page"
    assert shot["jpeg"][:2] == b"\xff\xd8" and 0 < shot["width"] <= 320
    assert shot["target_id"] == sup.page_target_id
    assert sup.thumbnail()["taken_at"] == shot["taken_at"], "within a second: the same picture"
    sup.call("Runtime.evaluate", {"expression": "setTimeout(() => alert('cheese'), 0)"})
    d = sup.wait_for_dialog(10.0)
    assert d is not None
    # Within a second of the last capture the same picture comes back; then a fresh try, which
    # is refused at once.
    refused = None
    deadline = time.monotonic() + 5.0
    while refused is None and time.monotonic() < deadline:
        started = time.monotonic()
        try:
            assert sup.thumbnail()["taken_at"] == shot["taken_at"]
        except CannotCapture as e:
            refused = (e, time.monotonic() - started)
        else:
            time.sleep(0.05)
    assert refused is not None, "the thumbnail is refused while the alert is open"
    assert refused[1] < 0.5, refused
    assert "a dialog is open" in str(refused[0])
    sup.respond_to_dialog("accept", dialog_id=d.id)

"""Ctrl-C ends a blocking wait on the main thread within 100 ms (SPEC §17): a real SIGINT sent
to this process, and ``_thread.interrupt_main()``, while the main thread is blocked in each kind
of call. (pytest runs tests on the main thread, the one Python delivers signals to.)"""

from __future__ import annotations

import _thread
import os
import signal
import threading
import time
from typing import Callable, List

import pytest

from cdp_supervisor import SupervisorRegistry
from cdp_supervisor.testing import FakeBrowser

LIMIT_S = 0.100


def sigint() -> None:
    os.kill(os.getpid(), signal.SIGINT)


@pytest.fixture(params=["SIGINT", "interrupt_main"])
def interrupt(request: pytest.FixtureRequest) -> Callable[[], None]:
    fire: Callable[[], None] = sigint if request.param == "SIGINT" else _thread.interrupt_main
    return fire


def interrupted_after(delay: float, fire: Callable[[], None], blocking: Callable[[], object]) -> float:
    """Runs `blocking` on this (main) thread, interrupts it after `delay`; returns how long the
    KeyboardInterrupt took to arrive after the interrupt."""
    assert threading.current_thread() is threading.main_thread()
    fired: List[float] = []

    def go() -> None:
        fired.append(time.monotonic())
        fire()

    timer = threading.Timer(delay, go)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            blocking()
        return time.monotonic() - fired[0]
    finally:
        timer.cancel()


def test_ctrl_c_ends_wait_for_dialog(
    fake: FakeBrowser, registry: SupervisorRegistry, interrupt: Callable[[], None]
) -> None:
    sup = registry.get_or_start("t", fake.ws_url)
    took = interrupted_after(0.3, interrupt, lambda: sup.wait_for_dialog(30.0))
    assert took < LIMIT_S, f"{took * 1000:.1f} ms"
    fake.open_dialog("alert", "still watched")
    assert sup.wait_for_dialog(5.0) is not None


def test_ctrl_c_ends_a_cdp_call_and_cancels_it(
    fake: FakeBrowser, registry: SupervisorRegistry, interrupt: Callable[[], None]
) -> None:
    sup = registry.get_or_start("t", fake.ws_url)
    fake.ignore("Page.reload")
    took = interrupted_after(0.3, interrupt, lambda: sup.call("Page.reload", timeout_s=60))
    assert took < LIMIT_S, f"{took * 1000:.1f} ms"
    # The supervisor carries on; the abandoned call's late reply would be dropped.
    assert sup.call("Browser.getVersion")["product"] == "FakeChrome/1.0"


def test_ctrl_c_ends_a_start(
    fake: FakeBrowser, registry: SupervisorRegistry, interrupt: Callable[[], None]
) -> None:
    fake.ignore("Target.getTargets")
    took = interrupted_after(
        0.3, interrupt, lambda: registry.get_or_start("t", fake.ws_url, start_timeout_s=1.0)
    )
    assert took < LIMIT_S, f"{took * 1000:.1f} ms"


def test_ctrl_c_ends_a_dialog_answer(
    fake: FakeBrowser, registry: SupervisorRegistry, interrupt: Callable[[], None]
) -> None:
    sup = registry.get_or_start("t", fake.ws_url)
    fake.open_dialog("alert", "x")
    assert sup.wait_for_dialog(5.0) is not None
    fake.ignore("Page.handleJavaScriptDialog")
    took = interrupted_after(0.3, interrupt, lambda: sup.respond_to_dialog("accept"))
    assert took < LIMIT_S, f"{took * 1000:.1f} ms"


def test_other_threads_call_directly_and_are_not_interrupted(
    fake: FakeBrowser, registry: SupervisorRegistry
) -> None:
    sup = registry.get_or_start("t", fake.ws_url)
    results: List[object] = []
    t = threading.Thread(target=lambda: results.append(sup.wait_for_dialog(0.3)))
    t.start()
    t.join(5)
    assert results == [None]

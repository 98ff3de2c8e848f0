"""Ctrl-C ends a blocking wait on the main thread within 100 ms (SPEC §17): a real SIGINT sent
to this process, and ``_thread.interrupt_main()``, while the main thread is blocked in each kind
of call. (pytest runs tests on the main thread, the one Python delivers signals to.)

What is measured: the time from the interrupt to the ``KeyboardInterrupt`` reaching the test,
less the time the main thread spent ready to run but waiting for a CPU (its run-queue wait,
``/proc/self/task/<tid>/schedstat``). The binding's part is a wait cut into 20 ms slices with a
signal check between them; on a machine whose cores are all busy (``yes > /dev/null`` on each
core, or a build) the scheduler can add tens of milliseconds before the woken thread runs,
which no code in the process can avoid (one run measured 102.9 ms in all). Where schedstat is
missing the whole time counts. A wait that ignored the interrupt would still fail: the call
under test blocks for 30 s or more, and no more than the time taken is subtracted. (Under six
``yes`` processes on 2 cores: 60.1 ms in all, 60.0 ms of it waiting for a CPU.)
"""

from __future__ import annotations

import _thread
import os
import signal
import threading
import time
from typing import Callable, Iterator, List, Tuple

import pytest

from cdp_supervisor import SupervisorRegistry
from cdp_supervisor.testing import FakeBrowser

LIMIT_S = 0.100


def sigint() -> None:
    os.kill(os.getpid(), signal.SIGINT)


@pytest.fixture(params=["SIGINT", "interrupt_main"])
def interrupt(request: pytest.FixtureRequest) -> Iterator[Callable[[], None]]:
    """Ctrl-C as Python handles it by default. A process started in the background by a
    shell without job control (``cmd &`` in a script, CI runners) inherits SIGINT ignored, and
    Python then installs no handler: no KeyboardInterrupt ever comes, whatever the binding
    does. The test puts Python's own handler in place, and the previous one back after."""
    fire: Callable[[], None] = sigint if request.param == "SIGINT" else _thread.interrupt_main
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield fire
    finally:
        signal.signal(signal.SIGINT, previous)


def run_queue_wait_s(native_id: int) -> float:
    """How long thread `native_id` has waited, in all, for a CPU while ready to run (0.0
    where the kernel does not say)."""
    try:
        with open(f"/proc/self/task/{native_id}/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def interrupted_after(delay: float, fire: Callable[[], None], blocking: Callable[[], object]) -> float:
    """Runs `blocking` on this (main) thread, interrupts it after `delay`; returns how long the
    KeyboardInterrupt took to arrive after the interrupt, less the time this thread waited
    for a CPU meanwhile (see the module doc)."""
    assert threading.current_thread() is threading.main_thread()
    main = threading.main_thread().native_id
    assert main is not None
    fired: List[Tuple[float, float]] = []

    def go() -> None:
        fired.append((time.monotonic(), run_queue_wait_s(main)))
        fire()

    timer = threading.Timer(delay, go)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            blocking()
        took = time.monotonic() - fired[0][0]
        # A wait in the run queue that began before the interrupt is counted when it ends:
        # never subtract more than the time taken.
        stalled = min(max(0.0, run_queue_wait_s(main) - fired[0][1]), took)
    finally:
        timer.cancel()
    print(f"KeyboardInterrupt {took * 1000:.1f} ms after the interrupt, {stalled * 1000:.1f} ms of it waiting for a CPU")
    return took - stalled


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


def helper_calls_running() -> List[str]:
    """The threads the binding spawned because its main-thread helper was still busy with an
    earlier call (``cdp-py-call``; the helper itself is ``cdp-py-main-calls``), by name."""
    names = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                names.append(f.read().strip())
        except OSError:
            pass  # ended meanwhile
    return [n for n in names if n == "cdp-py-call"]


def wait_until(cond: Callable[[], bool], timeout: float) -> bool:
    """Whether `cond` holds within `timeout` (checked every 5 ms)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def test_ctrl_c_cancels_a_start_and_leaves_nothing_behind(
    fake: FakeBrowser, registry: SupervisorRegistry, interrupt: Callable[[], None]
) -> None:
    # A browser that never answers the attach, and a start allowed a minute: only the
    # cancel can end it before then.
    fake.ignore("Target.getTargets")
    took = interrupted_after(
        0.3, interrupt, lambda: registry.get_or_start("t", fake.ws_url, start_timeout_s=60.0)
    )
    assert took < LIMIT_S, f"{took * 1000:.1f} ms"
    # The start was called off, not left running: its slot goes (an uncancelled start would
    # hold it for the whole minute) and no supervisor was published.
    assert wait_until(lambda: registry.tasks() == [], 5.0), registry.tasks()
    assert registry.get("t") is None
    # The task starts again at once (it would otherwise wait for the abandoned start).
    fake.clear_rule("Target.getTargets")
    t0 = time.monotonic()
    sup = registry.get_or_start("t", fake.ws_url)
    print(f"restarted in {(time.monotonic() - t0) * 1000:.1f} ms")
    assert sup.is_active


def test_ctrl_c_abandons_a_dialog_answer_and_frees_its_thread(
    fake: FakeBrowser, registry: SupervisorRegistry, interrupt: Callable[[], None]
) -> None:
    sup = registry.get_or_start("t", fake.ws_url)
    fake.open_dialog("alert", "x")
    assert sup.wait_for_dialog(5.0) is not None
    # The browser never acknowledges the answer: without the cancel, the wait would hold the
    # binding's main-thread helper for the whole call timeout (30 s).
    fake.ignore("Page.handleJavaScriptDialog")
    took = interrupted_after(0.3, interrupt, lambda: sup.respond_to_dialog("accept"))
    assert took < LIMIT_S, f"{took * 1000:.1f} ms"
    # The next blocking call finds the helper free: no extra thread is spawned for it.
    fake.ignore("Page.reload")
    spawned: List[List[str]] = []

    def look_then_interrupt() -> None:
        spawned.append(helper_calls_running())
        interrupt()

    interrupted_after(0.3, look_then_interrupt, lambda: sup.call("Page.reload", timeout_s=60))
    assert spawned == [[]], spawned


def test_other_threads_call_directly_and_are_not_interrupted(
    fake: FakeBrowser, registry: SupervisorRegistry
) -> None:
    sup = registry.get_or_start("t", fake.ws_url)
    results: List[object] = []
    t = threading.Thread(target=lambda: results.append(sup.wait_for_dialog(0.3)))
    t.start()
    t.join(5)
    assert results == [None]

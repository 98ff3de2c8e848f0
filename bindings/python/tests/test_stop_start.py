"""A stop or a close from another thread cuts a start short (issue 28 item 12): a blocked
``get_or_start`` raises ``StartCancelled`` at once instead of waiting its whole
``start_timeout_s``, and a closed registry refuses new starts with ``RegistryClosed``. Starts
blocked connecting to a peer that never answers, attaching to the fake browser that never
answers, and launching a real Chromium; from the main thread (through the binding's helper)
and from another thread."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, List, Optional

import pytest

from cdp_supervisor import RegistryClosed, StartCancelled, SupervisorRegistry
from cdp_supervisor.testing import FakeBrowser
from conftest import need_chromium

WAIT_S = 10.0
# The start would otherwise wait this long.
START_TIMEOUT_S = 30.0


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A ``ws://`` URL whose peer accepts TCP and never answers the WebSocket upgrade."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"ws://127.0.0.1:{listener.getsockname()[1]}/devtools/browser/x"


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {WAIT_S} s"
        time.sleep(0.005)


def cut_short(
    start: Callable[[], object], ready: Callable[[], bool], cut: Callable[[], object], on_main: bool
) -> "tuple[BaseException, float]":
    """Runs `start` (on this, the main thread, or on another one), waits until `ready()`, then
    calls `cut()` from another thread; returns what `start` raised and how long after the cut."""
    cut_at: List[float] = []
    raised: List[BaseException] = []

    def cutter() -> None:
        wait_for(ready, "the start")
        cut_at.append(time.monotonic())
        cut()

    def starter() -> None:
        try:
            start()
        except BaseException as e:  # noqa: BLE001 (checked by the caller)
            raised.append(e)

    threads = [threading.Thread(target=cutter)]
    if not on_main:
        threads.append(threading.Thread(target=starter))
    for t in threads:
        t.start()
    if on_main:
        starter()
    returned = time.monotonic()
    for t in threads:
        t.join(WAIT_S)
    if not on_main:
        returned = time.monotonic()
    assert raised, "the start returned"
    return raised[0], returned - cut_at[0]


@pytest.mark.parametrize("on_main", [True, False], ids=["main-thread", "other-thread"])
def test_a_stop_cuts_a_start_to_a_silent_peer_short(silent_url: str, on_main: bool) -> None:
    with SupervisorRegistry() as reg:
        e, took = cut_short(
            lambda: reg.get_or_start("t", silent_url, start_timeout_s=START_TIMEOUT_S),
            lambda: reg.tasks() == ["t"],
            lambda: reg.stop("t"),
            on_main,
        )
        print(f"stop -> the start raised after {took * 1000:.2f} ms")
        assert isinstance(e, StartCancelled), repr(e)
        assert e.task_id == "t" and "connecting (the task was stopped)" == e.during, e.during
        assert took < 1.0, took
        assert reg.tasks() == []


@pytest.mark.parametrize("on_main", [True, False], ids=["main-thread", "other-thread"])
def test_a_stop_cuts_a_start_attaching_to_the_fake_short(fake: FakeBrowser, on_main: bool) -> None:
    fake.ignore("Target.attachToTarget")
    with SupervisorRegistry() as reg:
        e, took = cut_short(
            lambda: reg.get_or_start("t", fake.ws_url, start_timeout_s=START_TIMEOUT_S),
            lambda: any(c["method"] == "Target.attachToTarget" for c in fake.received()),
            lambda: reg.stop("t"),
            on_main,
        )
        print(f"stop -> the start raised after {took * 1000:.2f} ms")
        assert isinstance(e, StartCancelled), repr(e)
        assert "attaching" in e.during and "the task was stopped" in e.during, e.during
        assert took < 1.0, took
        # The task starts again, normally.
        fake.clear_rule("Target.attachToTarget")
        assert reg.get_or_start("t", fake.ws_url).is_active


def test_close_cuts_a_start_short_and_the_registry_refuses_new_starts(silent_url: str) -> None:
    fake = FakeBrowser()
    reg = SupervisorRegistry()
    try:
        live = reg.get_or_start("live", fake.ws_url)
        e, took = cut_short(
            lambda: reg.get_or_start("t", silent_url, start_timeout_s=START_TIMEOUT_S),
            lambda: "t" in reg.tasks(),
            reg.close,
            True,
        )
        print(f"close -> the start raised after {took * 1000:.2f} ms")
        assert isinstance(e, StartCancelled), repr(e)
        assert e.during == "connecting (the registry was closed)", e.during
        assert took < 1.0, took
        assert not live.is_alive, "close stopped the live task"
        for url in (fake.ws_url, None):  # None: it would launch a browser
            started = time.monotonic()
            with pytest.raises(RegistryClosed) as refused:
                reg.get_or_start("new", url)
            assert time.monotonic() - started < 0.5, "refused at once, nothing launched"
            assert refused.value.task_id == "new"
            assert "make a new registry" in str(refused.value)
        assert reg.tasks() == [] and reg.get("live") is None
        reg.close()  # idempotent
    finally:
        fake.close()


def test_a_registry_is_closed_after_its_with_block(fake: FakeBrowser) -> None:
    with SupervisorRegistry() as reg:
        reg.get_or_start("t", fake.ws_url)
    with pytest.raises(RegistryClosed):
        reg.get_or_start("t", fake.ws_url)


def launched_chromium_pids() -> List[int]:
    """This process's child processes that are a headless browser (Linux /proc)."""
    me = str(os.getpid())
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if stat[stat.rfind(")") + 2 :].split()[1] == me and b"--headless" in cmdline:
            found.append(int(entry.name))
    return found


def test_close_cuts_the_launch_of_a_chromium_short_and_leaves_no_browser() -> None:
    need_chromium()
    before = launched_chromium_pids()
    assert before == [], f"browsers of this process already running: {before}"
    reg = SupervisorRegistry()
    launched: List[Optional[int]] = []

    def launching() -> bool:
        pids = launched_chromium_pids()
        if pids:
            launched.append(pids[0])
        return bool(pids)

    e, took = cut_short(lambda: reg.get_or_start("t"), launching, reg.close, True)
    print(f"close during the launch -> the start raised after {took * 1000:.2f} ms: {e!r}")
    assert isinstance(e, (StartCancelled, RegistryClosed)), repr(e)
    if isinstance(e, StartCancelled):
        assert e.during in (
            "launching the browser (the registry was closed)",
            "connecting (the registry was closed)",
            "attaching to the page (the registry was closed)",
        ), e.during
    assert took < 2.0, took
    wait_for(lambda: launched_chromium_pids() == [], "the launched browser's exit")

"""The scenarios of ``test_fork.py``, each run by it in a fresh interpreter (so that a child that
exits runs the interpreter's whole shutdown, and so that what a scenario leaves behind cannot
reach the test process)::

    python fork_scenarios.py METHOD [CDP_URL]

METHOD is ``os.fork``, ``fork`` or ``forkserver`` (``multiprocessing``'s start methods). Without
``CDP_URL`` the scenario uses a ``FakeBrowser`` of its own; with ``launch`` it lets the registry
launch a Chromium; with a browser's URL, the parent also starts a task in
``cdp_supervisor.hermes.SUPERVISOR_REGISTRY``, which a child must find empty and usable. The parent makes a registry and a supervisor (and the fake), then starts a
child: the child calls every method of the objects it inherited (none with ``forkserver``),
makes a registry of its own on the same browser and uses it, and exits normally. The parent
then checks its own supervisor and prints one JSON report on stdout. Nothing is written to
stderr unless something is wrong.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

from cdp_supervisor import Supervisor, SupervisorRegistry, UsedAfterFork, tools
from cdp_supervisor.testing import FakeBrowser

# Python 3.12+ warns that a fork of a process with threads may deadlock the child: these
# scenarios fork such processes on purpose.
warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*fork.*")

TASK = "fork-parent"
EXPRESSION = "6 * 7"
# The objects the child inherits, held as globals so that the child's interpreter shutdown
# frees (drops) them.
HELD: Dict[str, Any] = {}


def evaluate(sup: Supervisor) -> Any:
    return sup.call("Runtime.evaluate", {"expression": EXPRESSION, "returnByValue": True})


def calls_on_inherited(
    reg: SupervisorRegistry, sup: Supervisor, fake: Optional[FakeBrowser], url: str
) -> Dict[str, Any]:
    """Every method of the inherited objects: what each did and how long it took."""
    calls: List[Tuple[str, Callable[[], object]]] = [
        ("Supervisor.call", lambda: evaluate(sup)),
        ("Supervisor.snapshot", sup.snapshot),
        ("Supervisor.respond_to_dialog", lambda: sup.respond_to_dialog("accept")),
        ("Supervisor.wait_for_dialog", lambda: sup.wait_for_dialog(5.0)),
        ("Supervisor.state", lambda: sup.state),
        ("Supervisor.is_alive", lambda: sup.is_alive),
        ("Supervisor.is_active", lambda: sup.is_active),
        ("Supervisor.page_target_id", lambda: sup.page_target_id),
        ("SupervisorRegistry.get_or_start", lambda: reg.get_or_start(TASK, url)),
        ("SupervisorRegistry.get_or_start(new task)", lambda: reg.get_or_start("child", url)),
        ("SupervisorRegistry.get", lambda: reg.get(TASK)),
        ("SupervisorRegistry.snapshot", lambda: reg.snapshot(TASK)),
        ("SupervisorRegistry.tasks", reg.tasks),
        ("tools.browser_snapshot", lambda: tools.browser_snapshot(reg, task_id=TASK)),
        ("Supervisor.stop", sup.stop),
        ("SupervisorRegistry.stop", lambda: reg.stop(TASK)),
        ("SupervisorRegistry.stop_all", reg.stop_all),
        ("SupervisorRegistry.close", reg.close),
        ("SupervisorRegistry.__exit__", lambda: reg.__exit__(None, None, None)),
    ]
    if fake is not None:
        calls += [
            ("FakeBrowser.open_dialog", lambda: fake.open_dialog("alert", "x")),
            ("FakeBrowser.received", fake.received),
            ("FakeBrowser.close", fake.close),
        ]
    out: Dict[str, Any] = {}
    for name, call in calls:
        started = time.monotonic()
        try:
            call()
            outcome = "returned"
        except UsedAfterFork as e:
            outcome = "UsedAfterFork"
            out["message"] = str(e)
            out["made_in_pid"] = e.made_in_pid
            out["pid"] = e.pid
        except BaseException as e:  # noqa: BLE001 (reported to the test)
            outcome = f"{type(e).__name__}: {e}"
        out[name] = [outcome, time.monotonic() - started]
    out["repr"] = repr(reg)
    # Plain values still read.
    out["config_ok"] = reg.config.start_timeout_s > 0 and sup.task_id == TASK
    return out


def own_registry(url: str) -> Dict[str, Any]:
    """A registry made in this process: it starts a task on `url` and calls into its page (on
    the main thread, through the binding's helper thread, which a child must start anew)."""
    started = time.monotonic()
    reg = SupervisorRegistry()
    try:
        sup = reg.get_or_start("fork-child", url, new_page=True)
        result = evaluate(sup)
        return {"active": sup.is_active, "result": result, "took_s": time.monotonic() - started}
    finally:
        reg.close()


def child_work(url: str) -> Dict[str, Any]:
    """What a child does: the inherited objects (if any), then a registry of its own."""
    report: Dict[str, Any] = {"pid": os.getpid()}
    if HELD:
        report["inherited"] = calls_on_inherited(HELD["reg"], HELD["sup"], HELD.get("fake"), url)
    report["own"] = own_registry(url)
    if "hermes" in HELD:
        report["hermes"] = hermes_in_child(url)
    return report


def hermes_in_child(url: str) -> Dict[str, Any]:
    """The Hermes drop-in's process-global registry in a child: empty, and it starts tasks."""
    from cdp_supervisor.hermes import SUPERVISOR_REGISTRY

    inherited = SUPERVISOR_REGISTRY.get("hermes-parent")
    sup = SUPERVISOR_REGISTRY.get_or_start("hermes-child", url)
    try:
        return {"inherited": repr(inherited), "active": sup.snapshot().active}
    finally:
        SUPERVISOR_REGISTRY.stop("hermes-child")


def mp_worker(queue: "multiprocessing.Queue[Dict[str, Any]]", url: str) -> None:
    try:
        queue.put(child_work(url))
    except BaseException as e:  # noqa: BLE001 (reported to the test)
        queue.put({"error": f"{type(e).__name__}: {e}"})


def run_child(method: str, url: str) -> Dict[str, Any]:
    """Starts the child by `method` and returns its report and exit status."""
    if method == "os.fork":
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            try:
                data = json.dumps(child_work(url)).encode()
            except BaseException as e:  # noqa: BLE001 (reported to the test)
                data = json.dumps({"error": f"{type(e).__name__}: {e}"}).encode()
            with os.fdopen(write_end, "wb") as w:
                w.write(data)
            # A normal exit: the interpreter's shutdown frees what the child still holds.
            sys.exit(0)
        os.close(write_end)
        with os.fdopen(read_end, "rb") as r:
            report: Dict[str, Any] = json.loads(r.read() or b'{"error": "no report"}')
        deadline = time.monotonic() + 30
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                report["exit"] = "killed after 30 s"
                return report
            time.sleep(0.01)
        report["exit"] = os.waitstatus_to_exitcode(status)
        return report
    queue: "multiprocessing.Queue[Dict[str, Any]]" = multiprocessing.get_context(method).Queue()
    proc: "multiprocessing.process.BaseProcess"
    if method == "fork":
        proc = multiprocessing.get_context("fork").Process(target=mp_worker, args=(queue, url))
    else:
        ctx = multiprocessing.get_context("forkserver")
        # The package imported in the server too, so that the worker is a fork of a process
        # that has the binding loaded.
        ctx.set_forkserver_preload(["cdp_supervisor"])
        proc = ctx.Process(target=mp_worker, args=(queue, url))
    proc.start()
    try:
        report = queue.get(timeout=60)
    except Exception as e:  # noqa: BLE001 (queue.Empty)
        report = {"error": f"no report: {type(e).__name__}"}
    proc.join(30)
    if proc.exitcode is None:
        proc.kill()
        proc.join()
        report["exit"] = "killed after 30 s"
    else:
        report["exit"] = proc.exitcode
    return report


def main() -> None:
    method = sys.argv[1]
    target = sys.argv[2] if len(sys.argv) > 2 else None
    fake = FakeBrowser() if target is None else None
    reg = SupervisorRegistry()
    url = fake.ws_url if fake is not None else (None if target == "launch" else target)
    sup = reg.get_or_start(TASK, url)
    if url is None:
        # The registry launched the browser: the child connects to it too.
        url = launched_ws_url(reg)
    before = evaluate(sup)
    page = sup.page_target_id
    attaches_before = attaches(fake, page)
    hermes = None
    if fake is None and target != "launch":
        from cdp_supervisor.hermes import SUPERVISOR_REGISTRY

        hermes = SUPERVISOR_REGISTRY.get_or_start("hermes-parent", url)
    if method != "forkserver":
        HELD.update(reg=reg, sup=sup)
        if fake is not None:
            HELD["fake"] = fake
        if hermes is not None:
            HELD["hermes"] = hermes
    report = run_child(method, url)
    HELD.clear()
    # The parent's supervisor: still connected (never reconnected), and answering.
    started = time.monotonic()
    parent = {
        "state": sup.state,
        "reason": sup.snapshot().reason,
        "before": before,
        "after": evaluate(sup),
        "call_s": time.monotonic() - started,
        "reattached": attaches(fake, page) - attaches_before,
        "tasks": reg.tasks(),
    }
    if hermes is not None:
        parent["hermes_active"] = hermes.snapshot().active
        from cdp_supervisor.hermes import SUPERVISOR_REGISTRY

        SUPERVISOR_REGISTRY.stop("hermes-parent")
    reg.close()
    if fake is not None:
        fake.close()
    print(json.dumps({"child": report, "parent": parent}))


def attaches(fake: Optional[FakeBrowser], page: Optional[str]) -> int:
    """How many `Target.attachToTarget` to `page` the fake received (a reconnect of the
    parent's supervisor attaches to its page again; the child's registry opens a page of its
    own)."""
    if fake is None:
        return 0
    return sum(
        1
        for c in fake.received()
        if c.get("method") == "Target.attachToTarget"
        and c.get("params", {}).get("targetId") == page
    )


def launched_ws_url(reg: SupervisorRegistry) -> str:
    """The browser WebSocket URL of the browser `reg` launched (from the supervisor's snapshot:
    its redacted URL has no credentials to lose, a local launch has none)."""
    snap = reg.snapshot(TASK)
    assert snap is not None
    return snap.cdp_url


if __name__ == "__main__":
    main()

"""Hermes Agent's own supervisor tests, run against ``cdp_supervisor.hermes``.

Needs a checkout of NousResearch/hermes-agent, or a directory holding just its
``tests/tools/test_browser_supervisor.py`` (passes at commits 4e898ab and 099e64b; any version
with that file will do): set ``HERMES_AGENT_DIR`` to it. ``.ci/run`` downloads that file at a
pinned commit and sets it. Without one the test skips and says why (it fails instead under
``CDP_SUPERVISOR_HERMES=require``); ``test_hermes_compat.py`` runs the same scenarios, written
again. Nothing of Hermes is copied into this repository.

How: Hermes's test file is copied to a temporary directory (away from Hermes's own
``conftest.py`` and ``pyproject.toml``, which import the rest of Hermes) and run by pytest with
``tests/hermes_shim`` first on ``PYTHONPATH`` (``tools.browser_supervisor`` and the two tool
modules are the drop-in) and ``HERMES_E2E_BROWSER=1``. As root, Chromium needs
``--no-sandbox``, which Hermes's fixture does not pass: a ``chromium`` wrapper that adds it
goes first on ``PATH``. Deselected: the test that writes into Hermes's private asyncio state
(``test_browser_cdp_frame_id_routes_via_supervisor``) and the one that drives Hermes's other
browser tool through ``npx agent-browser`` (``test_two_supervisors_bind_concurrent_follow_up_actions``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, Iterator, List
from xml.etree import ElementTree

import pytest

from conftest import need_chromium

SHIM = Path(__file__).resolve().parent / "hermes_shim"
DESELECTED = [
    "test_browser_cdp_frame_id_routes_via_supervisor",
    "test_two_supervisors_bind_concurrent_follow_up_actions",
]
# Skips that Hermes's file makes by itself.
EXPECTED_SKIPS = {"test_browser_cdp_frame_id_real_oopif_smoke_documented"}


def test_hermes_own_supervisor_tests_pass_against_the_drop_in(tmp_path: Path) -> None:
    checkout = os.environ.get("HERMES_AGENT_DIR")
    if not checkout:
        message = (
            "set HERMES_AGENT_DIR to a checkout of NousResearch/hermes-agent to run its "
            "tests/tools/test_browser_supervisor.py against cdp_supervisor.hermes"
        )
        if os.environ.get("CDP_SUPERVISOR_HERMES", "") == "require":
            pytest.fail(f"{message} (CDP_SUPERVISOR_HERMES=require)")
        pytest.skip(message)
    source = Path(checkout) / "tests" / "tools" / "test_browser_supervisor.py"
    assert source.is_file(), f"{source} does not exist"
    chromium = need_chromium()
    shutil.copy(source, tmp_path / "test_browser_supervisor.py")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "chromium"
    wrapper.write_text(f'#!/bin/sh\nexec "{chromium}" --no-sandbox "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SHIM), env.get("PYTHONPATH", "")])
    env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH", "")])
    env["HERMES_E2E_BROWSER"] = "1"
    # Hermes's fixture makes its Chromium profile with tempfile.mkdtemp and removes it while
    # Chromium may still be writing its "Default" folder: it goes into a directory of ours,
    # removed once no process uses it.
    scratch = Path(tempfile.mkdtemp(prefix="cdps-hermes-"))
    env["TMPDIR"] = str(scratch)
    try:
        with hermes_port_lock():
            run = run_hermes_file(tmp_path, env)
    finally:
        remove_when_unused(scratch)
    print(run.stdout[-4000:], run.stderr[-2000:], sep="\n")
    assert run.returncode == 0, run.stdout[-4000:]
    cases = ElementTree.parse(tmp_path / "report.xml").getroot().iter("testcase")
    outcomes = {
        case.get("name", ""): "skipped" if case.find("skipped") is not None else "ran"
        for case in cases
    }
    skipped = {name for name, outcome in outcomes.items() if outcome == "skipped"}
    assert skipped <= EXPECTED_SKIPS, f"skipped: {sorted(skipped - EXPECTED_SKIPS)}"
    assert sum(o == "ran" for o in outcomes.values()) >= 5, outcomes


def remove_when_unused(scratch: Path, timeout: float = 10.0) -> None:
    """Removes `scratch` once no process names it on its command line (Hermes's Chromium and
    its helpers, still exiting): waits up to `timeout` seconds, then kills what is left."""
    deadline = time.monotonic() + timeout
    while True:
        users = processes_naming(str(scratch))
        if not users:
            break
        if time.monotonic() >= deadline:
            for pid in users:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            break
        time.sleep(0.05)
    shutil.rmtree(scratch, ignore_errors=True)


def processes_naming(text: str) -> List[int]:
    """The pids whose command line contains `text` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if text.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found


@contextlib.contextmanager
def hermes_port_lock(timeout: float = 600.0) -> Iterator[None]:
    """Hermes's fixture starts Chromium on the fixed port 9225 and takes whatever answers
    there: two runs of this test on one machine at once would share (and kill) each other's
    browser. They take turns, on a lock file; the lock goes with the process that held it."""
    path = Path(tempfile.gettempdir()) / "cdp-supervisor-hermes-port-9225.lock"
    with open(path, "a") as f:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                assert time.monotonic() < deadline, f"{path} still locked after {timeout} s"
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def run_hermes_file(tmp_path: Path, env: Dict[str, str]) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-rs",
            "-q",
            f"--junitxml={tmp_path / 'report.xml'}",
            "-m",
            "integration or not integration",
            "-k",
            " and ".join(f"not {name}" for name in DESELECTED),
            str(tmp_path / "test_browser_supervisor.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )

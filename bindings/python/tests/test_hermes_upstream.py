"""Hermes Agent's own supervisor tests, run against ``cdp_supervisor.hermes``.

Hermes's ``tests/tools/test_browser_supervisor.py`` at the two commits it is known to pass at
(4e898ab and 099e64b), from byte-exact copies kept beside this repository, never in it:
``<dir>/<commit>/tests/tools/test_browser_supervisor.py``, where ``<dir>`` is
``$CDP_SUPERVISOR_HERMES_TESTS``, else ``<repository>/../shared/hermes-tests``, else
``/work/shared/hermes-tests`` (``.ci/run`` looks the same way). Each copy is checked against the
sha256 of its commit's file. ``HERMES_AGENT_DIR`` adds a run of a checkout of
NousResearch/hermes-agent (or a directory holding just that file). A copy that is not there
skips and says why; under ``CDP_SUPERVISOR_HERMES=require`` (``.ci/run`` sets it) it fails.
``test_hermes_compat.py`` runs the same scenarios, written again.

How: Hermes's test file is copied to a temporary directory (away from Hermes's own
``conftest.py`` and ``pyproject.toml``, which import the rest of Hermes) and run by pytest with
``tests/hermes_shim`` first on ``PYTHONPATH`` (``tools.browser_supervisor`` and the two tool
modules are the drop-in) and ``HERMES_E2E_BROWSER=1``. The pinned versions predate Hermes's
owned tab (issue 31): their tests fire dialogs on the browser's first page, the page those
versions attached to, so for them the shim calls ``cdp_supervisor.hermes.legacy_first_page()``
(a checkout named by ``HERMES_AGENT_DIR`` runs with today's owned tab). As root, Chromium needs
``--no-sandbox``, which Hermes's fixture does not pass: a ``chromium`` wrapper that adds it
goes first on ``PATH``. Deselected: the test that writes into Hermes's private asyncio state
(``test_browser_cdp_frame_id_routes_via_supervisor``) and the one that drives Hermes's other
browser tool through ``npx agent-browser`` (``test_two_supervisors_bind_concurrent_follow_up_actions``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, Iterator, List, NoReturn, Optional
from xml.etree import ElementTree

import pytest

from conftest import need_chromium

SHIM = Path(__file__).resolve().parent / "hermes_shim"
REPO = Path(__file__).resolve().parents[3]
HERMES_FILE = Path("tests") / "tools" / "test_browser_supervisor.py"
# The commits whose file passes, with its sha256 and how many of its tests run (not skipped).
COMMITS = {
    "099e64b": ("34a073d76743494096bdfddb1f183d9e6de95464aef9b5680ed2bcd6da34fc49", 7),
    "4e898ab": ("2a836a1aa7d2103d3bc38d5470e01916f6eda44eb2a7908877df92586b74571a", 20),
}
DESELECTED = [
    "test_browser_cdp_frame_id_routes_via_supervisor",
    "test_two_supervisors_bind_concurrent_follow_up_actions",
]
# Skips that Hermes's file makes by itself.
EXPECTED_SKIPS = {"test_browser_cdp_frame_id_real_oopif_smoke_documented"}
REQUIRED = os.environ.get("CDP_SUPERVISOR_HERMES", "") == "require"


def copies_dir() -> Optional[Path]:
    """Where the copies of Hermes's file are kept (see the module doc), if anywhere."""
    named = os.environ.get("CDP_SUPERVISOR_HERMES_TESTS")
    if named:
        return Path(named)
    for candidate in (REPO.parent / "shared" / "hermes-tests", Path("/work/shared/hermes-tests")):
        if candidate.is_dir():
            return candidate
    return None


def missing(message: str) -> NoReturn:
    if REQUIRED:
        pytest.fail(f"{message} (CDP_SUPERVISOR_HERMES=require)")
    print(f"SKIPPED: {message}", file=sys.stderr)
    pytest.skip(message)


# A checkout named by HERMES_AGENT_DIR runs too, beside the pinned copies.
RUNS = list(COMMITS) + (["HERMES_AGENT_DIR"] if os.environ.get("HERMES_AGENT_DIR") else [])


@pytest.mark.parametrize("version", RUNS)
def test_hermes_own_supervisor_tests_pass_against_the_drop_in(version: str, tmp_path: Path) -> None:
    if version == "HERMES_AGENT_DIR":
        source = Path(os.environ["HERMES_AGENT_DIR"]) / HERMES_FILE
        assert source.is_file(), f"{source} does not exist"
        at_least = 5
    else:
        where = copies_dir()
        if where is None:
            missing(
                "no copies of Hermes Agent's tests (set CDP_SUPERVISOR_HERMES_TESTS, or put them "
                "in ../shared/hermes-tests beside the repository)"
            )
        source = where / version / HERMES_FILE
        if not source.is_file():
            missing(f"{source} does not exist")
        sha256, at_least = COMMITS[version]
        got = hashlib.sha256(source.read_bytes()).hexdigest()
        assert got == sha256, f"{source} is not Hermes's file at {version} (sha256 {got})"
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
    # The pinned versions predate Hermes's owned tab (#69727): their tests act on the
    # browser's first page, which those versions attached to.
    env["CDP_SUPERVISOR_HERMES_LEGACY_PAGE"] = "1" if version in COMMITS else "0"
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
    ran = sum(o == "ran" for o in outcomes.values())
    print(f"Hermes's tests at {version}: {ran} ran, skipped {sorted(skipped)}")
    assert ran >= at_least, outcomes


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

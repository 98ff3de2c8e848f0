"""Shared fixtures: a fake browser, a real headless Chromium (required under
``CDP_SUPERVISOR_E2E=require``, else skipped loudly when absent), a loopback HTTP server with two
origins (``127.0.0.1`` and ``localhost``: a real cross-origin iframe), and a second, plain CDP
client that acts on the page the way a user's script would."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from cdp_supervisor import SupervisorRegistry
from cdp_supervisor.testing import FakeBrowser

E2E_REQUIRED = os.environ.get("CDP_SUPERVISOR_E2E", "") == "require"
BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# Loopback HTTP without any proxy the environment names.
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def find_chromium() -> Optional[str]:
    configured = os.environ.get("CHROME")
    if configured:
        return configured
    for name in BROWSER_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def need_chromium() -> str:
    """The Chromium binary; skips the test loudly without one, fails it under require."""
    exe = find_chromium()
    if exe is None:
        message = "SKIPPED: no Chromium (set CHROME or put chromium on PATH)"
        if E2E_REQUIRED:
            pytest.fail(f"{message}, and CDP_SUPERVISOR_E2E=require")
        print(message, file=sys.stderr)
        pytest.skip(message)
    return exe


class Chromium:
    """A headless Chromium with a remote debugging port, killed (its process group) at close."""

    def __init__(self, exe: str) -> None:
        self.profile = tempfile.mkdtemp(prefix="cdp-supervisor-pytest-")
        args = [
            exe,
            "--headless",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--site-per-process",
            "--remote-debugging-port=0",
            f"--user-data-dir={self.profile}",
            # The dialog bridge's host never resolves: a bridge XHR that is not intercepted
            # fails at once instead of waiting for DNS.
            "--host-resolver-rules=MAP cdp-dialog-bridge.invalid ~NOTFOUND",
            "about:blank",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            args.insert(1, "--no-sandbox")
        # Chromium's own temporary directory (its singleton socket's, which a killed Chromium
        # leaves behind) goes into the profile and away with it, as src/launch.rs does.
        tmp = Path(self.profile) / "t"
        tmp.mkdir()
        env = dict(os.environ, TMPDIR=str(tmp))
        self.proc = subprocess.Popen(
            args,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 20
        while True:
            try:
                lines = port_file.read_text().splitlines()
                if len(lines) >= 2:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("Chromium did not open its debugging port")
            time.sleep(0.05)
        self.port = int(lines[0])
        self.ws_url = f"ws://127.0.0.1:{self.port}{lines[1]}"
        self.http_url = f"http://127.0.0.1:{self.port}"
        # Chromium writes DevToolsActivePort before it has opened the page it was started
        # with: a supervisor that attached now would find no page and open one of its own,
        # and a test's "first page" might then be the other one.
        while not self.page_ids():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("Chromium did not open its first page")
            time.sleep(0.05)

    def page_ids(self) -> List[str]:
        """The browser's page targets, most recently active first (``/json/list``)."""
        try:
            with NO_PROXY.open(f"{self.http_url}/json/list", timeout=5) as r:
                targets: List[Dict[str, Any]] = json.loads(r.read())
        except OSError:
            return []
        return [str(t["id"]) for t in targets if t.get("type") == "page"]

    def wait_until_gone(self, target_ids: List[str], timeout: float = 10.0) -> None:
        """Waits until none of `target_ids` is listed any more: Chromium answers
        ``Target.closeTarget`` before the page is gone, and keeps listing it (first, when it
        was the most recently active) for a few hundred milliseconds."""
        deadline = time.monotonic() + timeout
        while any(t in self.page_ids() for t in target_ids):
            assert time.monotonic() < deadline, f"pages {target_ids} still listed after {timeout} s"
            time.sleep(0.02)

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        shutil.rmtree(self.profile, ignore_errors=True)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Chromium]:
    browser = Chromium(need_chromium())
    try:
        yield browser
    finally:
        browser.close()


class Pages:
    """A loopback HTTP server answering ``GET /<name>`` with the page registered under that
    name; reachable as ``http://127.0.0.1:PORT`` and ``http://localhost:PORT`` (two sites)."""

    def __init__(self) -> None:
        pages: Dict[str, str] = {}
        self.pages = pages

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
                body = pages.get(self.path.lstrip("/").split("?")[0])
                if body is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, name: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}/{name}"

    def add(self, name: str, html: str) -> str:
        self.pages[name] = html
        return self.url(name)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def pages() -> Iterator[Pages]:
    p = Pages()
    try:
        yield p
    finally:
        p.close()


class Cdp:
    """A plain CDP client on the browser's WebSocket (what a user's own script would be):
    ``call`` waits for the reply, skipping events."""

    def __init__(self, ws_url: str) -> None:
        from websockets.sync.client import connect

        self.ws = connect(
            ws_url, max_size=None, open_timeout=10, ping_interval=None, proxy=None, legacy=True
        )
        self.next_id = 0

    def send(self, method: str, params: Optional[Dict[str, Any]] = None, session: Optional[str] = None) -> int:
        self.next_id += 1
        msg: Dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        return self.next_id

    def reply(self, call_id: int, timeout: float = 10.0) -> Dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no reply to call {call_id}")
            msg: Dict[str, Any] = json.loads(self.ws.recv(timeout=left))
            if msg.get("id") == call_id:
                return msg

    def call(self, method: str, params: Optional[Dict[str, Any]] = None, session: Optional[str] = None) -> Dict[str, Any]:
        return self.reply(self.send(method, params, session))

    def page_session(self, target_id: Optional[str] = None) -> Tuple[str, str]:
        """Attaches to `target_id` (default: the first page); returns (target id, session)."""
        if target_id is None:
            infos: List[Dict[str, Any]] = self.call("Target.getTargets")["result"]["targetInfos"]
            target_id = next(str(t["targetId"]) for t in infos if t.get("type") == "page")
        attached = self.call("Target.attachToTarget", {"targetId": target_id, "flatten": True})
        return target_id, str(attached["result"]["sessionId"])

    def close(self) -> None:
        self.ws.close()


def navigate_and_run(ws_url: str, url: str, expression: str, target_id: Optional[str] = None) -> None:
    """Like a user's script: navigates the first page (or `target_id`) to `url`, waits for it
    to load, then evaluates `expression` (which may schedule a dialog)."""
    cdp = Cdp(ws_url)
    try:
        _, session = cdp.page_session(target_id)
        cdp.call("Page.enable", session=session)
        cdp.call("Page.navigate", {"url": url}, session=session)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            ready = cdp.call(
                "Runtime.evaluate",
                {"expression": "document.readyState", "returnByValue": True},
                session=session,
            )
            if ready.get("result", {}).get("result", {}).get("value") == "complete":
                break
            time.sleep(0.05)
        cdp.call("Page.disable", session=session)
        cdp.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=session)
    finally:
        cdp.close()


@pytest.fixture
def fake() -> Iterator[FakeBrowser]:
    fb = FakeBrowser()
    try:
        yield fb
    finally:
        fb.close()


@pytest.fixture
def registry() -> Iterator[SupervisorRegistry]:
    reg = SupervisorRegistry()
    try:
        yield reg
    finally:
        reg.close()

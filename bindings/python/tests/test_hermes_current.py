"""Hermes Agent as it is now (its ``tools/browser/`` package; issue 31), against the drop-in:
the scenarios of what Hermes added since the pinned version, written anew (none of Hermes's code
is here), on a real headless Chromium with pages served from a loopback HTTP server.

* ``install()``: a Hermes checkout imports the drop-in as ``tools.browser_supervisor`` and
  ``tools.browser.browser_supervisor``, in any order of first import, its tool modules use it.
* One tab per task: a fresh ``about:blank`` page, never one the browser holds; two tasks, two.
* ``navigate_page`` never waits on a dialog; a second wait completes the same navigation.
* ``page_target_tab_ref``, ``get_frame_session``; no session id in what an LLM sees.
* ``wait_for_download`` with Hermes's grace; file choosers answered with files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from cdp_supervisor import hermes
from cdp_supervisor.hermes import CDPSupervisor, _SupervisorRegistry, browser_dialog
from cdp_supervisor.testing import FakeBrowser
from conftest import Cdp, Chromium, Pages


@pytest.fixture
def registry(chromium: Chromium) -> Iterator[_SupervisorRegistry]:
    """A drop-in registry of its own; every supervisor stops (and its tab closes) after the
    test."""
    reg = _SupervisorRegistry()
    try:
        yield reg
    finally:
        tabs = [s.page_target_id() for s in list(reg._by_task.values())]
        reg.stop_all()
        chromium.wait_until_gone([t for t in tabs if t is not None])


def targets(chromium: Chromium) -> List[Dict[str, Any]]:
    cdp = Cdp(chromium.ws_url)
    try:
        infos: List[Dict[str, Any]] = cdp.call("Target.getTargets")["result"]["targetInfos"]
        return infos
    finally:
        cdp.close()


# ── install(): both import paths, any order ──────────────────────────────────

# A stand-in for a Hermes checkout: its browser modules, each marking itself "real" (the drop-in
# must replace or patch them), and a tool registry like Hermes's.
CHECKOUT = {
    "tools/__init__.py": "",
    "tools/registry.py": """
        HANDLERS = {}
        class _Registry:
            def register(self, name, handler, **kw):
                HANDLERS[name] = handler
        registry = _Registry()
    """,
    "tools/browser_supervisor.py": "SUPERVISOR_REGISTRY = 'REAL old path'\n",
    "tools/browser/__init__.py": """
        from .browser_cdp_tool import *
        from .browser_dialog_tool import *
        from .browser_supervisor import *
    """,
    "tools/browser/browser_supervisor.py": "SUPERVISOR_REGISTRY = 'REAL new path'\n",
    "tools/browser/browser_dialog_tool.py": """
        from tools.browser.browser_supervisor import SUPERVISOR_REGISTRY
        from tools.registry import registry
        def browser_dialog(action, prompt_text=None, dialog_id=None, task_id=None):
            return 'REAL browser_dialog'
        registry.register('browser_dialog', handler=lambda args, **kw: browser_dialog(
            action=args.get('action', ''), task_id=kw.get('task_id')))
    """,
    "tools/browser/browser_cdp_tool.py": """
        from tools.registry import registry
        def browser_cdp(method, params=None, target_id=None, frame_id=None, timeout=30.0, task_id=None):
            return 'REAL browser_cdp'
        registry.register('browser_cdp', handler=lambda args, **kw: browser_cdp(
            method=args.get('method', ''), frame_id=args.get('frame_id'), task_id=kw.get('task_id')))
    """,
}

CHECK = """
import json, sys
import cdp_supervisor.hermes as h
ORDER = json.loads(sys.argv[1])
BEFORE = json.loads(sys.argv[2])
for name in BEFORE:
    __import__(name)
h.install()
for name in ORDER:
    __import__(name)
import tools.browser_supervisor as old, tools.browser.browser_supervisor as new
import tools.browser.browser_dialog_tool as dialog_tool, tools.browser.browser_cdp_tool as cdp_tool
import tools.browser, tools.registry
out = {
    "old": old.SUPERVISOR_REGISTRY is h.SUPERVISOR_REGISTRY,
    "new": new.SUPERVISOR_REGISTRY is h.SUPERVISOR_REGISTRY,
    "class": new.CDPSupervisor is h.CDPSupervisor and old._SupervisorRegistry is h._SupervisorRegistry,
    "package": getattr(tools.browser, "CDPSupervisor", None) is h.CDPSupervisor,
    "tools": dialog_tool.browser_dialog is h.browser_dialog and cdp_tool.browser_cdp is h.browser_cdp,
    "dialog": json.loads(tools.registry.HANDLERS["browser_dialog"]({"action": "accept"}, task_id="none")),
    "cdp": json.loads(tools.registry.HANDLERS["browser_cdp"]({"method": "X.y", "frame_id": "F"}, task_id="none")),
}
print(json.dumps(out))
"""


@pytest.mark.parametrize(
    "before, order",
    [
        ([], ["tools.browser.browser_supervisor", "tools.browser_supervisor"]),
        ([], ["tools.browser_supervisor", "tools.browser.browser_supervisor"]),
        ([], ["tools.browser"]),
        ([], ["tools.browser.browser_dialog_tool", "tools.browser_supervisor"]),
        (["tools.browser", "tools.browser_supervisor"], []),
    ],
    ids=["new-path-first", "old-path-first", "package-first", "tool-module-first", "imported-before-install"],
)
def test_install_makes_a_checkout_import_the_drop_in_under_both_names(
    tmp_path: Path, before: List[str], order: List[str]
) -> None:
    for path, text in CHECKOUT.items():
        f = tmp_path / path
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(textwrap.dedent(text))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run(
        [sys.executable, "-c", CHECK, json.dumps(order), json.dumps(before)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["old"] and out["new"] and out["class"], out
    assert out["tools"], out
    if "tools.browser" not in before:
        assert out["package"], out
    # Hermes's registered handlers run the drop-in's functions, with Hermes's shapes.
    assert out["dialog"]["success"] is False and "No CDP supervisor" in out["dialog"]["error"]
    assert "supervisor" in out["cdp"]["error"].lower()


# ── One tab per task ─────────────────────────────────────────────────────────


def test_two_tasks_get_two_new_tabs_and_no_existing_page_is_touched(
    chromium: Chromium, pages: Pages, registry: _SupervisorRegistry
) -> None:
    other = pages.add("hermes-other", "<title>another client's page</title>")
    cdp = Cdp(chromium.ws_url)
    try:
        cdp.call("Target.createTarget", {"url": other})
        deadline = time.monotonic() + 10
        while not any(t.get("url") == other for t in targets(chromium)):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        before = {t["targetId"]: (t["url"], t["attached"]) for t in targets(chromium) if t["type"] == "page"}
        a = registry.get_or_start(task_id="own-tab-a", cdp_url=chromium.ws_url)
        b = registry.get_or_start(task_id="own-tab-b", cdp_url=chromium.ws_url)
        tabs = [a.page_target_id(), b.page_target_id()]
        assert tabs[0] != tabs[1] and not set(tabs) & set(before)
        now = {t["targetId"]: (t["url"], t["attached"]) for t in targets(chromium) if t["type"] == "page"}
        assert {t: now[t][0] for t in tabs} == {t: "about:blank" for t in tabs}
        assert {t: now[t] for t in before} == before, "no page the browser held was touched"
        assert len(now) == len(before) + 2
        assert a.snapshot().page_target_id == tabs[0]
        registry.stop("own-tab-a")
        chromium.wait_until_gone([t for t in tabs[:1] if t is not None])
        assert tabs[1] in chromium.page_ids(), "the other task's tab stays"
    finally:
        cdp.close()


def test_legacy_first_page_attaches_like_hermes_before_its_owned_tab(
    chromium: Chromium, registry: _SupervisorRegistry
) -> None:
    hermes.legacy_first_page()
    try:
        first = next(t["targetId"] for t in targets(chromium) if t["type"] == "page")
        a = registry.get_or_start(task_id="legacy-a", cdp_url=chromium.ws_url)
        b = registry.get_or_start(task_id="legacy-b", cdp_url=chromium.ws_url)
        assert a.page_target_id() == first, "the browser's first page, as Hermes did"
        assert b.page_target_id() not in (None, first), "a second task opens a tab of its own"
    finally:
        hermes.legacy_first_page(False)
    registry.stop("legacy-a")
    c = registry.get_or_start(task_id="legacy-c", cdp_url=chromium.ws_url)
    assert c.page_target_id() != first, "back to today's owned tab"


# ── navigate_page never waits on a dialog ────────────────────────────────────


def test_navigate_page_returns_at_once_with_the_dialog_and_a_second_wait_completes(
    chromium: Chromium, pages: Pages, registry: _SupervisorRegistry
) -> None:
    sv = registry.get_or_start(task_id="nav-dialog", cdp_url=chromium.ws_url)
    plain = pages.add("hermes-plain", "<title>plain</title>")
    ok = sv.navigate_page(plain)
    assert ok["ok"] is True and ok["target_id"] == sv.page_target_id(), ok
    assert ok["frame_id"] == sv.page_target_id() and ok["loader_id"]

    alerting = pages.add(
        "hermes-alerting", "<title>alerting</title><script>alert('LOADING')</script><p id=after>x</p>"
    )
    t = time.monotonic()
    blocked = sv.navigate_page(alerting, timeout=30.0)
    took = time.monotonic() - t
    assert blocked["ok"] is False, blocked
    assert took < 1.0, took
    assert blocked["dialog"]["type"] == "alert" and blocked["dialog"]["message"] == "LOADING"
    assert blocked["dialog"]["id"] in blocked["error"]
    assert sv.respond_to_dialog("accept")["ok"] is True
    done = sv.wait_for_navigation(10.0)
    assert done["ok"] is True, done
    assert sv.evaluate_runtime("document.getElementById('after').textContent")["result"] == "x"

    # The page being left asks first (beforeunload, after a gesture): at once, too.
    leave = pages.add(
        "hermes-leave",
        "<script>addEventListener('beforeunload', e => { e.preventDefault(); e.returnValue = ''; })</script>",
    )
    assert sv.navigate_page(leave)["ok"] is True
    sv.evaluate_runtime("document.body.click()")
    t = time.monotonic()
    blocked = sv.navigate_page(plain)
    assert time.monotonic() - t < 1.0
    assert blocked["ok"] is False and blocked["dialog"]["type"] == "beforeunload", blocked
    assert sv.respond_to_dialog("accept")["ok"] is True
    assert sv.wait_for_navigation(10.0)["ok"] is True
    assert sv.evaluate_runtime("location.href")["result"] == plain

    # A network error names itself (a port nobody listens on).
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    refused = sv.navigate_page(f"http://127.0.0.1:{port}/")
    assert refused == {"ok": False, "error": "net::ERR_CONNECTION_REFUSED", "target_id": sv.page_target_id()}


# ── Tab references, frame sessions, no session ids ──────────────────────────


def test_page_target_tab_ref_counts_pages_in_get_targets_order_without_devtools(fake: FakeBrowser) -> None:
    registry = _SupervisorRegistry()
    try:
        sv = registry.get_or_start(task_id="tab-ref", cdp_url=fake.ws_url)
        owned = sv.page_target_id()
        fake.set_reply(
            "Target.getTargets",
            {
                "targetInfos": [
                    {"targetId": "DEVTOOLS", "type": "page", "url": "devtools://devtools/bundled/inspector.html"},
                    {"targetId": "WORKER", "type": "service_worker", "url": "http://a/sw.js"},
                    {"targetId": "OTHER", "type": "page", "url": "http://a/"},
                    {"targetId": owned, "type": "page", "url": "about:blank"},
                ]
            },
        )
        assert sv.page_target_tab_ref() == {"ok": True, "target_id": owned, "tab_ref": "t2"}
        fake.set_reply("Target.getTargets", {"targetInfos": []})
        assert sv.page_target_tab_ref()["ok"] is False
    finally:
        registry.stop_all()


def test_tab_ref_on_chromium_and_frame_sessions_stay_out_of_what_an_llm_sees(
    chromium: Chromium, pages: Pages, registry: _SupervisorRegistry
) -> None:
    sv = registry.get_or_start(task_id="tab-ref-chromium", cdp_url=chromium.ws_url)
    listed = [
        t["targetId"]
        for t in targets(chromium)
        if t["type"] == "page" and not t["url"].startswith("devtools://")
    ]
    ref = sv.page_target_tab_ref()
    assert ref == {"ok": True, "target_id": sv.page_target_id(), "tab_ref": f"t{listed.index(sv.page_target_id()) + 1}"}

    inner = pages.add("hermes-frame-inner", "<title>inner</title>").replace("127.0.0.1", "localhost")
    outer = pages.add("hermes-frame-outer", f'<iframe src="{inner}"></iframe>')
    assert sv.navigate_page(outer)["ok"] is True
    deadline = time.monotonic() + 10
    child = None
    while child is None and time.monotonic() < deadline:
        child = next((f for f in sv.snapshot().frame_tree["children"] if f["is_oopif"] and f["url"] == inner), None)
        time.sleep(0.02)
    assert child is not None
    found = sv.get_frame_session(child["frame_id"])
    assert found is not None
    info, session = found
    assert info.frame_id == child["frame_id"] and info.cdp_session_id == session
    top = sv.get_frame_session(sv.page_target_id() or "")
    assert top is not None and top[1] != session, "the page's session for its main frame"
    assert sv.get_frame_session("no-such-frame") is None
    # Nothing an LLM sees names a session.
    seen = json.dumps(
        [sv.snapshot().to_dict(), info.to_dict(), [d.to_dict() for d in sv.snapshot().pending_dialogs]]
        + [json.loads(hermes.browser_cdp("Runtime.evaluate", {"expression": "1"}, frame_id=child["frame_id"], task_id="tab-ref-chromium"))]
    )
    assert session not in seen and "session_id" not in seen, seen


# ── Downloads ────────────────────────────────────────────────────────────────


def test_wait_for_download_returns_the_file_and_says_when_none_is_pending(
    chromium: Chromium, registry: _SupervisorRegistry
) -> None:
    import http.server
    import threading

    payload = bytes(range(256)) * 8

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            if self.path == "/file":
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Disposition", 'attachment; filename="report.bin"')
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return
            body = b'<a id=get href="/file">get</a>'
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        sv = registry.get_or_start(task_id="download", cdp_url=chromium.ws_url)
        assert sv.navigate_page(f"http://127.0.0.1:{server.server_address[1]}/")["ok"] is True
        sv.evaluate_runtime("document.getElementById('get').click()")
        got = sv.wait_for_download(10.0)
        assert got["ok"] is True and got["filename"] == "report.bin" and got["guid"], got
        assert Path(got["path"]).name == "report.bin"
        assert Path(got["path"]).read_bytes() == payload
        t = time.monotonic()
        none = sv.wait_for_download(10.0)
        waited = time.monotonic() - t
        assert none["ok"] is False and "no pending download" in none["error"], none
        assert 1.5 <= waited < 3.0, waited
    finally:
        server.shutdown()
        server.server_close()


# ── File choosers ────────────────────────────────────────────────────────────

UPLOAD_PAGE = (
    "<input type=file id=f><pre id=out></pre><script>"
    "f.onchange = async () => { const x = f.files[0]; out.textContent = x.name + '=' + await x.text(); };"
    "</script>"
)


def test_a_file_chooser_is_answered_with_a_file_the_page_reads(
    chromium: Chromium, pages: Pages, tmp_path: Path
) -> None:
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    (uploads / "hello.txt").write_text("HELLO-HERMES")
    (tmp_path / "secret.txt").write_text("no")
    saved = dict(hermes._model._CONFIG_KWARGS)
    hermes.configure(allow_file_access=True, upload_dirs=[str(uploads)])
    registry = _SupervisorRegistry()
    try:
        sv = registry.get_or_start(task_id="chooser", cdp_url=chromium.ws_url)
        assert sv.navigate_page(pages.add("hermes-upload", UPLOAD_PAGE))["ok"] is True
        sv.evaluate_runtime("f.click()")
        deadline = time.monotonic() + 10
        while not sv.snapshot().pending_dialogs and time.monotonic() < deadline:
            time.sleep(0.02)
        d = sv.snapshot().pending_dialogs[0]
        assert d.type == "file_chooser" and d.id.startswith("fc-")
        assert sv.snapshot().to_dict()["pending_dialogs"][0]["type"] == "file_chooser"
        refused = sv.respond_to_dialog("accept", files=[str(tmp_path / "secret.txt")])
        assert refused["ok"] is False and "security.upload_dirs" in refused["error"], refused
        # Hermes's tool, with files.
        registry_of_tool = hermes.SUPERVISOR_REGISTRY
        registry_of_tool._by_task["chooser"] = sv
        try:
            r = json.loads(browser_dialog(action="accept", files=[str(uploads / "hello.txt")], task_id="chooser"))
        finally:
            registry_of_tool._by_task.pop("chooser", None)
        assert r["success"] is True and r["dialog"]["type"] == "file_chooser", r
        deadline = time.monotonic() + 10
        while sv.evaluate_runtime("out.textContent")["result"] != "hello.txt=HELLO-HERMES":
            assert time.monotonic() < deadline, sv.evaluate_runtime("out.textContent")
            time.sleep(0.05)
    finally:
        tab = [s.page_target_id() for s in registry._by_task.values()]
        registry.stop_all()
        hermes._model._CONFIG_KWARGS.clear()
        hermes._model._CONFIG_KWARGS.update(saved)
        chromium.wait_until_gone([t for t in tab if t is not None])


def test_by_default_a_file_chooser_is_refused_naming_the_option(
    chromium: Chromium, pages: Pages, registry: _SupervisorRegistry, tmp_path: Path
) -> None:
    sv: CDPSupervisor = registry.get_or_start(task_id="chooser-default", cdp_url=chromium.ws_url)
    assert sv.navigate_page(pages.add("hermes-upload-default", UPLOAD_PAGE))["ok"] is True
    sv.evaluate_runtime("f.click()")
    native = sv._native
    assert native is not None
    deadline = time.monotonic() + 10
    while native.snapshot().file_chooser_refused is None:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    refused = native.snapshot().file_chooser_refused
    assert refused is not None and refused["option"] == "security.allow_file_access"
    f = tmp_path / "a.txt"
    f.write_text("a")
    r = sv.respond_to_file_chooser([str(f)])
    assert r["ok"] is False and "security.allow_file_access" in r["error"], r
    assert sv.snapshot().pending_dialogs == (), "nothing pending: the page got no file"

#!/usr/bin/env python3
"""Drives `cdp-supervisor mcp --http` with the official MCP Python SDK over Streamable HTTP.

Usage: mcp_sdk_http_flow.py PATH/TO/cdp-supervisor [MODE ...]

MODEs (default: all three): `auto` (the SDK probes server/discover and must settle on
2026-07-28), `2026-07-28` (pinned, no probe) and `legacy` (initialize, Mcp-Session-Id).

Run by tests/it/mcp_python_sdk.rs with the Python of tests/python/requirements.txt. The flow:

1. The server starts on 127.0.0.1 port 0 with a bearer token in CDP_SUPERVISOR_MCP_TOKEN; the
   URL comes from its stderr. Every client sends the token (`Authorization: Bearer`).
2. Two clients at once (the first two modes), each a whole agent session on one server and
   one launched browser: `browser_connect` without `task_id` gives each a fresh task (the ids
   differ); a call without `task_id` is a tool error naming it; each navigates its own tab to a
   page whose `ask()` calls `prompt()`, the prompt shows in that client's `browser_snapshot`
   and never in the other's (both prompts are pending at the same moment, then each looks),
   each answers with its own text and reads it back from its page, and disconnects.
3. The remaining mode alone, the same flow.
4. SIGTERM: the server exits with status 0 within 2 s, its child processes gone.

Prints `PASS: ...`; any failure raises (exit status 1); setup problems exit 3 with `SETUP:`.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MODES = ("auto", "legacy", "2026-07-28")
EXPECTED_VERSION = {"auto": "2026-07-28", "2026-07-28": "2026-07-28", "legacy": "2025-11-25"}

try:
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.types import CallToolResult, TextContent
except ImportError as e:  # pragma: no cover - setup
    print(f"SETUP: the official MCP SDK is not importable ({e}); pip install -r {HERE / 'requirements.txt'}")
    sys.exit(3)

PINNED = re.search(r"^mcp==(\S+)\s*$", (HERE / "requirements.txt").read_text(), re.MULTILINE)
if not PINNED or metadata.version("mcp") != PINNED.group(1):
    print(f"SETUP: mcp {metadata.version('mcp')} is installed, requirements.txt pins {PINNED and PINNED.group(1)}")
    sys.exit(3)

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>mcp http flow</title></head>
<body><script>
window.r = null;
function ask() { window.r = prompt('Your name?'); return window.r; }
</script></body></html>
""".encode()
T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T0:7.3f}s] {msg}", flush=True)


class PageHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base signature
        pass


def children_of(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat[stat.rfind(")") + 2 :].split()[1])
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {p for p, pp in parents.items() if pp in frontier and p not in found}
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :].split()[0] not in ("Z", "X")


class Agent:
    """One client: an SDK `Client` in one mode, with its own task."""

    def __init__(self, client: Client, mode: str) -> None:
        self.client = client
        self.mode = mode
        self.task = ""

    async def call(self, name: str, args: dict[str, Any], deadline_s: float = 20) -> tuple[bool, dict[str, Any]]:
        with anyio.fail_after(deadline_s):
            res = await self.client.call_tool(name, args)
        assert isinstance(res, CallToolResult), res
        data = res.structured_content
        if data is None:
            texts = [c for c in res.content if isinstance(c, TextContent)]
            data = json.loads(texts[0].text)
        return bool(res.is_error), data

    async def ok(self, name: str, args: dict[str, Any], deadline_s: float = 20) -> dict[str, Any]:
        is_error, data = await self.call(name, args, deadline_s)
        assert not is_error and data.get("success") is not False, f"[{self.mode}] {name} {args}: {data}"
        return data

    async def evaluate(self, page: str, expression: str) -> tuple[bool, Any, dict[str, Any]]:
        args = {
            "task_id": self.task,
            "method": "Runtime.evaluate",
            "target_id": page,
            "params": {"expression": expression, "returnByValue": True},
            "timeout_s": 5,
        }
        is_error, data = await self.call("browser_cdp", args)
        value = ((data.get("result") or {}).get("result") or {}).get("value")
        return is_error, value, data

    async def poll(self, what: str, deadline_s: float, probe) -> Any:
        last: Any = None
        try:
            with anyio.fail_after(deadline_s):
                while True:
                    got, last = await probe()
                    if got is not None:
                        return got
                    await anyio.sleep(0.05)
        except TimeoutError:
            raise AssertionError(f"[{self.mode}] no {what} within {deadline_s} s; last: {last}") from None


async def session(agent: Agent, page_url: str, answer: str, pending: list[str], both_pending: anyio.Event) -> None:
    mode = agent.mode
    version = agent.client.protocol_version
    assert version == EXPECTED_VERSION[mode], f"[{mode}] negotiated {version}, expected {EXPECTED_VERSION[mode]}"
    with anyio.fail_after(10):
        tools = {t.name for t in (await agent.client.list_tools()).tools}
    assert "browser_connect" in tools and "browser_snapshot" in tools, tools

    is_error, data = await agent.call("browser_snapshot", {})
    assert is_error and "task_id" in data.get("error", ""), f"[{mode}] snapshot without task_id: {data}"

    conn = await agent.ok("browser_connect", {}, deadline_s=60)
    agent.task = conn["task_id"]
    page = conn["page_target_id"]
    assert re.fullmatch(r"task-[0-9a-f]{32}", agent.task), conn
    log(f"[{mode}] protocol {version}; browser_connect gave task {agent.task[:13]}..., page {page}")

    nav = await agent.ok(
        "browser_cdp",
        {"task_id": agent.task, "method": "Page.navigate", "target_id": page, "params": {"url": page_url}},
    )
    assert "errorText" not in nav.get("result", {}), nav

    async def loaded():
        is_error, v, data = await agent.evaluate(page, "document.readyState + ' ' + typeof ask")
        return (v if not is_error and v == "complete function" else None), data

    await agent.poll("loaded page", 15, loaded)
    is_error, _, data = await agent.evaluate(page, "ask()")
    assert is_error and "blocked_by_dialog" in data, f"[{mode}] ask(): {data}"

    async def my_prompt():
        is_error, snap = await agent.call("browser_snapshot", {"task_id": agent.task})
        assert not is_error, snap
        found = snap.get("pending_dialogs", [])
        return (found if found else None), snap

    mine = await agent.poll("pending prompt", 10, my_prompt)
    pending.append(mine[0]["id"])
    if len(pending) == 2:
        both_pending.set()
    with anyio.fail_after(30):
        await both_pending.wait()
    # Both prompts are open now: this client still sees exactly its own.
    is_error, snap = await agent.call("browser_snapshot", {"task_id": agent.task})
    ids = [d["id"] for d in snap.get("pending_dialogs", [])]
    assert ids == [mine[0]["id"]], f"[{mode}] sees dialogs {ids}, its own is {mine[0]['id']}; all: {pending}"
    pages = [p.get("target_id") for p in snap.get("pages", [])]
    assert all(p == page for p in pages if p), f"[{mode}] sees pages {pages}, its own is {page}"

    got = await agent.ok(
        "browser_dialog", {"task_id": agent.task, "action": "accept", "prompt_text": answer, "dialog_id": ids[0]}
    )
    assert got.get("action") == "accept", got

    async def answered():
        is_error, v, data = await agent.evaluate(page, "window.r")
        return (v if not is_error and v is not None else None), data

    value = await agent.poll("window.r", 10, answered)
    assert value == answer, f"[{mode}] the page read {value!r}, expected {answer!r}"
    bye = await agent.ok("browser_disconnect", {"task_id": agent.task})
    assert bye.get("stopped") is True, bye
    log(f"[{mode}] prompt answered {answer!r} and read back; disconnected")


async def run_agents(url: str, token: str, modes: list[str], page_url: str) -> None:
    async with anyio.create_task_group() as tg:
        pending: list[str] = []
        both = anyio.Event()
        if len(modes) == 1:
            both.set()
        for i, mode in enumerate(modes):

            async def one(mode: str = mode, i: int = i) -> None:
                http = httpx2.AsyncClient(
                    headers={"Authorization": f"Bearer {token}"},
                    timeout=httpx2.Timeout(30, read=300),
                )
                async with http:
                    transport = streamable_http_client(url, http_client=http)
                    async with Client(transport, mode=mode) as client:
                        await session(Agent(client, mode), page_url, f"Zoë-{mode}-{i}", pending, both)

            tg.start_soon(one)


def start_server(binary: str, token: str) -> tuple[subprocess.Popen[bytes], str, list[str]]:
    env = {k: os.environ[k] for k in ("CHROME", "TMPDIR", "PATH", "RUST_LOG") if os.environ.get(k)}
    env["CDP_SUPERVISOR_MCP_TOKEN"] = token
    proc = subprocess.Popen(
        [binary, "mcp", "--http", "127.0.0.1:0"], stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
    )
    lines: list[str] = []
    found: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode(errors="replace").rstrip()
            lines.append(line)
            if not found and (m := re.search(r"(http://\S+/mcp)", line)):
                found.append(m.group(1))

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + 10
    while not found and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    if not found:
        proc.kill()
        raise AssertionError(f"the server printed no URL; stderr: {lines}")
    return proc, found[0], lines


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    binary = sys.argv[1]
    modes = sys.argv[2:] or list(MODES)
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        print(f"unknown modes {unknown}; use {MODES}")
        return 2
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), PageHandler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    page_url = f"http://127.0.0.1:{httpd.server_address[1]}/"
    token = secrets.token_urlsafe(24)
    proc, url, stderr = start_server(binary, token)
    log(f"server at {url}")
    try:
        together, alone = modes[:2], modes[2:]
        anyio.run(run_agents, url, token, together, page_url)
        log(f"{' and '.join(together)} ran at once on one server, each seeing only its own task")
        for mode in alone:
            anyio.run(run_agents, url, token, [mode], page_url)
        started = children_of(proc.pid)
        t = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        status = proc.wait(timeout=10)
        took = time.monotonic() - t
        assert status == 0, f"the server exited with {status}"
        assert took < 2, f"the server took {took:.2f} s to exit after SIGTERM"
        deadline = time.monotonic() + 5
        while (left := {p for p in started if alive(p)}) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not left, f"processes the server started outlived it: {sorted(left)}"
        leaked = [line for line in stderr if token in line]
        assert not leaked, "the token appeared on the server's stderr"
        log(f"SIGTERM: exited 0 in {took * 1000:.0f} ms, its {len(started)} child processes gone")
    except BaseException:
        if proc.poll() is None:
            proc.kill()
        print("--- server stderr (tail) ---\n" + "\n".join(stderr[-60:]) + "\n--- end ---", flush=True)
        raise
    finally:
        httpd.shutdown()
    print(
        f"PASS: official MCP Python SDK mcp=={metadata.version('mcp')} over Streamable HTTP with a bearer "
        f"token, modes {', '.join(modes)} ({' and '.join(together)} at once on one browser, each seeing only "
        f"its own task), prompts answered and read back, SIGTERM exit in {took * 1000:.0f} ms",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

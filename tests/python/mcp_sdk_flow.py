#!/usr/bin/env python3
"""Drives `cdp-supervisor mcp` with the official MCP Python SDK, as an agent host would.

Usage: mcp_sdk_flow.py PATH/TO/cdp-supervisor [--mode session|legacy|auto|2026-07-28]

Run by tests/it/mcp_python_sdk.rs (the README's `cargo test`) with a Python that has the `mcp` pinned
in requirements.txt beside this file. The mode says how the SDK connects:

* `session` (default): `stdio_client` + `ClientSession.initialize()`, the SDK's low-level legacy path.
* `legacy`, `auto`, `2026-07-28`: `mcp.Client(StdioServerParameters(...), mode=MODE)`, the SDK's
  high-level client (mcp 2.3.0 spells it exactly so). `legacy` forces the `initialize` handshake
  (negotiates 2025-11-25); `auto` probes `server/discover` first and must stay on 2026-07-28 (a
  server that does not answer the probe makes the SDK fall back to `initialize`); `2026-07-28`
  adopts that version without a probe. The 2026-07-28 modes also check: `server/discover` names
  every supported version (and an unknown version gets -32022 naming them), `ping` is gone
  (-32601), the cache hints on `tools/list` (the SDK validates the 2026-07-28 result shapes itself),
  a `subscriptions/listen` stream on the task's resource (`cdp-supervisor://tasks/default`) that
  reports the prompt opening and the task ending, with `resources/read` showing it, and the
  request-scoped log of the prompt (the client asks for logs with `log_level`).

The flow, in every mode:

1. Connect; `tools/list`: the five tools are there; each entry re-validates as the SDK's `Tool`
   type, and its `inputSchema` (and `outputSchema`, when present) is a valid JSON Schema (the
   `jsonschema` the SDK itself uses). Every later call's arguments are validated against the
   inputSchema, and the SDK validates every successful `structuredContent` against the
   outputSchema by itself.
2. A page served from `http.server` on 127.0.0.1 whose `ask()` calls `prompt('Your name?')`.
3. `browser_connect` without `cdp_url` (the server launches Chromium), `browser_cdp`
   `Page.navigate` to the page with `target_id` = `page_target_id`, wait for `readyState`.
4. `browser_cdp Runtime.evaluate ask()` with `timeout_s: 5`: a dialog-aware server fails it at
   once with `blocked_by_dialog`; an older one ends it at `timeout_s`. Both are accepted; the
   prompt must then show in `browser_snapshot`'s `pending_dialogs`.
5. `browser_dialog accept` with `prompt_text: "Zoë"`; `window.r` is then "Zoë" in the page.
6. `browser_disconnect`, the session closes, and the server exits by itself (status 0, within
   the SDK's 2 s grace after its stdin closes, before the SDK would signal it), with every process
   it started.

Every wait has a deadline (`anyio.fail_after`). Prints `PASS: ...` at the end; any failure raises
(exit status 1). Setup problems (no `mcp`, wrong version) exit with status 3 and a `SETUP:` line.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import threading
import time
from contextlib import AsyncExitStack, asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def pinned_mcp_version() -> str:
    text = (HERE / "requirements.txt").read_text(encoding="utf-8")
    m = re.search(r"^mcp==(\S+)\s*$", text, re.MULTILINE)
    if not m:
        raise SystemExit("SETUP: requirements.txt pins no mcp==VERSION")
    return m.group(1)


try:
    import anyio
    import jsonschema
    import mcp.client.stdio as sdk_stdio
    from jsonschema.validators import validator_for
    from mcp import Client, ClientSession, MCPError, StdioServerParameters, stdio_client
    from mcp.client.subscriptions import ResourceUpdated
    from mcp.types import CallToolResult, DiscoverResult, TextContent, Tool
except ImportError as e:  # pragma: no cover - setup
    print(f"SETUP: the official MCP SDK is not importable ({e}); pip install -r {HERE / 'requirements.txt'}")
    sys.exit(3)

MCP_VERSION = metadata.version("mcp")
if MCP_VERSION != pinned_mcp_version():
    print(f"SETUP: mcp {MCP_VERSION} is installed, requirements.txt pins {pinned_mcp_version()}")
    sys.exit(3)

TOOLS = {"browser_connect", "browser_snapshot", "browser_dialog", "browser_cdp", "browser_disconnect"}
MODES = ("session", "legacy", "auto", "2026-07-28")
MODERN = "2026-07-28"
SUPPORTED = ["2026-07-28", "2025-11-25", "2025-06-18", "2024-11-05"]
TASK_URI = "cdp-supervisor://tasks/default"
ANSWER = "Zoë"
PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>mcp sdk flow</title></head>
<body>
<button id="ask" onclick="ask()">Ask my name</button>
<script>
window.r = null;
function ask() { window.r = prompt('Your name?'); return window.r; }
</script>
</body></html>
""".encode()


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T0:7.3f}s] {msg}", flush=True)


T0 = time.monotonic()


# ----------------------------------------------------------------------------------------------
# The page.


class PageHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        if self.path.split("?")[0] != "/":
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base signature
        pass


def serve_page() -> tuple[ThreadingHTTPServer, str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), PageHandler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, name="page-server", daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}/"


# ----------------------------------------------------------------------------------------------
# Processes (/proc): the server's descendants, so that its exit can be checked to take them along.


def ppid_and_state(pid: int) -> tuple[int, str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = stat[stat.rfind(")") + 2 :].split()
    return int(rest[1]), rest[0]


def descendants(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (ps := ppid_and_state(int(entry))) is not None:
            parents[int(entry)] = ps[0]
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier and pid not in found}
        found |= frontier
    return found


def alive(pid: int) -> bool:
    ps = ppid_and_state(pid)
    return ps is not None and ps[1] not in ("Z", "X")


# The SDK does not hand out the server's process; wrap its spawn helper (pinned SDK version) to
# keep it, so the exit status can be checked once `stdio_client` has closed.
SPAWNED: list[Any] = []
_spawn = sdk_stdio._create_platform_compatible_process  # noqa: SLF001


async def _recording_spawn(*args: Any, **kwargs: Any) -> Any:
    process = await _spawn(*args, **kwargs)
    SPAWNED.append(process)
    return process


sdk_stdio._create_platform_compatible_process = _recording_spawn  # noqa: SLF001


# ----------------------------------------------------------------------------------------------
# Tool calls.


class Tools:
    def __init__(self, session: ClientSession, listed: dict[str, Tool]) -> None:
        self.session = session
        self.input_validators = {
            name: validator_for(t.input_schema)(t.input_schema) for name, t in listed.items()
        }

    async def call(self, name: str, args: dict[str, Any], deadline_s: float) -> tuple[bool, dict[str, Any]]:
        """tools/call; returns (isError, the tool's JSON). The arguments must match inputSchema;
        the SDK checks a successful result against outputSchema itself (RuntimeError if not)."""
        self.input_validators[name].validate(args)
        with anyio.fail_after(deadline_s):
            res = await self.session.call_tool(name, args)
        assert isinstance(res, CallToolResult), res
        texts = [c for c in res.content if isinstance(c, TextContent)]
        assert texts, f"{name}: no text content: {res}"
        data = res.structured_content
        if data is None:
            data = json.loads(texts[0].text)
        assert isinstance(data, dict), f"{name}: result is not an object: {data!r}"
        return bool(res.is_error), data

    async def ok(self, name: str, args: dict[str, Any], deadline_s: float = 15.0) -> dict[str, Any]:
        is_error, data = await self.call(name, args, deadline_s)
        assert not is_error and data.get("success") is not False, f"{name} {args} failed: {data}"
        return data

    async def evaluate(self, page: str, expression: str, timeout_s: float = 5) -> tuple[bool, dict[str, Any]]:
        return await self.call(
            "browser_cdp",
            {
                "method": "Runtime.evaluate",
                "target_id": page,
                "params": {"expression": expression, "returnByValue": True},
                "timeout_s": timeout_s,
            },
            timeout_s + 10,
        )

    async def poll(self, what: str, deadline_s: float, probe) -> Any:
        """Calls `probe()` (async, returns a value or None) until it returns a value."""
        last: Any = None
        try:
            with anyio.fail_after(deadline_s):
                while True:
                    got, last = await probe()
                    if got is not None:
                        return got
                    await anyio.sleep(0.05)
        except TimeoutError:
            raise AssertionError(f"no {what} within {deadline_s} s; last seen: {last}") from None


def value_of(data: dict[str, Any]) -> Any:
    return ((data.get("result") or {}).get("result") or {}).get("value")


# ----------------------------------------------------------------------------------------------
# The flow.


@asynccontextmanager
async def connected(mode: str, params: StdioServerParameters, errlog, on_log):
    """The SDK connected to the server in `mode`: yields (session, client or None)."""
    if mode == "session":
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write, logging_callback=on_log) as session:
                with anyio.fail_after(10):
                    init = await session.initialize()
                log(
                    f"initialize: {init.server_info.name} {init.server_info.version}, protocol "
                    f"{init.protocol_version}, capabilities {init.capabilities.model_dump(exclude_none=True)}"
                )
                assert init.capabilities.tools is not None, "the server declares no tools capability"
                assert init.server_info.name == "cdp-supervisor", init.server_info
                with anyio.fail_after(10):
                    await session.send_ping()
                yield session, None
        return
    # Ask for request-scoped logs (2026-07-28); no effect on a legacy connection. Each request of
    # the SDK is bounded by read_timeout_seconds (the flow as a whole by main's deadline): a
    # fail_after around `async with client` would cross the cancel scopes the client opens.
    client = Client(params, mode=mode, logging_callback=on_log, log_level="warning", read_timeout_seconds=30)
    # stdio_client takes errlog; Client builds it from the parameters alone, so swap in ours.
    client._connect = _stdio_connector(params, errlog)  # noqa: SLF001
    async with client:
        version = client.protocol_version
        caps = client.server_capabilities.model_dump(exclude_none=True)
        log(f"mcp.Client(mode={mode!r}): protocol {version}, server {client.server_info}, capabilities {caps}")
        if mode != MODERN:
            # `auto` and `legacy` learnt these from the server (discover / initialize); a pinned
            # version adopts a DiscoverResult the SDK makes up itself, so there is nothing to check.
            assert client.server_info is not None and client.server_info.name == "cdp-supervisor", client.server_info
            assert client.server_capabilities.tools is not None, caps
            assert "browser_connect" in (client.instructions or ""), client.instructions
        if mode == "legacy":
            assert version == "2025-11-25", version
            with anyio.fail_after(10):
                await client.session.send_ping()
        else:
            assert version == MODERN, f"mode={mode!r} negotiated {version}"
            await modern_protocol_checks(client, mode)
        yield client.session, client


def _stdio_connector(params: StdioServerParameters, errlog):
    from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

    async def connect(exit_stack, _mode, _raise_exceptions):
        read, write = await exit_stack.enter_async_context(stdio_client(params, errlog=errlog))
        return JSONRPCDispatcher(read, write)

    return connect


async def modern_protocol_checks(client: Client, mode: str) -> None:
    session = client.session
    if mode == "auto":
        found = session.discover_result
        assert found is not None, "auto mode adopted no DiscoverResult: the SDK fell back to initialize"
        assert found.supported_versions == SUPPORTED, found
    with anyio.fail_after(10):
        raw = await session.send_discover(MODERN)
    found = DiscoverResult.model_validate(raw)
    assert found.supported_versions == SUPPORTED, raw
    assert found.result_type == "complete" and found.ttl_ms > 0 and found.cache_scope == "public", raw
    assert found.capabilities.resources is not None and found.capabilities.resources.subscribe, raw
    assert raw["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "cdp-supervisor", raw
    try:
        with anyio.fail_after(10):
            await session.send_discover("1900-01-01")
        raise AssertionError("an unknown protocol version was served")
    except MCPError as e:
        assert e.code == -32022, e.error
        assert e.error.data == {"supported": SUPPORTED, "requested": "1900-01-01"}, e.error
    try:
        with anyio.fail_after(10):
            await session.send_ping()
        raise AssertionError("ping answered on a 2026-07-28 request")
    except MCPError as e:
        assert e.code == -32601, e.error
    with anyio.fail_after(10):
        listed = await client.list_tools(cache_mode="bypass")
    assert listed.ttl_ms is not None and listed.ttl_ms > 0 and listed.cache_scope == "public", listed
    log(f"server/discover: {found.supported_versions}; -32022 names them; ping -32601; tools/list ttlMs {listed.ttl_ms}")


async def next_update(sub, what: str, deadline_s: float = 10.0) -> ResourceUpdated:
    try:
        with anyio.fail_after(deadline_s):
            event = await sub.__anext__()
    except TimeoutError:
        raise AssertionError(f"no resources/updated for {what} within {deadline_s} s") from None
    assert isinstance(event, ResourceUpdated) and event.uri == TASK_URI, event
    return event


async def read_task(client: Client) -> dict[str, Any]:
    with anyio.fail_after(10):
        res = await client.read_resource(TASK_URI, cache_mode="bypass")
    assert res.contents and res.contents[0].uri == TASK_URI, res
    return json.loads(res.contents[0].text)


async def flow(binary: str, page_url: str, errlog, mode: str) -> str:
    env = {k: os.environ[k] for k in ("CHROME", "TMPDIR", "RUST_LOG") if os.environ.get(k)}
    params = StdioServerParameters(command=binary, args=["mcp"], env=env)
    pushed: list[str] = []

    async def on_log(p) -> None:  # notifications/message, when the server sends them
        pushed.append(f"{p.level}: {p.data}")

    server_pid: int | None = None
    started: set[int] = set()
    async with AsyncExitStack() as stack:
        session, client = await stack.enter_async_context(connected(mode, params, errlog, on_log))
        with anyio.fail_after(10):
            listed = (await session.list_tools()).tools
        names = {t.name for t in listed}
        assert TOOLS <= names, f"tools/list lacks {TOOLS - names}: {names}"
        for t in listed:
            Tool.model_validate(t.model_dump(by_alias=True, exclude_none=True))
            assert t.input_schema.get("type") == "object", f"{t.name}: inputSchema is not an object schema"
            validator_for(t.input_schema).check_schema(t.input_schema)
            if t.output_schema is not None:
                assert t.output_schema.get("type") == "object", f"{t.name}: outputSchema type"
                validator_for(t.output_schema).check_schema(t.output_schema)
        with_output = sorted(t.name for t in listed if t.output_schema is not None)
        log(f"tools/list: {sorted(names)}; schemas valid; outputSchema on {with_output or 'none'}")
        tools = Tools(session, {t.name: t for t in listed})
        try:
            tools.input_validators["browser_dialog"].validate({"action": "maybe"})
            raise AssertionError("browser_dialog's inputSchema accepts action 'maybe'")
        except jsonschema.ValidationError:
            pass

        # Connect: the server launches Chromium.
        conn = await tools.ok("browser_connect", {}, deadline_s=60)
        page = conn.get("page_target_id")
        assert isinstance(page, str) and page, f"browser_connect gave no page_target_id: {conn}"
        server_pid = SPAWNED[-1].pid
        started = descendants(server_pid)
        log(f"browser_connect: page {page}; the server runs {len(started)} child processes")

        sub = None
        if client is not None and mode != "legacy":
            sub = await stack.enter_async_context(client.listen(resource_subscriptions=[TASK_URI]))
            assert sub.honored.resource_subscriptions == [TASK_URI], sub.honored
            log(f"subscriptions/listen {sub.subscription_id}: honored {sub.honored.model_dump(exclude_none=True)}")

        nav = await tools.ok(
            "browser_cdp", {"method": "Page.navigate", "target_id": page, "params": {"url": page_url}}
        )
        assert "errorText" not in nav.get("result", {}), f"navigation failed: {nav}"

        async def loaded():
            is_error, data = await tools.evaluate(page, "document.readyState + ' ' + typeof ask")
            v = None if is_error else value_of(data)
            return (v if v == "complete function" else None), data

        await tools.poll("loaded page", 15, loaded)
        log(f"navigated to {page_url}; loaded")

        # The prompt.
        t = time.monotonic()
        is_error, data = await tools.evaluate(page, "ask()", timeout_s=5)
        took = time.monotonic() - t
        assert is_error, f"ask() returned without a dialog: {data}"
        if "blocked_by_dialog" in data:
            blocked = data["blocked_by_dialog"]
            assert blocked.get("type") == "prompt" and blocked.get("message") == "Your name?", data
            assert "browser_dialog" in data.get("error", ""), data
            outcome = f"blocked_by_dialog in {took * 1000:.0f} ms"
        else:
            outcome = f"no blocked_by_dialog (old server): failed after {took:.1f} s: {data.get('error')}"
        log(f"Runtime.evaluate ask(): {outcome}")

        if client is not None:
            # The prompt reached the client as a log message: a request-scoped one on 2026-07-28
            # (it opened during the call, which asked for warnings), a standing one on legacy.
            async def logged():
                found = [m for m in pushed if "dialog_opened" in m and "Your name?" in m]
                return (found[0] if found else None), pushed

            note = await tools.poll("dialog_opened log message", 10, logged)
            log(f"log message: {note[:100]}...")
        if sub is not None:
            await next_update(sub, "the prompt")
            view = await read_task(client)
            found = [d for d in view.get("pending_dialogs", []) if d.get("message") == "Your name?"]
            assert found, f"resources/read after the update shows no prompt: {view}"
            log(f"resources/updated {TASK_URI}; resources/read shows the pending prompt {found[0]['id']}")

        async def prompt_pending():
            is_error, snap = await tools.call("browser_snapshot", {}, 10)
            assert not is_error, snap
            found = [d for d in snap.get("pending_dialogs", []) if d.get("message") == "Your name?"]
            return (found[0] if found else None), snap

        dialog = await tools.poll("pending prompt in browser_snapshot", 10, prompt_pending)
        assert dialog["type"] == "prompt", dialog
        log(f"browser_snapshot: pending {dialog['type']} {dialog['id']} {dialog['message']!r}")

        answered = await tools.ok(
            "browser_dialog", {"action": "accept", "prompt_text": ANSWER, "dialog_id": dialog["id"]}
        )
        assert answered.get("success") is True and answered.get("action") == "accept", answered
        assert answered.get("dialog", {}).get("id") == dialog["id"], answered
        log(f"browser_dialog: accepted {dialog['id']} with {ANSWER!r}")

        async def page_got_answer():
            is_error, data = await tools.evaluate(page, "window.r")
            return (value_of(data) if not is_error and value_of(data) is not None else None), data

        got = await tools.poll("window.r", 10, page_got_answer)
        assert got == ANSWER, f"prompt() returned {got!r} in the page, expected {ANSWER!r}"
        log(f"the page's prompt() returned {got!r}")

        snap = await tools.ok("browser_snapshot", {})
        assert not snap.get("pending_dialogs"), f"a dialog is still pending: {snap}"

        bye = await tools.ok("browser_disconnect", {})
        log(f"browser_disconnect: {bye}")
        is_error, after = await tools.call("browser_snapshot", {}, 10)
        assert is_error, f"browser_snapshot after disconnect: {after}"
        if sub is not None:
            # The end of the task reaches the listener (after the dialog's own updates).
            while True:
                await next_update(sub, "the end of the task")
                view = await read_task(client)
                if view.get("success") is False:
                    break
            log(f"resources/updated: the task ended; resources/read says {view.get('error')!r}")
        started |= descendants(server_pid)
        # Leaving closes the session, then stdio_client closes the server's stdin and waits for it.
        t_close = time.monotonic()
    closed_in = time.monotonic() - t_close

    process = SPAWNED[-1]
    assert process.returncode is not None, "the server is still running after the client closed"
    assert closed_in < sdk_stdio.PROCESS_TERMINATION_TIMEOUT, (
        f"the server took {closed_in:.2f} s to exit after its stdin closed: the SDK had to kill it"
    )
    assert process.returncode == 0, f"the server exited with status {process.returncode}"
    try:
        with anyio.fail_after(5):
            while left := {p for p in started if alive(p)}:
                await anyio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"processes the server started outlived it: {sorted(left)}") from None
    log(f"server exited with status 0, {closed_in * 1000:.0f} ms after its stdin closed; its {len(started)} "
        f"child processes are gone; {len(pushed)} log notifications received")
    return outcome


def main() -> int:
    args = sys.argv[1:]
    mode = "session"
    if len(args) == 3 and args[1] == "--mode" and args[2] in MODES:
        mode = args[2]
        args = args[:1]
    if len(args) != 1:
        print(__doc__)
        return 2
    binary = args[0]
    httpd, page_url = serve_page()
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as errlog:
        try:

            async def bounded() -> str:
                with anyio.fail_after(120):
                    return await flow(binary, page_url, errlog, mode)

            outcome = anyio.run(bounded)
        except BaseException:
            errlog.seek(0)
            tail = errlog.read()[-6000:]
            print(f"--- server stderr (tail) ---\n{tail}--- end of server stderr ---", flush=True)
            raise
        finally:
            httpd.shutdown()
    how = "ClientSession.initialize()" if mode == "session" else f"mcp.Client(mode={mode!r})"
    print(
        f"PASS: official MCP Python SDK mcp=={MCP_VERSION} (Python {sys.version.split()[0]}) drove "
        f"cdp-supervisor mcp through {how}: connect, tools/list schemas, browser_connect, prompt "
        f"({outcome}) answered {ANSWER!r}, disconnect, clean exit",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``cdp_supervisor.tools`` returns the very text of the MCP server's tool results: the same
calls (``tests/tool_calls/calls.json``, which ``tests/it/tools_everywhere.rs`` also runs through
the Rust library functions and both transports in process) through ``cdp-supervisor mcp`` (this
repository's binary) on stdio and over Streamable HTTP, and through the Python functions, all
attached to one fake browser's page, compared character for character.

The binary is ``$CDP_SUPERVISOR_BIN``, else ``target/debug/cdp-supervisor`` or
``target/release/cdp-supervisor`` of this checkout (``cargo test`` builds the first; CI runs it
first). Without one the test skips, and fails under ``CDP_SUPERVISOR_E2E=require``.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest

from cdp_supervisor import SupervisorRegistry, tools
from cdp_supervisor.testing import FakeBrowser
from conftest import E2E_REQUIRED

REPO = Path(__file__).resolve().parents[3]
CALLS = REPO / "tests" / "tool_calls" / "calls.json"


def find_binary() -> Optional[str]:
    configured = os.environ.get("CDP_SUPERVISOR_BIN")
    if configured:
        return configured
    target = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
    for profile in ("debug", "release"):
        candidate = target / profile / "cdp-supervisor"
        if candidate.is_file():
            return str(candidate)
    return None


class Mcp:
    """`cdp-supervisor mcp` on pipes, after the handshake."""

    def __init__(self, binary: str) -> None:
        self.proc = subprocess.Popen(
            [binary, "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.next_id = 0
        self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "cdp_supervisor pytest", "version": "0"},
            },
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, msg: Dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: Dict[str, Any]) -> Dict[str, Any]:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            assert line, "the server ended"
            msg: Dict[str, Any] = json.loads(line)
            if msg.get("id") == self.next_id:
                return msg

    def tool_text(self, name: str, arguments: Dict[str, Any]) -> str:
        result = self.request("tools/call", {"name": name, "arguments": arguments})["result"]
        content: List[Dict[str, Any]] = result["content"]
        return str(content[0]["text"])

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class McpHttp:
    """`cdp-supervisor mcp --http 127.0.0.1:0`, its address read from stderr; 2026-07-28 POSTs."""

    def __init__(self, binary: str) -> None:
        self.proc = subprocess.Popen(
            [binary, "mcp", "--http", "127.0.0.1:0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stderr is not None
        found = threading.Event()
        self.addr = ""

        def read_stderr() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                if not found.is_set() and "MCP over HTTP at http://" in line:
                    self.addr = line.split("http://", 1)[1].split("/", 1)[0]
                    found.set()

        threading.Thread(target=read_stderr, daemon=True).start()
        if not found.wait(timeout=30):
            self.close()
            raise AssertionError("mcp --http printed no address")

    def tool_text(self, name: str, arguments: Dict[str, Any]) -> str:
        host, port = self.addr.rsplit(":", 1)
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        body = json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
             "params": {"name": name, "arguments": arguments, "_meta": meta}}
        )
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            conn.request(
                "POST",
                "/mcp",
                body=body,
                headers={
                    "Content-Type": "application/json",
                    "Accept": "application/json, text/event-stream",
                    "MCP-Protocol-Version": "2026-07-28",
                    "Mcp-Method": "tools/call",
                    "Mcp-Name": name,
                },
            )
            response = conn.getresponse()
            text = response.read().decode()
        finally:
            conn.close()
        assert response.status == 200, text
        content: List[Dict[str, Any]] = json.loads(text)["result"]["content"]
        return str(content[0]["text"])

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def require_binary() -> str:
    binary = find_binary()
    if binary is None:
        message = "SKIPPED: no cdp-supervisor binary (run cargo test or cargo build first)"
        if E2E_REQUIRED:
            pytest.fail(f"{message}, and CDP_SUPERVISOR_E2E=require")
        print(message, file=sys.stderr)
        pytest.skip(message)
    return binary


@pytest.fixture
def mcp() -> Iterator[Mcp]:
    server = Mcp(require_binary())
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def mcp_http() -> Iterator[McpHttp]:
    server = McpHttp(require_binary())
    try:
        yield server
    finally:
        server.close()


def test_the_tools_text_is_the_mcp_servers(
    fake: FakeBrowser, mcp: Mcp, mcp_http: McpHttp, registry: SupervisorRegistry
) -> None:
    # On the fake's page, as the registry's task below (the server would give a task of its own a
    # new page, whose snapshot then differs).
    for server in (mcp, mcp_http):
        connected = json.loads(
            server.tool_text(
                "browser_connect",
                {"cdp_url": fake.ws_url, "task_id": "t", "target_id": fake.page_target_id},
            )
        )
        assert connected["success"] is True, connected
    registry.get_or_start("t", fake.ws_url)
    listed = json.loads(CALLS.read_text())
    assert len(listed) >= 20, "calls.json lost its calls"
    calls: List[Dict[str, Any]] = [{"name": n, "arguments": a} for n, a in listed]
    calls.append({"name": "browser_dialog", "arguments": {"task_id": "t", "action": "accept"}})
    calls.append({"name": "browser_snapshot", "arguments": {"task_id": 7}})
    for call in calls:
        ours = tools.call(registry, call["name"], call["arguments"])
        assert mcp.tool_text(call["name"], call["arguments"]) == ours, ("stdio", call)
        if isinstance(call["arguments"].get("task_id"), str):
            # (A task_id that is no string is refused by each transport's own task rule.)
            assert mcp_http.tool_text(call["name"], call["arguments"]) == ours, ("HTTP", call)

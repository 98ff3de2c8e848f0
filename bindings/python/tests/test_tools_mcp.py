"""``cdp_supervisor.tools`` returns the very text of the MCP server's tool results: the same
calls through ``cdp-supervisor mcp`` (this repository's binary, on stdio) and through the
Python functions, both attached to one fake browser's page, compared character for character.

The binary is ``$CDP_SUPERVISOR_BIN``, else ``target/debug/cdp-supervisor`` or
``target/release/cdp-supervisor`` of this checkout (``cargo test`` builds the first; CI runs it
first). Without one the test skips, and fails under ``CDP_SUPERVISOR_E2E=require``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest

from cdp_supervisor import SupervisorRegistry, tools
from cdp_supervisor.testing import FakeBrowser
from conftest import E2E_REQUIRED

REPO = Path(__file__).resolve().parents[3]


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


@pytest.fixture
def mcp() -> Iterator[Mcp]:
    binary = find_binary()
    if binary is None:
        message = "SKIPPED: no cdp-supervisor binary (run cargo test or cargo build first)"
        if E2E_REQUIRED:
            pytest.fail(f"{message}, and CDP_SUPERVISOR_E2E=require")
        print(message, file=sys.stderr)
        pytest.skip(message)
    server = Mcp(binary)
    try:
        yield server
    finally:
        server.close()


def test_the_tools_text_is_the_mcp_servers(fake: FakeBrowser, mcp: Mcp, registry: SupervisorRegistry) -> None:
    # On the fake's page, as the registry's task below (the server would give a task of its own a
    # new page, whose snapshot then differs).
    connected = json.loads(
        mcp.tool_text(
            "browser_connect",
            {"cdp_url": fake.ws_url, "task_id": "t", "target_id": fake.page_target_id},
        )
    )
    assert connected["success"] is True, connected
    registry.get_or_start("t", fake.ws_url)
    calls: List[Dict[str, Any]] = [
        {"name": "browser_snapshot", "arguments": {"task_id": "t"}},
        {"name": "browser_snapshot", "arguments": {"task_id": "nobody"}},
        {"name": "browser_snapshot", "arguments": {"task_id": "t", "target_id": "nope"}},
        {"name": "browser_snapshot", "arguments": {"task_id": 7}},
        {"name": "browser_dialog", "arguments": {"task_id": "t", "action": "accept"}},
        {"name": "browser_dialog", "arguments": {"task_id": "t", "action": "eat"}},
        {"name": "browser_dialog", "arguments": {"task_id": "t"}},
        {"name": "browser_cdp", "arguments": {"task_id": "t", "method": "Browser.getVersion"}},
        {"name": "browser_cdp", "arguments": {"task_id": "t", "method": "Nope.nothing"}},
        {"name": "browser_cdp", "arguments": {"task_id": "t", "method": "Runtime.evaluate", "frame_id": "x"}},
        {"name": "browser_cdp", "arguments": {"task_id": "t", "method": "Page.navigate", "params": {"url": "file:///etc/passwd"}}},
        {"name": "browser_cdp", "arguments": {"task_id": "t", "method": "Browser.getVersion", "targetId": "x"}},
        {"name": "browser_cdp", "arguments": {"task_id": "t", "params": []}},
        {"name": "browser_cdp", "arguments": {"task_id": "nobody", "method": "Browser.getVersion"}},
    ]
    for call in calls:
        ours = tools.call(registry, call["name"], call["arguments"])
        theirs = mcp.tool_text(call["name"], call["arguments"])
        assert ours == theirs, call

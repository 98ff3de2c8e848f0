"""Hostile values given to the binding (issue 35, issue 28 item 7): values nested in lists by
mistake or on purpose, huge strings, lists that contain themselves. Each is refused with an
exception whose message stays under 1 KiB, never a crash, a stack overflow or a message that
grows with the nesting (depth 23 used to give a 16 MiB message, depth 30 aborted, and 100,000
deep overflowed the stack)."""

from __future__ import annotations

import json
from typing import Any, Dict, List

import pytest

import cdp_supervisor
from cdp_supervisor import (
    CdpSupervisorError,
    Config,
    ConfigError,
    InvalidArgument,
    InvalidConfig,
    SupervisorRegistry,
    tools,
)
from cdp_supervisor.testing import FakeBrowser

KIB = 1024


def nested_list(depth: int) -> Any:
    v: Any = "x"
    for _ in range(depth):
        v = [v]
    return v


def nested_dict(depth: int) -> Any:
    v: Any = "x"
    for _ in range(depth):
        v = {"k": v}
    return v


def nested_tuple(depth: int) -> Any:
    v: Any = "x"
    for _ in range(depth):
        v = (v,)
    return v


def test_a_list_nested_30_or_10000_deep_is_a_short_config_error() -> None:
    for depth in (23, 30, 10_000):
        with pytest.raises(ConfigError) as e:
            Config(cdp_deny=nested_list(depth))
        assert len(str(e.value)) < KIB, depth
        assert e.value.key == "security.cdp_deny[0]"
        assert e.value.value == "a list"
        assert "security.cdp_deny[0] is a list; expected a CDP method pattern" in str(e.value)


def test_the_same_lists_as_toml_are_short_errors_too() -> None:
    def toml(depth: int) -> str:
        return "[security]\ncdp_deny = " + "[" * depth + '"x"' + "]" * depth

    with pytest.raises(ConfigError) as e:
        Config.from_toml(toml(30))
    assert len(str(e.value)) < KIB and e.value.key == "security.cdp_deny[0]"
    # Deeper than the TOML parser goes (80): a readable "cannot read" with the line clipped.
    with pytest.raises(InvalidConfig) as f:
        Config.from_toml(toml(10_000))
    assert len(str(f.value)) < KIB, len(str(f.value))
    assert "line 2" in str(f.value)


def test_every_keyword_refuses_100000_deep_nesting_without_a_crash() -> None:
    keywords: List[str] = list(cdp_supervisor._native.CONFIG_KEYWORDS)
    assert "cdp_deny" in keywords and "dialog_policy" in keywords
    cyclic: List[Any] = []
    cyclic.append(cyclic)
    values: Dict[str, Any] = {
        "list": nested_list(100_000),
        "dict": nested_dict(100_000),
        "tuple": nested_tuple(100_000),
        "list that contains itself": cyclic,
    }
    for keyword in keywords:
        for what, value in values.items():
            with pytest.raises(ConfigError) as e:
                Config(**{keyword: value})
            message = str(e.value)
            assert len(message) < KIB, (keyword, what, len(message))
            assert e.value.key.split(".")[1].startswith(keyword), (keyword, what, message)
            assert e.value.value in ("a list", "a table"), (keyword, what, message)


def test_a_huge_value_is_shown_clipped() -> None:
    huge = "x" * 1_000_000
    with pytest.raises(ConfigError) as e:
        Config(dialog_policy=huge)
    assert len(str(e.value)) < KIB
    assert e.value.value.endswith('"… (1000000 bytes)')
    with pytest.raises(ConfigError) as f:
        Config(cdp_deny=["Browser.close", "\u202e" * 1_000_000])
    assert len(str(f.value)) < KIB and "\u202e" not in str(f.value)
    assert f.value.key == "security.cdp_deny[1]"
    unknown: Dict[str, Any] = {huge: 1}
    with pytest.raises(InvalidArgument) as g:
        Config(**unknown)
    assert len(str(g.value)) < KIB
    odd_type = type("T" * 100_000, (), {})
    with pytest.raises(InvalidArgument) as h:
        Config(dialog_policy=odd_type())
    assert len(str(h.value)) < KIB
    with pytest.raises(InvalidArgument) as i:
        Config(reconnect_attempts=10**5000)
    assert len(str(i.value)) < KIB


def test_json_conversions_refuse_deep_values_with_value_error(
    fake: FakeBrowser, registry: SupervisorRegistry
) -> None:
    sup = registry.get_or_start("t", fake.ws_url)
    cyclic: List[Any] = []
    cyclic.append(cyclic)
    for value in (nested_list(100_000), nested_dict(100_000), nested_tuple(100_000), cyclic):
        with pytest.raises(ValueError) as e:
            sup.call("Runtime.evaluate", {"expression": "1", "x": value})
        assert "deeper than 128" in str(e.value)
        with pytest.raises(ValueError):
            tools.browser_cdp(
                registry, method="Runtime.evaluate", params={"x": value}, task_id="t"
            )
    # 100 deep is fine both ways.
    assert sup.call("Runtime.evaluate", {"expression": "1", "x": nested_list(100)}) is not None
    with pytest.raises(InvalidArgument) as f:
        sup.respond_to_dialog("x" * 1_000_000)
    assert len(str(f.value)) < KIB


def test_an_unknown_tool_with_a_huge_name_is_a_short_result(registry: SupervisorRegistry) -> None:
    out = json.loads(tools.call(registry, "x" * 1_000_000, {}))
    assert out["success"] is False
    assert len(out["error"]) < KIB and "(1000000 bytes)" in out["error"]
    out = json.loads(tools.call(registry, "browser_snapshot", {"x" * 1_000_000: 1}))
    assert out["success"] is False and len(out["error"]) < KIB


def test_errors_stay_exceptions_of_this_package() -> None:
    with pytest.raises(CdpSupervisorError):
        Config(cdp_allow=nested_list(100_000))

"""Every variant of the Rust crate's ``Error`` (``src/error.rs``) becomes its own exception
class, with its fields as attributes: the binding makes one error of each variant
(``_native._error_samples``), and this file checks the list of variants against the enum in
``src/error.rs``, so a variant added there fails here until it is mapped."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, List, Tuple, Type

import cdp_supervisor
from cdp_supervisor import SupervisorRegistry, _native, errors
from cdp_supervisor.testing import FakeBrowser

REPO = Path(__file__).resolve().parents[3]

# Variant -> (the exception class, attributes it must carry). `DIALOG` stands for the sample
# dialog the test passes in.
DIALOG = object()
EXPECTED: Dict[str, Tuple[Type[errors.CdpSupervisorError], Dict[str, Any]]] = {
    "InvalidUrl": (errors.InvalidUrl, {"url": "ftp://h/"}),
    "Connect": (errors.ConnectError, {"url": "ws://127.0.0.1:9/"}),
    "ConnectionLost": (errors.ConnectionLost, {}),
    "Timeout": (errors.Timeout, {"method": "Page.reload", "after_s": 1.5}),
    "Cdp": (
        errors.CdpError,
        {"method": "Nope.nothing", "code": -32601, "cdp_message": "'Nope.nothing' wasn't found"},
    ),
    "StartTimeout": (
        errors.StartTimeout,
        {"method": None, "after_s": 2.0, "detail": "Page.enable did not answer"},
    ),
    "NoPage": (errors.NoPage, {}),
    "NotActive": (errors.NotActive, {"task_id": "task-1"}),
    "NoDialog": (errors.NoDialog, {}),
    "UnknownDialog": (errors.UnknownDialog, {"dialog_id": "d-9"}),
    "AmbiguousDialog": (errors.AmbiguousDialog, {"count": 2}),
    "DialogAlreadyClosed": (errors.DialogAlreadyClosed, {"dialog_id": "d-1", "closed_by": "remote"}),
    "OrphanedDialog": (errors.OrphanedDialog, {}),
    "PageUnresponsive": (errors.PageUnresponsive, {}),
    "DialogInUnfollowedPage": (errors.DialogInUnfollowedPage, {"target_ids": ["T1", "T2"]}),
    "AnswerAppliedToOtherDialog": (
        errors.AnswerAppliedToOtherDialog,
        {"named": "d-0", "received": DIALOG},
    ),
    "DialogUnanswerable": (errors.DialogUnanswerable, {"dialog_id": "d-1", "frame_id": "F1"}),
    "UnknownFrame": (errors.UnknownFrame, {"frame_id": "F9"}),
    "UnknownTarget": (errors.UnknownTarget, {"target_id": "T9"}),
    "Config": (
        errors.ConfigError,
        {
            "key": "browser.dialog_policy",
            "value": "sometimes",
            "allowed": "must_respond, auto_dismiss or auto_accept",
        },
    ),
    "InvalidConfig": (errors.InvalidConfig, {}),
    "InvalidArgument": (errors.InvalidArgument, {}),
    "Io": (errors.IoError, {}),
    "BlockedByDialog": (errors.BlockedByDialog, {"dialog": DIALOG, "method": "Runtime.evaluate"}),
    "NavigationFailed": (
        errors.NavigationFailed,
        {"url": "http://x.invalid/", "error": "net::ERR_NAME_NOT_RESOLVED"},
    ),
    "NoDownload": (errors.NoDownload, {"waited_s": 2.0}),
    "Refused": (
        errors.SecurityPolicy,
        {"method": "Browser.close", "option": "security.cdp_deny", "detail": "matches Browser.*"},
    ),
    "TargetCrashed": (errors.TargetCrashed, {"method": "Runtime.evaluate", "what": "the page"}),
    "UndecodableReply": (errors.UndecodableReply, {"method": "Runtime.evaluate"}),
    "Cancelled": (errors.Cancelled, {"method": "Page.reload"}),
    "StartCancelled": (errors.StartCancelled, {"task_id": "task-1", "during": "connecting"}),
    "RegistryClosed": (errors.RegistryClosed, {"task_id": "task-1"}),
}


def rust_error_variants() -> List[str]:
    """The variant names of `pub enum Error` in src/error.rs (its lines indented once)."""
    text = (REPO / "src" / "error.rs").read_text()
    body = text[text.index("pub enum Error {") :]
    body = body[: body.index("\n}\n")]
    return re.findall(r"^    ([A-Z][A-Za-z0-9]*)\b", body, re.MULTILINE)


def test_the_table_lists_every_variant_of_the_rust_error() -> None:
    variants = rust_error_variants()
    assert len(variants) >= 28, variants
    assert sorted(EXPECTED) == sorted(variants)


def test_every_rust_error_becomes_its_exception_class_with_its_fields(
    fake: FakeBrowser, registry: SupervisorRegistry
) -> None:
    sup = registry.get_or_start("t", fake.ws_url)
    fake.open_dialog("confirm", "sure?")
    dialog = sup.wait_for_dialog(5.0)
    assert dialog is not None
    samples = dict(_native._error_samples(dialog))
    assert sorted(samples) == sorted(rust_error_variants()), "every variant has a sample"
    for variant, exc in samples.items():
        cls, attrs = EXPECTED[variant]
        assert type(exc) is cls, f"{variant} -> {type(exc).__name__}, not {cls.__name__}"
        assert str(exc), variant
        for name, want in attrs.items():
            got = getattr(exc, name)
            if want is DIALOG:
                assert (got.id, got.type, got.message) == (dialog.id, "confirm", "sure?"), variant
            else:
                assert got == want, f"{variant}.{name}"


def test_every_exception_class_is_exported_and_a_cdp_supervisor_error() -> None:
    classes = {cls for cls, _ in EXPECTED.values()}
    for cls in classes:
        assert issubclass(cls, errors.CdpSupervisorError)
        assert cls.__name__ in errors.__all__ and cls.__name__ in cdp_supervisor.__all__
        assert getattr(cdp_supervisor, cls.__name__) is cls
    # The builtins they resemble, so generic handlers catch them too.
    assert issubclass(errors.InvalidConfig, ValueError) and issubclass(errors.ConfigError, ValueError)
    assert issubclass(errors.InvalidUrl, ValueError) and issubclass(errors.UnknownFrame, ValueError)
    assert issubclass(errors.StartTimeout, TimeoutError) and issubclass(errors.Timeout, TimeoutError)
    assert issubclass(errors.ConnectError, ConnectionError)
    assert issubclass(errors.ConnectionLost, ConnectionError)
    assert issubclass(errors.IoError, OSError)
    # Raised by the binding itself (after a fork), not mapped from a Rust error.
    assert issubclass(errors.UsedAfterFork, errors.CdpSupervisorError)
    assert issubclass(errors.UsedAfterFork, RuntimeError)
    assert "UsedAfterFork" in errors.__all__ and cdp_supervisor.UsedAfterFork is errors.UsedAfterFork

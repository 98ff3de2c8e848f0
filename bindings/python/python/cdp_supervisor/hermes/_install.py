"""``install()``: run a Hermes Agent checkout on the drop-in, one call before Hermes imports its
browser code.

Hermes imports its supervisor under two names: ``tools.browser.browser_supervisor`` (its
``tools/browser/`` package, where the code lives now) and ``tools.browser_supervisor`` (older
code). After ``install()`` both are the drop-in (one module object each, sharing the drop-in's
``SUPERVISOR_REGISTRY``), whichever is imported first and whether or not Hermes imported them
already. Hermes's two tool modules that talk to the supervisor (``browser_cdp_tool``,
``browser_dialog_tool``, under either package) are Hermes's own code, loaded as usual so that
they register their tools, with their ``browser_cdp`` / ``browser_dialog`` functions replaced by
the drop-in's (Hermes's ``browser_cdp`` reaches into the supervisor's asyncio internals, which
the drop-in does not have; its registered handlers look the function up when they run). Where a
checkout lacks one of these modules (or the ``tools`` / ``tools.browser`` packages), the drop-in
provides it.

How: a finder first on ``sys.meta_path``; nothing else of the import system changes.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any, Dict, Optional, Sequence

# The supervisor's module names.
SUPERVISOR_MODULES = ("tools.browser_supervisor", "tools.browser.browser_supervisor")
# Hermes's tool modules, and the function of each the drop-in replaces.
TOOL_MODULES: Dict[str, str] = {
    "tools.browser_dialog_tool": "browser_dialog",
    "tools.browser.browser_dialog_tool": "browser_dialog",
    "tools.browser_cdp_tool": "browser_cdp",
    "tools.browser.browser_cdp_tool": "browser_cdp",
}
# Packages the drop-in provides (empty) when the checkout lacks them.
PACKAGES = ("tools", "tools.browser")


def _drop_in() -> types.ModuleType:
    from .. import hermes

    return hermes


def _supervisor_module(name: str) -> types.ModuleType:
    """A module named `name` holding every name of the drop-in (the same objects)."""
    module = types.ModuleType(name, "Hermes's browser supervisor, served by cdp_supervisor.hermes.")
    for key, value in vars(_drop_in()).items():
        if not key.startswith("__") or key == "__all__":
            setattr(module, key, value)
    return module


def _patch_tool(module: types.ModuleType, name: str) -> None:
    function = TOOL_MODULES.get(name)
    if function is not None:
        setattr(module, function, getattr(_drop_in(), function))
        if function == "browser_cdp":
            setattr(module, "CDP_DOCS_URL", getattr(_drop_in(), "CDP_DOCS_URL"))


class _Served(importlib.abc.Loader):
    """Loads the drop-in's own module for a name (a supervisor module, or a tool module or
    package the checkout lacks)."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Optional[types.ModuleType]:
        if spec.name in SUPERVISOR_MODULES:
            return _supervisor_module(spec.name)
        module = types.ModuleType(spec.name)
        if spec.name in PACKAGES:
            module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        _patch_tool(module, module.__name__)


class _Patched(importlib.abc.Loader):
    """Loads Hermes's own tool module, then puts the drop-in's function in it."""

    def __init__(self, real: importlib.machinery.ModuleSpec) -> None:
        self.real = real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Optional[types.ModuleType]:
        loader = self.real.loader
        return loader.create_module(self.real) if loader is not None else None

    def exec_module(self, module: types.ModuleType) -> None:
        loader = self.real.loader
        if loader is None:
            raise ImportError(f"{module.__name__}: no loader")
        loader.exec_module(module)
        _patch_tool(module, module.__name__)


class _Finder(importlib.abc.MetaPathFinder):
    """Serves the drop-in under Hermes's names (module doc)."""

    def _elsewhere(
        self, fullname: str, path: Optional[Sequence[str]]
    ) -> Optional[importlib.machinery.ModuleSpec]:
        for finder in sys.meta_path:
            if finder is self or isinstance(finder, _Finder):
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec: Optional[importlib.machinery.ModuleSpec] = find(fullname, path, None)
            if spec is not None:
                return spec
        return None

    def find_spec(
        self,
        fullname: str,
        path: Optional[Sequence[str]],
        target: Optional[types.ModuleType] = None,
    ) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname in SUPERVISOR_MODULES:
            return importlib.util.spec_from_loader(fullname, _Served())
        if fullname in TOOL_MODULES:
            real = self._elsewhere(fullname, path)
            if real is not None and real.loader is not None:
                spec = importlib.util.spec_from_loader(
                    fullname, _Patched(real), origin=real.origin
                )
                if spec is not None:
                    spec.has_location = real.has_location
                return spec
            return importlib.util.spec_from_loader(fullname, _Served())
        if fullname in PACKAGES and self._elsewhere(fullname, path) is None:
            return importlib.util.spec_from_loader(fullname, _Served(), is_package=True)
        return None


def install() -> None:
    """Makes Hermes import the drop-in as ``tools.browser_supervisor`` and
    ``tools.browser.browser_supervisor`` (and its tool modules use it): see the module doc.
    Idempotent; modules Hermes imported already are replaced (or patched) in place."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
    for name in SUPERVISOR_MODULES:
        if name in sys.modules:
            _bind(name, _supervisor_module(name))
    for name in TOOL_MODULES:
        module = sys.modules.get(name)
        if module is not None:
            _patch_tool(module, name)


def _bind(name: str, module: types.ModuleType) -> None:
    """Puts `module` in ``sys.modules`` under `name`, and on its parent package."""
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    owner: Any = sys.modules.get(parent)
    if owner is not None:
        setattr(owner, child, module)

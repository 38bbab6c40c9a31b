"""Shared fixtures: the protocol, small node and pod sets, paths to the shared openb traces."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from runtimekit.protocol import KitProtocol

pytest_plugins = ["fixtures.apiserver", "fixtures.controllers", "fixtures.webhooks"]

ROOT = Path(__file__).resolve().parent.parent
SHARED_TRACES = ROOT.parent / "shared" / "traces" / "openb"
BUNDLED = ROOT / "src" / "runtimekit" / "data"


@pytest.fixture
def protocol() -> KitProtocol:
    return KitProtocol.default()


@pytest.fixture
def bench_script(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], ModuleType]:
    """Imports a script of benchmarks/ by module name (benchmarks/ on sys.path for the test only)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    return importlib.import_module


@pytest.fixture
def openb_dir() -> Path:
    """The shared openb traces, else the bundled copies (node list and default pod list only)."""
    return SHARED_TRACES if SHARED_TRACES.is_dir() else BUNDLED

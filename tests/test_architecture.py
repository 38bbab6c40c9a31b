"""The shape of the source tree, measured: no import cycle (counting imports under TYPE_CHECKING and
inside functions) and no module over 500 lines, with `scripts/import_cycles.py`."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_cycles", ROOT / "scripts" / "import_cycles.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_import_cycles() -> None:
    script = _script()
    assert script.cycles(script.graph()) == []


def test_the_cycle_finder_sees_late_and_type_checking_imports(tmp_path: Path) -> None:
    package = tmp_path / "runtimekit"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from runtimekit import b\n")
    late = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from runtimekit.a import f\n"
    (package / "b.py").write_text(late)
    (package / "c.py").write_text("from runtimekit import a\n")
    script = _script()
    assert script.cycles(script.graph(tmp_path)) == [["runtimekit.a", "runtimekit.b"]]


def test_no_module_over_500_lines() -> None:
    assert _script().long_modules(500) == {}

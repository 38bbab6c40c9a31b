#!/usr/bin/env python3
"""Import cycles among the modules of `src/runtimekit`, counting every import statement: top-level,
under `if TYPE_CHECKING:` and inside functions (a late import hides a cycle from Python, not from
the design). Prints JSON: the strongly connected components of more than one module, and modules
over the line limit. `tests/test_architecture.py` runs the same functions.

    python scripts/import_cycles.py [--max-lines 800]
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
GENERATED = ("runtimekit.api.runtimekit", "runtimekit.api.v1beta1", "runtimekit.api.podresources")


def module_name(path: Path, src: Path = SRC) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(src: Path = SRC) -> dict[str, Path]:
    """Every hand-written module of runtimekit (generated gRPC stubs left out)."""
    found = {module_name(p, src): p for p in sorted((src / "runtimekit").rglob("*.py"))}
    return {name: path for name, path in found.items() if not name.startswith(GENERATED)}


def _imported(tree: ast.AST, name: str, is_package: bool, known: Mapping[str, Path]) -> Iterable[str]:
    """The modules an import statement names: `from pkg import sub` imports `pkg.sub` where that is a
    module, else `pkg` (as grimp, the graph behind import-linter, counts it)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                yield sub if sub in known else target


def graph(src: Path = SRC) -> dict[str, set[str]]:
    """module -> the runtimekit modules it imports (a package's `__init__` counts as the package)."""
    known = modules(src)
    edges: dict[str, set[str]] = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        targets = {t for t in _imported(tree, name, path.name == "__init__.py", known) if t in known}
        edges[name] = targets - {name}
    return edges


def cycles(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted, largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for name in sorted(edges):
        if name not in index:
            visit(name)
    return sorted(found, key=lambda c: (-len(c), c))


def long_modules(limit: int, src: Path = SRC) -> dict[str, int]:
    """Hand-written modules with more than `limit` lines."""
    lengths = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in modules(src).items()}
    return {name: n for name, n in sorted(lengths.items()) if n > limit}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-lines", type=int, default=800)
    args = parser.parse_args(argv)
    report = {"cycles": cycles(graph()), "modules_over_limit": long_modules(args.max_lines)}
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""How typed the hand-written source is, measured: `# type: ignore` comments, annotations that leave a
JSON object untyped (`Mapping/MutableMapping/dict[str, Any]`), the aliases that name such a type, and
`global` statements in the scheduler (state shared between plugins belongs in the session's cycle
state or an object the framework hands out, not in a module).

    python scripts/typing_facts.py        # prints JSON

`tests/test_architecture.py` holds the kit to these figures; the generated gRPC stubs are left out.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "runtimekit"
GENERATED = ("api/v1beta1", "api/podresources", "api/runtimekit", "api/dra", "api/drahealth", "api/pluginregistration")
UNTYPED = re.compile(r"(?:Mapping|MutableMapping|dict)\[str, *Any\]")
IGNORE = re.compile(r"#\s*type:\s*ignore")


def sources(src: Path = SRC) -> dict[str, str]:
    """Hand-written modules by path relative to the package, with their text."""
    found = {}
    for path in sorted(src.rglob("*.py")):
        relative = path.relative_to(src).as_posix()
        if not relative.startswith(GENERATED):
            found[relative] = path.read_text(encoding="utf-8")
    return found


def _per_module(pattern: re.Pattern[str], texts: dict[str, str]) -> dict[str, int]:
    counts = {name: len(pattern.findall(text)) for name, text in texts.items()}
    return {name: n for name, n in counts.items() if n}


def json_aliases(texts: dict[str, str]) -> list[str]:
    """Module-level names bound to an untyped JSON object type (`X = dict[str, Any]`), as module:name."""
    found = []
    for name, text in texts.items():
        for node in ast.parse(text).body:
            value, targets = None, []
            if isinstance(node, ast.Assign):
                value, targets = node.value, [t for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                value, targets = node.value, [node.target]
            if value is not None and UNTYPED.fullmatch(ast.unparse(value).replace("'", "")):
                found += [f"{name}:{t.id}" for t in targets]
    return sorted(found)


def globals_in(texts: dict[str, str], prefix: str) -> list[str]:
    """`global` statements in the modules under `prefix`, as module:names."""
    found = []
    for name, text in texts.items():
        if name.startswith(prefix):
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.Global):
                    found.append(f"{name}:{','.join(node.names)}")
    return sorted(found)


def facts(src: Path = SRC) -> dict[str, object]:
    texts = sources(src)
    untyped = _per_module(UNTYPED, texts)
    ignores = _per_module(IGNORE, texts)
    return {
        "type_ignores": sum(ignores.values()),
        "type_ignores_by_module": ignores,
        "untyped_json": sum(untyped.values()),
        "untyped_json_by_module": dict(sorted(untyped.items(), key=lambda item: -item[1])),
        "json_aliases": json_aliases(texts),
        "scheduler_globals": globals_in(texts, "scheduler/"),
    }


def main() -> int:
    print(json.dumps(facts(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

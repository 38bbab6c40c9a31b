"""Configuration text: files read as UTF-8 with a one-line error, and YAML whose mappings may not
repeat a key.

PyYAML keeps the last of two equal keys silently (`resources.gpu` twice: the first is lost), so a
configuration typo goes unnoticed; `load_yaml` and `load_yaml_all` refuse it with the line of both.
`read_text` turns a file that is not UTF-8 into `TextError` naming the file and the byte offset
instead of a `UnicodeDecodeError` traceback. Callers wrap `TextError` into their own error type.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode

_MERGE = "tag:yaml.org,2002:merge"


class TextError(ValueError):
    """A file that cannot be read as text, or YAML with a repeated key; the message is one line."""


def read_text(path: str | Path) -> str:
    """The file's text; TextError when it cannot be read or is not UTF-8."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise TextError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise TextError(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})") from None


class _UniqueKeyLoader(yaml.SafeLoader):
    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: dict[Hashable, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE:
                continue
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, Hashable):
                continue  # the base class reports unhashable keys
            line = key_node.start_mark.line + 1
            if key in seen:
                raise ConstructorError(
                    None, None, f"line {line}: key {key!r} is given twice (first on line {seen[key]})", None
                )
            seen[key] = line
        return super().construct_mapping(node, deep)


def load_yaml(text: str) -> Any:
    """One YAML document (None when empty); yaml.YAMLError when it is malformed or repeats a key."""
    return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass


def load_yaml_all(text: str) -> Iterator[Any]:
    """Every document of a YAML stream, under the rules of `load_yaml`."""
    return yaml.load_all(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass


def yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML error on one line (PyYAML's span several, with a caret under the spot)."""
    if isinstance(exc, ConstructorError) and exc.problem and exc.problem.startswith("line "):
        return exc.problem
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return where + " ".join(str(problem).split())

"""Configuration text: files read as UTF-8 with a one-line error, and YAML whose mappings may not
repeat a key and whose nesting is bounded.

PyYAML keeps the last of two equal keys silently (`resources.gpu` twice: the first is lost), so a
configuration typo goes unnoticed; `load_yaml` and `load_yaml_all` refuse it with the line of both.
PyYAML composes nested lists and mappings by recursion, so `[[[...]]]` 50,000 deep raises
`RecursionError` (a traceback at start, silence in a conf reload); the loaders refuse anything nested
deeper than `MAX_DEPTH` levels, aliases counted at the depth they are used, and an alias inside the
node it names (a cycle, which any recursive reader would follow forever), as YAML errors naming the
line. `read_text` and `decode_text` turn text that is not UTF-8 into `TextError` naming the file and
the byte offset instead of a `UnicodeDecodeError` traceback. Callers wrap `TextError` into their own
error type.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from pathlib import Path
from typing import Any, Protocol, cast

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.events import AliasEvent, CollectionStartEvent, Event
from yaml.nodes import MappingNode, Node
from yaml.scanner import ScannerError
from yaml.tokens import Token

_MERGE = "tag:yaml.org,2002:merge"
MAX_DEPTH = 100  # levels of lists and mappings: confs and protocol files use under 10; the recursion gives out near 330


class TextError(ValueError):
    """A file that cannot be read as text, or YAML with a repeated key; the message is one line."""


def read_text(path: str | Path) -> str:
    """The file's text; TextError when it cannot be read or is not UTF-8."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise TextError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return decode_text(data, str(path))


def decode_text(data: bytes, source: str) -> str:
    """`data` as UTF-8 text; TextError naming `source` and the first bad byte when it is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = f"byte 0x{exc.object[exc.start]:02x} at offset {exc.start}"
        raise TextError(f"{source}: not UTF-8 text ({bad})") from None


def _too_deep(event: Event, why: str) -> ComposerError:
    mark = event.start_mark
    return ComposerError(None, None, f"line {mark.line + 1}: {why}" if mark is not None else why, None)


class _Events(Protocol):
    """PyYAML's parser (the stubs leave `peek_event` untyped)."""

    def peek_event(self) -> Event: ...


class _UniqueKeyLoader(yaml.SafeLoader):
    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._levels: list[int] = []  # per open list or mapping: the height of its tallest child so far
        self._heights: dict[str, int] = {}  # anchor -> the height of its node (a scalar's: 0, not kept)
        self._open: set[str] = set()  # anchors of the lists and mappings being composed

    def fetch_flow_collection_start(self, TokenClass: type[Token]) -> None:
        """PyYAML's, stopping at a `[` or `{` past `MAX_DEPTH` open ones: its scanner looks up to 1,024
        characters ahead for a key at each open bracket, at a cost that grows with their number (a
        second for a 50,000-deep line), so the scanner stops before the composer could."""
        if self.flow_level >= MAX_DEPTH:
            why = f"lists and mappings nested deeper than {MAX_DEPTH} levels"
            raise ScannerError(None, None, f"line {self.line + 1}: {why}", None)
        super().fetch_flow_collection_start(TokenClass)

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        """PyYAML's, with its depth bounded (see the module docstring): a node's height is 1 for a list or
        mapping of scalars, and no open list or mapping may hold a node taller than `MAX_DEPTH` minus its
        own depth. Checked before the recursion goes one level further, so it never reaches the limit."""
        event = cast(_Events, self).peek_event()
        if isinstance(event, AliasEvent):
            if event.anchor in self._open:
                raise _too_deep(event, f"alias *{event.anchor} is inside the node it names (a cycle)")
            node = super().compose_node(parent, index)
            self._reach(self._heights.get(event.anchor or "", 0), event)
            return node
        if not isinstance(event, CollectionStartEvent):
            return super().compose_node(parent, index)
        self._reach(1, event)
        anchor = event.anchor
        self._levels.append(0)
        if anchor is not None:
            self._open.add(anchor)
        try:
            node = super().compose_node(parent, index)
        finally:
            height = self._levels.pop() + 1
            self._open.discard(anchor or "")
        self._reach(height, event)
        if anchor is not None:
            self._heights[anchor] = height
        return node

    def _reach(self, height: int, event: Event) -> None:
        """A node `height` levels tall goes into the innermost open list or mapping."""
        if len(self._levels) + height > MAX_DEPTH:
            raise _too_deep(event, f"lists and mappings nested deeper than {MAX_DEPTH} levels")
        if self._levels:
            self._levels[-1] = max(self._levels[-1], height)

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

"""Request bodies within kube-apiserver's limits: size, YAML aliasing, JSON nesting.

- A body over 3 MiB (kube-apiserver's `MaxRequestBodyBytes`, 3145728) is refused with 413
  `Request entity too large: limit is 3145728` before it is parsed.
- YAML goes through go-yaml's alias accounting (what `sigs.k8s.io/yaml` does for the real server):
  every node decoded counts, and nodes decoded inside an alias expansion count as aliased; once more
  than 100 aliased and 1000 in all, the aliased share may not pass 99 % (up to 400,000 nodes),
  falling to 10 % at 4,000,000. Past it, `yaml: document contains excessive aliasing`. The count is
  made on the composed node graph, before anything is built, so a "billion laughs" body of a few
  hundred bytes costs a few thousand steps instead of gigabytes.
- JSON may nest up to 10,000 levels (Go's `encoding/json` limit); deeper is `exceeded max depth`.

Errors are `ApiError`s in the shape kube-apiserver writes for an undecodable body.
Pure functions; called by the HTTP handlers.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any, Protocol, cast

import yaml
from yaml.composer import ComposerError
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, SequenceNode

from runtimekit.cluster.apiserver.errors import ApiError, bad_request
from runtimekit.cluster.apiserver.protobody import PROTOBUF, decode_protobuf
from runtimekit.kube import jsoncodec

MAX_BODY_BYTES = 3 * 1024 * 1024
MAX_JSON_DEPTH = 10_000
_ALIAS_LOW, _ALIAS_HIGH = 400_000, 4_000_000
_RECURSION_NEEDED = MAX_JSON_DEPTH + 2_000


def body_too_large() -> ApiError:
    return ApiError(413, "RequestEntityTooLarge", f"Request entity too large: limit is {MAX_BODY_BYTES}", {})


def allow_deep_json() -> None:
    """msgspec (like CPython) stops at the interpreter's recursion limit (1000 by default); kube
    accepts JSON 10,000 levels deep, so the server raises the limit to fit (process-wide)."""
    if sys.getrecursionlimit() < _RECURSION_NEEDED:
        sys.setrecursionlimit(_RECURSION_NEEDED)


def _undecodable(kind: str, why: str, body: bytes) -> ApiError:
    summary = body[:30].decode(errors="replace")
    return bad_request(f"the object provided is unrecognized (must be of type {kind}): {why} ({summary})")


def decode_body(body: bytes, content_type: str, kind: str) -> Any:
    """JSON (or YAML) request body as Python values; malformed bodies are 400 as the real decoder words them."""
    if len(body) > MAX_BODY_BYTES:
        raise body_too_large()
    if content_type == PROTOBUF:
        return decode_protobuf(body, kind)
    if "yaml" in content_type:
        try:
            return load_yaml(body)
        except AliasingError as exc:
            raise _undecodable(kind, str(exc), body) from None
        except RecursionError:
            raise _undecodable(kind, "yaml: exceeded max depth", body) from None
        except yaml.YAMLError as exc:
            raise _undecodable(kind, f"yaml: {' '.join(str(exc).split())}", body) from None
    try:
        return jsoncodec.loads(body)
    except RecursionError:
        raise _undecodable(kind, "json: exceeded max depth", body) from None
    except ValueError as exc:
        raise _undecodable(kind, f"couldn't get version/kind; json parse error: {exc}", body) from None


# -- YAML ------------------------------------------------------------------------------------------


class AliasingError(yaml.YAMLError):
    """The document expands past go-yaml's alias budget."""

    def __str__(self) -> str:
        return "yaml: document contains excessive aliasing"


class _Alias(Node):
    """Where the document says `*name`: kept apart from the anchored node while counting."""

    id = "alias"

    def __init__(self, target: Node) -> None:
        super().__init__(target.tag, target.value, target.start_mark, target.end_mark)
        self.target = target


class _AtAlias(Protocol):
    """PyYAML's parser once `check_event(AliasEvent)` holds: the next event is that alias. (The
    stubs leave `peek_event` and `get_event` untyped.)"""

    def peek_event(self) -> AliasEvent: ...

    def get_event(self) -> AliasEvent: ...


class _CountingLoader(yaml.SafeLoader):
    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        if self.check_event(AliasEvent):
            parser = cast(_AtAlias, self)
            event = parser.peek_event()
            if event.anchor not in self.anchors:
                raise ComposerError(None, None, f"found undefined alias {event.anchor!r}", None)
            parser.get_event()
            return _Alias(self.anchors[event.anchor])
        return super().compose_node(parent, index)


def _allowed_ratio(decoded: int) -> float:
    if decoded <= _ALIAS_LOW:
        return 0.99
    if decoded >= _ALIAS_HIGH:
        return 0.10
    return 0.99 - 0.89 * (decoded - _ALIAS_LOW) / (_ALIAS_HIGH - _ALIAS_LOW)


def _children(node: Node) -> Iterator[Node]:
    if isinstance(node, MappingNode):
        for key, value in node.value:
            yield key
            yield value
    elif isinstance(node, SequenceNode):
        yield from node.value


def check_aliasing(root: Node) -> None:
    """go-yaml's count: each node decoded is one step; steps under an alias are aliased ones."""
    decoded = aliased = 0
    stack: list[tuple[Node, int]] = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        decoded += 1
        if depth:
            aliased += 1
        if aliased > 100 and decoded > 1000 and aliased / decoded > _allowed_ratio(decoded):
            raise AliasingError()
        if isinstance(node, _Alias):
            stack.append((node.target, depth + 1))
        else:
            stack.extend((child, depth) for child in reversed(list(_children(node))))


def _resolve(root: Node) -> None:
    """Put the anchored nodes back where the aliases were (each node once: nothing is expanded)."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, MappingNode):
            node.value = [(_target(k), _target(v)) for k, v in node.value]
        elif isinstance(node, SequenceNode):
            node.value = [_target(child) for child in node.value]
        stack.extend(_children(node))


def _target(node: Node) -> Node:
    return node.target if isinstance(node, _Alias) else node


def load_yaml(body: bytes | str) -> Any:
    """One YAML document (None when empty), refused with `AliasingError` past go-yaml's alias budget."""
    loader = _CountingLoader(body)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        check_aliasing(root)
        _resolve(root)
        return loader.construct_document(root)
    finally:
        loader.dispose()

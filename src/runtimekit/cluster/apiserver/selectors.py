"""Field selectors with the grammar and semantics of apimachinery's `fields.ParseSelector`:
comma-separated `path=v`, `path==v`, `path!=v` with `\\,`, `\\=` and `\\\\` escapes, and `field_value`,
the string a field selector compares. Parse errors raise the label selectors' `SelectorError` (the
server answers 400 BadRequest). Label selectors are `runtimekit.kube.semantics.labeltext`.
Pure functions; called by the list and watch handlers, the store and tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from runtimekit.kube.semantics.labels import SelectorError


@dataclass(frozen=True)
class FieldTerm:
    field: str
    value: str
    negate: bool = False

    def matches(self, fields: Mapping[str, str]) -> bool:
        return (fields.get(self.field, "") == self.value) != self.negate


@dataclass(frozen=True)
class FieldSelector:
    terms: tuple[FieldTerm, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.terms

    def matches(self, fields: Mapping[str, str]) -> bool:
        return all(term.matches(fields) for term in self.terms)

    def required(self, field: str) -> str | None:
        """The value an equality term pins `field` to (so an index can answer), else None."""
        return next((t.value for t in self.terms if t.field == field and not t.negate), None)


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, current, escaped = [], [], False
    for ch in text:
        if escaped:
            current.append("\\" + ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if escaped:
        raise SelectorError(f'invalid field selector "{text}": a trailing backslash escapes nothing')
    parts.append("".join(current))
    return parts


def _unescape(text: str, whole: str) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\":
            nxt = text[i + 1 : i + 2]
            if nxt not in ("\\", ",", "="):
                raise SelectorError(f'invalid field selector "{whole}": invalid escape sequence \\{nxt}')
            out.append(nxt)
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _find_operator(term: str) -> tuple[int, str] | None:
    """The first unescaped `!=`, `==` or `=`."""
    i = 0
    while i < len(term):
        if term[i] == "\\":
            i += 2
            continue
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return i, op
        i += 1
    return None


def parse_field_selector(text: str) -> FieldSelector:
    """Parse a `fieldSelector` query value. The empty string selects everything."""
    terms: list[FieldTerm] = []
    for raw in _split_unescaped(text, ","):
        if not raw.strip():
            continue
        found = _find_operator(raw)
        if found is None:
            raise SelectorError(f"invalid selector: '{raw}'; can't understand '{raw}'")
        at, op = found
        key = _unescape(raw[:at].strip(), text)
        if not key:
            raise SelectorError(f"invalid field selector \"{text}\": empty field name in '{raw}'")
        terms.append(FieldTerm(key, _unescape(raw[at + len(op) :].strip(), text), negate=op == "!="))
    return FieldSelector(tuple(terms))


# What kube's `ToSelectableFields` reads for an absent field that is not a string there: a Go bool
# (`strconv.FormatBool`) or int32 (`strconv.Itoa`) is never absent, so `spec.unschedulable=false` selects
# a node that never was cordoned and `status.replicas=0` a ReplicaSet with no status yet. Keyed by the
# stored path; only the kinds that select the path compute it.
ABSENT_AS: Mapping[str, str] = {
    "spec.unschedulable": "false",  # nodes
    "spec.hostNetwork": "false",  # pods
    "status.succeeded": "0",  # jobs (label status.successful)
    "status.replicas": "0",  # replicasets
}


@lru_cache(maxsize=1024)
def _parts(path: str) -> tuple[str, ...]:
    return tuple(path.split("."))


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The string a field selector compares for dotted `path` (when absent, `ABSENT_AS` or ""; booleans
    lower-case)."""
    node: Any = obj
    for part in _parts(path):
        if not isinstance(node, dict):  # objects come from JSON: dicts (cheaper to test than Mapping)
            return ABSENT_AS.get(path, "")
        node = node.get(part)
    if node is None:
        return ABSENT_AS.get(path, "")
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)


_Reads = tuple[tuple[str, tuple[tuple[int, tuple[str, ...], str], ...]], ...]


@lru_cache(maxsize=256)
def _reads(paths: tuple[str, ...]) -> _Reads:
    """`paths` grouped by their first part: each group's top-level value is read once. Each entry is
    (position in `paths`, the parts after the first, the value when absent)."""
    groups: dict[str, list[tuple[int, tuple[str, ...], str]]] = {}
    for at, path in enumerate(paths):
        head, *rest = _parts(path)
        groups.setdefault(head, []).append((at, tuple(rest), ABSENT_AS.get(path, "")))
    return tuple((head, tuple(entries)) for head, entries in groups.items())


@lru_cache(maxsize=256)
def _stored_paths(fields: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    return tuple(path for _, path in fields)


def field_values(obj: dict[str, Any], fields: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """`{path: field_value(obj, path) for _, path in fields}` (a kind's (label, stored path) pairs), with
    each top-level value read once: the store computes a pod's eight selectable fields on every write."""
    paths = _stored_paths(fields)
    values = [""] * len(paths)
    for head, entries in _reads(paths):
        top = obj.get(head)
        for at, rest, absent in entries:
            node: Any = top
            for part in rest:
                if not isinstance(node, dict):
                    node = None
                    break
                node = node.get(part)
            if node is None:
                values[at] = absent
            elif isinstance(node, bool):
                values[at] = "true" if node else "false"
            else:
                values[at] = str(node)
    return dict(zip(paths, values, strict=True))

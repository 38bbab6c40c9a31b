"""Label and field selectors with the grammar and semantics of apimachinery's `labels.Parse` and
`fields.ParseSelector`.

Label selector: comma-separated requirements `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`,
`k`, `!k`, `k>N`, `k<N`. Field selector: comma-separated `path=v`, `path==v`, `path!=v` with `\\,`,
`\\=` and `\\\\` escapes. Parse errors raise `SelectorError` (the server answers 400 BadRequest).
Pure functions; called by the list and watch handlers and by tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Any

from runtimekit.kube.semantics.names import check_qualified_name

_SPECIAL = frozenset("!=(),<>")
_MAX_VALUE = 63


class SelectorError(ValueError):
    """A selector that does not parse; the message says where."""


class Op(StrEnum):
    EQUALS = "="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER = ">"
    LESS = "<"


@dataclass(frozen=True)
class Requirement:
    key: str
    op: Op
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op in (Op.EQUALS, Op.IN):
            return present and value in self.values
        if self.op in (Op.NOT_EQUALS, Op.NOT_IN):
            return not present or value not in self.values
        if self.op is Op.EXISTS:
            return present
        if self.op is Op.DOES_NOT_EXIST:
            return not present
        return present and _compare(self.op, value or "", next(iter(self.values)))


def _compare(op: Op, value: str, bound: str) -> bool:
    try:
        left = int(value)
    except ValueError:
        return False
    return left > int(bound) if op is Op.GREATER else left < int(bound)


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(req.matches(labels) for req in self.requirements)


def _tokens(text: str) -> list[str]:
    """Split into identifiers and the operators `! = == != ( ) , < > in notin`."""
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch in _SPECIAL:
            pair = text[i : i + 2]
            if pair in ("==", "!="):
                out.append(pair)
                i += 2
            else:
                out.append(ch)
                i += 1
        else:
            start = i
            while i < len(text) and not text[i].isspace() and text[i] not in _SPECIAL:
                i += 1
            out.append(text[start:i])
    return out


class _LabelParser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.pos = 0

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str | None:
        token = self.peek()
        self.pos += 1
        return token

    def fail(self, why: str) -> SelectorError:
        return SelectorError(f'unable to parse requirement: {why} (in label selector "{self.text}")')

    def parse(self) -> LabelSelector:
        reqs: list[Requirement] = []
        while self.peek() is not None:
            reqs.append(self.requirement())
            token = self.take()
            if token is None:
                break
            if token != ",":
                raise self.fail(f"found '{token}', expected: ','")
            if self.peek() is None:
                raise self.fail("found end of string, expected: identifier")
        return LabelSelector(tuple(reqs))

    def requirement(self) -> Requirement:
        if self.peek() == "!":
            self.take()
            return Requirement(self.key(), Op.DOES_NOT_EXIST)
        key = self.key()
        token = self.peek()
        if token is None or token == ",":
            return Requirement(key, Op.EXISTS)
        self.take()
        if token in ("=", "=="):
            return Requirement(key, Op.EQUALS, frozenset({self.value(allow_empty=True)}))
        if token == "!=":
            return Requirement(key, Op.NOT_EQUALS, frozenset({self.value(allow_empty=True)}))
        if token in ("in", "notin"):
            return Requirement(key, Op.IN if token == "in" else Op.NOT_IN, self.value_set())
        if token in (">", "<"):
            bound = self.value(allow_empty=False)
            if not bound.lstrip("-").isdigit():
                raise self.fail(f"for '{token}' operator, the value must be an integer, got '{bound}'")
            return Requirement(key, Op.GREATER if token == ">" else Op.LESS, frozenset({bound}))
        raise self.fail(f"found '{token}', expected: in, notin, =, ==, !=, gt, lt")

    def key(self) -> str:
        token = self.take()
        if token is None or token in _SPECIAL or token in ("==", "!="):
            raise self.fail(f"found '{token or 'end of string'}', expected: identifier")
        problem = check_qualified_name(token)
        if problem:
            raise self.fail(f'invalid label key "{token}": {problem}')
        return token

    def value(self, *, allow_empty: bool) -> str:
        token = self.peek()
        if token is None or token == ",":
            if allow_empty:
                return ""
            raise self.fail("found end of value, expected: a value")
        if token in _SPECIAL or token in ("==", "!="):
            raise self.fail(f"found '{token}', expected: identifier")
        self.take()
        check_label_value(token, self.fail)
        return token

    def value_set(self) -> frozenset[str]:
        if self.take() != "(":
            raise self.fail("expected: '('")
        values: set[str] = set()
        while True:
            token = self.peek()
            if token == ")":
                self.take()
                break
            if token == ",":
                self.take()
                values.add("")
                continue
            values.add(self.value(allow_empty=False))
            nxt = self.take()
            if nxt == ")":
                break
            if nxt != ",":
                raise self.fail(f"found '{nxt or 'end of string'}', expected: ',' or ')'")
        if not values:
            raise self.fail("for 'in', 'notin' operators, values set can't be empty")
        return frozenset(values)


def check_label_value(value: str, fail: Any) -> None:
    """Raise `fail(reason)` when `value` is not a valid label value (empty is valid)."""
    if not value:
        return
    ok_chars = all(c.isascii() and (c.isalnum() or c in "-_.") for c in value)
    if len(value) > _MAX_VALUE or not ok_chars or not value[0].isalnum() or not value[-1].isalnum():
        raise fail(
            f'invalid label value: "{value}": a valid label must be an empty string or consist of alphanumeric '
            "characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        )


def parse_label_selector(text: str) -> LabelSelector:
    """Parse a `labelSelector` query value. The empty string selects everything."""
    return _LabelParser(text).parse() if text.strip() else LabelSelector()


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


@lru_cache(maxsize=1024)
def _parts(path: str) -> tuple[str, ...]:
    return tuple(path.split("."))


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The string a field selector compares for dotted `path` ("" when absent, booleans lower-case)."""
    node: Any = obj
    for part in _parts(path):
        if not isinstance(node, dict):  # objects come from JSON: dicts (cheaper to test than Mapping)
            return ""
        node = node.get(part)
    if node is None:
        return ""
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)

"""The text form of label selectors, as apimachinery's `labels.Parse` reads it and `Selector.String`
writes it: comma-separated requirements `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`,
`!k`, `k>N`, `k<N`.

`parse_label_selector` gives the shared `labels.Selector` (the empty string selects everything) or
raises `SelectorError` saying where it fails; `to_string` writes a selector back, requirements sorted
by key and values sorted (a Scale's `status.selector`). Pure functions; callers: the embedded API
server's list and watch filters and its scale subresource.
"""

from __future__ import annotations

from runtimekit.kube.semantics.labels import (
    DOES_NOT_EXIST,
    DOUBLE_EQUALS,
    EQUALS,
    EVERYTHING,
    EXISTS,
    GT,
    IN,
    LT,
    NOT_EQUALS,
    NOT_IN,
    TEXT_OPS,
    Requirement,
    Selector,
    SelectorError,
    requirement,
)

_SPECIAL = frozenset("!=(),<>")
_OPERATORS = {"=": EQUALS, "==": DOUBLE_EQUALS, "!=": NOT_EQUALS, "in": IN, "notin": NOT_IN, ">": GT, "<": LT}
# how each operator is written between the key and the values (Exists and DoesNotExist have none)
_WRITTEN = {EQUALS: "=", DOUBLE_EQUALS: "==", NOT_EQUALS: "!=", IN: " in ", NOT_IN: " notin ", GT: ">", LT: "<"}


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


class _Parser:
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

    def parse(self) -> Selector:
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
        return Selector(tuple(reqs))

    def requirement(self) -> Requirement:
        if self.peek() == "!":
            self.take()
            return self.checked(self.key(), DOES_NOT_EXIST, [])
        key = self.key()
        token = self.peek()
        if token is None or token == ",":
            return self.checked(key, EXISTS, [])
        self.take()
        op = _OPERATORS.get(token)
        if op is None:
            raise self.fail(f"found '{token}', expected: in, notin, =, ==, !=, gt, lt")
        if op in (IN, NOT_IN):
            return self.checked(key, op, self.value_set())
        return self.checked(key, op, [self.value(allow_empty=op not in (GT, LT))])

    def checked(self, key: str, op: str, values: list[str]) -> Requirement:
        """The requirement, validated as `NewRequirement` does (keys, values, integers for Gt/Lt)."""
        try:
            return requirement(key, op, values, "", TEXT_OPS)
        except SelectorError as exc:
            raise self.fail(str(exc)) from None

    def key(self) -> str:
        token = self.take()
        if token is None or token in _SPECIAL or token in ("==", "!="):
            raise self.fail(f"found '{token or 'end of string'}', expected: identifier")
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
        return token

    def value_set(self) -> list[str]:
        if self.take() != "(":
            raise self.fail("expected: '('")
        values: list[str] = []
        while True:
            token = self.peek()
            if token == ")":
                self.take()
                break
            if token == ",":
                self.take()
                values.append("")
                continue
            values.append(self.value(allow_empty=False))
            nxt = self.take()
            if nxt == ")":
                break
            if nxt != ",":
                raise self.fail(f"found '{nxt or 'end of string'}', expected: ',' or ')'")
        return values


def parse_label_selector(text: str) -> Selector:
    """Parse a `labelSelector` query value. The empty string selects everything."""
    return _Parser(text).parse() if text.strip() else EVERYTHING


def _requirement_text(req: Requirement) -> str:
    if req.operator == DOES_NOT_EXIST:
        return f"!{req.key}"
    if req.operator == EXISTS:
        return req.key
    values = ",".join(sorted(req.values))
    if req.operator in (IN, NOT_IN):
        values = f"({values})"
    return f"{req.key}{_WRITTEN.get(req.operator, req.operator)}{values}"


def to_string(selector: Selector) -> str:
    """The selector in the text form (`app=web,tier in (a,b)`), requirements sorted by key; "" for a
    selector that selects everything or nothing."""
    return ",".join(_requirement_text(r) for r in sorted(selector.requirements, key=lambda r: r.key))

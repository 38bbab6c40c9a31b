"""Label selectors with apimachinery's semantics (`metav1.LabelSelectorAsSelector`, `labels.Requirement`).

- `label_selector(obj)`: a `metav1.LabelSelector` as a `Selector`. A missing (nil) selector selects
  nothing; an empty one (no matchLabels, no matchExpressions) selects everything.
- Requirements: `In`/`NotIn` need at least one value, `Exists`/`DoesNotExist` none, `Gt`/`Lt`
  exactly one integer (node selectors only). Keys must be qualified names and values label values;
  a violation raises `SelectorError` whose message names the field, as the API's field errors do.
- Matching: `In` needs the key present with one of the values, `NotIn` passes when the key is absent,
  `Gt`/`Lt` compare base-10 int64 (a label value that is not one never matches).

Pure; callers: node affinity, inter-pod affinity and topology spread parsing in this package.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from runtimekit.kube.semantics.names import check_qualified_name

IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT = "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"
SELECTOR_OPS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST)
NODE_OPS = (*SELECTOR_OPS, GT, LT)
_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_INT_RE = re.compile(r"^[+-]?[0-9]+$")
_INT64 = (-(1 << 63), (1 << 63) - 1)


class SelectorError(ValueError):
    """A selector the API would reject; the message names the field and the value."""


def parse_int64(text: str) -> int | None:
    """Go's `strconv.ParseInt(text, 10, 64)`: an optional sign and digits, in int64 range; else None."""
    if not _INT_RE.match(text):
        return None
    value = int(text)
    return value if _INT64[0] <= value <= _INT64[1] else None


def check_label_value(value: str) -> str | None:
    """None when `value` is a valid label value (empty, or 1-63 alphanumerics with '-', '_', '.' inside)."""
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _VALUE_RE.match(value):
        return "a label value must be empty or alphanumeric at both ends with '-', '_' or '.' inside"
    return None


@dataclass(frozen=True, slots=True)
class Requirement:
    """One requirement of a selector. `bound` is the parsed value of `Gt`/`Lt`."""

    key: str
    operator: str
    values: frozenset[str] = frozenset()
    bound: int = 0

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        op = self.operator
        if op == IN:
            return value is not None and value in self.values
        if op == NOT_IN:
            return value is None or value not in self.values
        if op == EXISTS:
            return value is not None
        if op == DOES_NOT_EXIST:
            return value is None
        if value is None:
            return False
        number = parse_int64(value)
        if number is None:
            return False
        return number > self.bound if op == GT else number < self.bound


def requirement(
    key: str, op: str, values: Iterable[Any], path: str, ops: tuple[str, ...] = SELECTOR_OPS
) -> Requirement:
    """A validated requirement (apimachinery's `NewRequirement`); raises SelectorError naming `path`."""
    vals = [str(v) for v in values]
    if op not in ops:
        raise SelectorError(f'{path}.operator: Unsupported value: "{op}": supported values: {", ".join(ops)}')
    if problem := check_qualified_name(key):
        raise SelectorError(f'{path}.key: Invalid value: "{key}": {problem}')
    bound = 0
    if op in (IN, NOT_IN) and not vals:
        raise SelectorError(f"{path}.values: Invalid value: []: for 'In', 'NotIn' operators, values set can't be empty")
    if op in (EXISTS, DOES_NOT_EXIST) and vals:
        raise SelectorError(
            f"{path}.values: Invalid value: {vals}: values set must be empty for Exists and DoesNotExist"
        )
    if op in (GT, LT):
        parsed = parse_int64(vals[0]) if len(vals) == 1 else None
        if parsed is None:
            raise SelectorError(
                f"{path}.values: Invalid value: {vals}: for 'Gt', 'Lt' operators, exactly one integer value"
            )
        bound = parsed
    for i, value in enumerate(vals):
        if problem := check_label_value(value):
            raise SelectorError(f'{path}.values[{i}][{key}]: Invalid value: "{value}": {problem}')
    return Requirement(key, op, frozenset(vals), bound)


@dataclass(frozen=True, slots=True)
class Selector:
    """Requirements ANDed. `nothing` selects no object at all (a nil selector)."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        for req in self.requirements:  # noqa: SIM110 - a plain loop: this runs once per pod per selector
            if not req.matches(labels):
                return False
        return True

    @property
    def everything(self) -> bool:
        """Selects every object (apimachinery's `Selector.Empty()`)."""
        return not self.nothing and not self.requirements

    def hint(self) -> tuple[str, str] | None:
        """A (key, value) pair every selected object carries, when one is implied; for index lookups."""
        if self.nothing:
            return None
        for req in self.requirements:
            if req.operator == IN and len(req.values) == 1:
                return req.key, next(iter(req.values))
        return None

    def adding(self, extra: Iterable[Requirement]) -> Selector:
        """This selector with more requirements ANDed (a nil selector gains them as an empty one would)."""
        return Selector((*self.requirements, *extra))


EVERYTHING = Selector()
NOTHING = Selector(nothing=True)


def label_selector(obj: Any, path: str = "labelSelector") -> Selector:
    """A `metav1.LabelSelector` mapping (or None) as a Selector; raises SelectorError when invalid."""
    if obj is None:
        return NOTHING
    if not isinstance(obj, Mapping):
        raise SelectorError(f"{path}: must be an object, got {obj!r}")
    match_labels = obj.get("matchLabels") or {}
    expressions = obj.get("matchExpressions") or []
    if not isinstance(match_labels, Mapping) or not isinstance(expressions, list):
        raise SelectorError(f"{path}: matchLabels must be a map and matchExpressions a list")
    reqs = [requirement(str(k), IN, [v], f"{path}.matchLabels") for k, v in sorted(match_labels.items())]
    for i, expr in enumerate(expressions):
        where = f"{path}.matchExpressions[{i}]"
        if not isinstance(expr, Mapping):
            raise SelectorError(f"{where}: must be an object")
        reqs.append(
            requirement(str(expr.get("key", "")), str(expr.get("operator", "")), expr.get("values") or (), where)
        )
    return Selector(tuple(reqs))


def label_keys_requirements(keys: Any, labels: Mapping[str, str], op: str, path: str) -> tuple[Requirement, ...]:
    """`matchLabelKeys` (op In) or `mismatchLabelKeys` (op NotIn): for each key the pod carries, a
    requirement on the pod's own value; keys the pod does not carry are left out."""
    if keys is None:
        return ()
    if not isinstance(keys, list):
        raise SelectorError(f"{path}: must be a list of label keys")
    out = []
    for i, item in enumerate(keys):
        key = str(item)
        if problem := check_qualified_name(key):
            raise SelectorError(f'{path}[{i}]: Invalid value: "{key}": {problem}')
        if key in labels:
            out.append(Requirement(key, op, frozenset({labels[key]})))
    return tuple(out)

"""Label selectors with apimachinery's semantics (`labels.Requirement`, `metav1.LabelSelectorAsSelector`,
`ValidateLabelSelector`), written once for every component.

- `Requirement`, `Selector`: the one value type of a selector, whether it came from an object
  (`label_selector`), from the text grammar (`labeltext.parse_label_selector`) or from
  `matchLabelKeys`. Requirements are ANDed; `NOTHING` (a nil selector) selects no object at all,
  `EVERYTHING` (an empty one) every object.
- Operators keep the spelling they were written in (`In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`,
  `Lt` as the API objects write them; `=`, `==`, `!=` from `matchLabels` and the text grammar), so a
  selector prints back as apimachinery prints it; `=` and `==` match as `In`, `!=` as `NotIn`.
- Construction (`requirement`, apimachinery's `NewRequirement`): `In`/`NotIn` need at least one value,
  `Exists`/`DoesNotExist` none, `=`/`==`/`!=` exactly one, `Gt`/`Lt` exactly one integer (node
  selectors and the text grammar only). Keys must be qualified names and values label values; a
  violation raises `SelectorError` whose message names the field, as the API's field errors do.
- Matching: `In` needs the key present with one of the values, `NotIn` passes when the key is absent,
  `Gt`/`Lt` compare base-10 int64 (a label value that is not one never matches).
- `selector_problems`: what the API server refuses in a `metav1.LabelSelector`, as field errors.

Pure; callers: the scheduler's Kubernetes semantics (`scheduler.kubesem`) and policies (PodDisruption
Budgets), the embedded API server (list filters, workload validation, the scale subresource) and the
embedded cluster's workload controllers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runtimekit.kube.objects import LabelSelector
from runtimekit.kube.semantics.names import check_label_value, check_qualified_name

IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT = "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"
EQUALS, DOUBLE_EQUALS, NOT_EQUALS = "=", "==", "!="
SELECTOR_OPS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST)
NODE_OPS = (*SELECTOR_OPS, GT, LT)
TEXT_OPS = (*NODE_OPS, EQUALS, DOUBLE_EQUALS, NOT_EQUALS)
# how each operator matches: `=` and `==` as In, `!=` as NotIn
_MATCHES_AS = {EQUALS: IN, DOUBLE_EQUALS: IN, NOT_EQUALS: NOT_IN} | {op: op for op in NODE_OPS}
_INT_RE = re.compile(r"[+-]?[0-9]+")
_INT64 = (-(1 << 63), (1 << 63) - 1)


class SelectorError(ValueError):
    """A selector the API would reject; the message names the field and the value."""


def parse_int64(text: str) -> int | None:
    """Go's `strconv.ParseInt(text, 10, 64)`: an optional sign and digits, in int64 range; else None."""
    if not _INT_RE.fullmatch(text):
        return None
    value = int(text)
    return value if _INT64[0] <= value <= _INT64[1] else None


@dataclass(frozen=True, slots=True)
class Requirement:
    """One requirement of a selector. `bound` is the parsed value of `Gt`/`Lt`."""

    key: str
    operator: str
    values: frozenset[str] = frozenset()
    bound: int = 0
    # the operator it matches as (In, NotIn, Exists, DoesNotExist, Gt, Lt): one comparison per test
    matches_as: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "matches_as", _MATCHES_AS.get(self.operator, self.operator))

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        op = self.matches_as
        if op == IN:
            return value is not None and value in self.values
        if op == NOT_IN:
            return value is None or value not in self.values
        if op == EXISTS:
            return value is not None
        if op == DOES_NOT_EXIST:
            return value is None
        if value is None or op not in (GT, LT):
            return False
        number = parse_int64(value)
        if number is None:
            return False
        return number > self.bound if op == GT else number < self.bound


def _at(path: str, child: str) -> str:
    return f"{path}.{child}" if path else child


def requirement(
    key: str, op: str, values: Iterable[Any], path: str, ops: tuple[str, ...] = SELECTOR_OPS
) -> Requirement:
    """A validated requirement (apimachinery's `NewRequirement`); raises SelectorError naming `path`."""
    vals = [str(v) for v in values]
    if op not in ops:
        raise SelectorError(f'{_at(path, "operator")}: Unsupported value: "{op}": supported values: {", ".join(ops)}')
    if problem := check_qualified_name(key):
        raise SelectorError(f'{_at(path, "key")}: Invalid value: "{key}": {problem}')
    where = _at(path, "values")
    bound = 0
    if op in (IN, NOT_IN) and not vals:
        raise SelectorError(f"{where}: Invalid value: []: for 'In', 'NotIn' operators, values set can't be empty")
    if op in (EXISTS, DOES_NOT_EXIST) and vals:
        raise SelectorError(f"{where}: Invalid value: {vals}: values set must be empty for Exists and DoesNotExist")
    if op in (EQUALS, DOUBLE_EQUALS, NOT_EQUALS) and len(vals) != 1:
        raise SelectorError(f"{where}: Invalid value: {vals}: exact-match compatibility requires one single value")
    if op in (GT, LT):
        parsed = parse_int64(vals[0]) if len(vals) == 1 else None
        if parsed is None:
            raise SelectorError(f"{where}: Invalid value: {vals}: for 'Gt', 'Lt' operators, exactly one integer value")
        bound = parsed
    for i, value in enumerate(vals):
        if problem := check_label_value(value):
            raise SelectorError(f'{where}[{i}][{key}]: Invalid value: "{value}": {problem}')
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
            if req.matches_as == IN and len(req.values) == 1:
                return req.key, next(iter(req.values))
        return None

    def adding(self, extra: Iterable[Requirement]) -> Selector:
        """This selector with more requirements ANDed (a nil selector gains them as an empty one would)."""
        return Selector((*self.requirements, *extra))


EVERYTHING = Selector()
NOTHING = Selector(nothing=True)


def label_selector(obj: LabelSelector | Mapping[str, object] | None, path: str = "labelSelector") -> Selector:
    """A `metav1.LabelSelector` (or None) as a Selector; raises SelectorError when invalid. `matchLabels`
    become `=` requirements (sorted by key), then the expressions in their order."""
    if obj is None:
        return NOTHING
    if not isinstance(obj, Mapping):
        raise SelectorError(f"{path}: must be an object, got {obj!r}")
    match_labels = obj.get("matchLabels") or {}
    expressions = obj.get("matchExpressions") or []
    if not isinstance(match_labels, Mapping) or not isinstance(expressions, list):
        raise SelectorError(f"{path}: matchLabels must be a map and matchExpressions a list")
    reqs = [requirement(str(k), EQUALS, [v], f"{path}.matchLabels", (EQUALS,)) for k, v in sorted(match_labels.items())]
    for i, expr in enumerate(expressions):
        where = f"{path}.matchExpressions[{i}]"
        if not isinstance(expr, Mapping):
            raise SelectorError(f"{where}: must be an object")
        reqs.append(
            requirement(str(expr.get("key", "")), str(expr.get("operator", "")), expr.get("values") or (), where)
        )
    return Selector(tuple(reqs))


def label_selector_or_nothing(obj: LabelSelector | Mapping[str, object] | None) -> Selector:
    """`label_selector`, except that a selector that does not parse selects nothing: what controllers
    and kube-scheduler do with one they cannot convert."""
    try:
        return label_selector(obj)
    except SelectorError:
        return NOTHING


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


@dataclass(frozen=True)
class SelectorProblem:
    """One field error of a selector: `kind` is `Required`, `Forbidden` or `Invalid` (with `value`)."""

    path: str
    kind: str
    detail: str
    value: object = None


def selector_problems(obj: object, path: str) -> list[SelectorProblem]:
    """What kube-apiserver refuses in a `metav1.LabelSelector` at `path` (`ValidateLabelSelector`):
    label keys and values, operators, values where they are required or forbidden. None is fine."""
    if obj is None:
        return []
    if not isinstance(obj, Mapping):
        return [SelectorProblem(path, "Invalid", "must be an object with matchLabels and/or matchExpressions", obj)]
    found: list[SelectorProblem] = []
    match_labels = obj.get("matchLabels") or {}
    if not isinstance(match_labels, Mapping):
        found.append(SelectorProblem(f"{path}.matchLabels", "Invalid", "must be a map of label keys to values", {}))
        match_labels = {}
    for key, value in match_labels.items():
        if problem := check_qualified_name(str(key)):
            found.append(SelectorProblem(f"{path}.matchLabels", "Invalid", problem, str(key)))
        if problem := check_label_value(str(value)):
            found.append(SelectorProblem(f"{path}.matchLabels", "Invalid", problem, str(value)))
    expressions = obj.get("matchExpressions") or []
    for i, expr in enumerate(expressions if isinstance(expressions, list) else [expressions]):
        found += _requirement_problems(expr, f"{path}.matchExpressions[{i}]")
    return found


def _requirement_problems(expr: object, path: str) -> list[SelectorProblem]:
    """`ValidateLabelSelectorRequirement`."""
    if not isinstance(expr, Mapping):
        return [SelectorProblem(path, "Invalid", "must be an object with key, operator and values", expr)]
    found: list[SelectorProblem] = []
    operator, values = expr.get("operator"), [str(v) for v in expr.get("values") or []]
    if operator in (IN, NOT_IN):
        if not values:
            found.append(
                SelectorProblem(f"{path}.values", "Required", "must be specified when `operator` is 'In' or 'NotIn'")
            )
    elif operator in (EXISTS, DOES_NOT_EXIST):
        if values:
            why = "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
            found.append(SelectorProblem(f"{path}.values", "Forbidden", why))
    else:
        found.append(SelectorProblem(f"{path}.operator", "Invalid", "not a valid selector operator", operator))
    key = str(expr.get("key", ""))
    if problem := check_qualified_name(key):
        found.append(SelectorProblem(f"{path}.key", "Invalid", problem, key))
    for i, value in enumerate(values):
        if problem := check_label_value(value):
            found.append(SelectorProblem(f"{path}.values[{i}]", "Invalid", problem, value))
    return found

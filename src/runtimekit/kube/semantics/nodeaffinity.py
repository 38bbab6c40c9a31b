"""Node selection by a pod: `nodeSelector`, required and preferred node affinity, with the semantics of
component-helpers' `nodeaffinity` package (what kube-scheduler's NodeAffinity plugin and kubelet's
admission both read).

- Required terms are ORed, a term's requirements ANDed. A term with neither matchExpressions nor
  matchFields selects no node; so does a required affinity with no terms. A term that does not
  parse (bad key or value, unknown operator, `Gt` without one integer) never matches, and the
  other terms still may (the lazy errors of `LazyErrorNodeSelector`).
- `matchFields` knows `metadata.name` only; its operators are `In`/`NotIn` with exactly one value.
- `Gt`/`Lt` compare the node's label as a base-10 int64; a label that is not one never matches.
- Preferred terms: weight 0 and empty terms are skipped; a node scores the sum of the weights of
  the terms it matches (`preferred_score`).

Terms are tuples of requirements with `key`, `operator` and `values` (field requirements carry the
`field:` prefix), the shape the scheduler's `Constraints` stores. Pure; callers: the scheduler's pod
parsing, its predicates and nodeorder plugins and topology spread's node inclusion.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from runtimekit.kube.objects import PodSpec
from runtimekit.kube.semantics.labels import IN, NODE_OPS, NOT_IN, SelectorError, parse_int64, requirement

FIELD_PREFIX = "field:"
NAME_FIELD = FIELD_PREFIX + "metadata.name"
INVALID = "Invalid"  # the operator of the requirement that stands for a term that does not parse


class RequirementLike(Protocol):
    @property
    def key(self) -> str: ...

    @property
    def operator(self) -> str: ...

    @property
    def values(self) -> Collection[str]: ...


@dataclass(frozen=True)
class NodeRequirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()


Term = tuple[NodeRequirement, ...]


def requirement_matches(req: RequirementLike, labels: Mapping[str, str], name: str) -> bool:
    """Whether a node with these labels and this name meets one requirement of a term."""
    op, key = req.operator, req.key
    if key.startswith(FIELD_PREFIX):
        if not name:  # a node without a name has no fields: field requirements do not apply
            return True
        field = name if key == NAME_FIELD else ""
        (wanted,) = req.values
        return field == wanted if op == IN else field != wanted
    value = labels.get(key)
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None:
        number, (bound_text,) = parse_int64(value), req.values
        bound = parse_int64(bound_text)
        if number is None or bound is None:
            return False
        return number > bound if op == "Gt" else number < bound
    return False  # INVALID and anything unknown


def term_matches(term: Sequence[RequirementLike], labels: Mapping[str, str], name: str) -> bool:
    """A term matches when it has requirements and the node meets all of them."""
    if not term:
        return False
    for req in term:  # noqa: SIM110 - a plain loop: this runs per node per distinct constraint
        if not requirement_matches(req, labels, name):
            return False
    return True


def required_matches(
    node_selector: Sequence[tuple[str, str]],
    terms: Sequence[Sequence[RequirementLike]],
    labels: Mapping[str, str],
    name: str,
) -> bool:
    """nodeSelector (every pair present and equal) and, when there are terms, at least one term."""
    for key, value in node_selector:
        if labels.get(key) != value:
            return False
    if not terms:
        return True
    for term in terms:  # noqa: SIM110 - as above
        if term_matches(term, labels, name):
            return True
    return False


def _term(obj: Any, path: str) -> Term:
    """One NodeSelectorTerm; raises SelectorError when it does not parse. `()` for an empty term."""
    if obj is None:
        return ()
    if not isinstance(obj, Mapping):
        raise SelectorError(f"{path}: must be an object")
    out: list[NodeRequirement] = []
    for i, expr in enumerate(obj.get("matchExpressions") or []):
        where = f"{path}.matchExpressions[{i}]"
        if not isinstance(expr, Mapping):
            raise SelectorError(f"{where}: must be an object")
        op = str(expr.get("operator", ""))
        if op not in NODE_OPS:
            raise SelectorError(f'{where}.operator: "{op}" is not a valid node selector operator')
        req = requirement(str(expr.get("key", "")), op, expr.get("values") or (), where, NODE_OPS)
        out.append(NodeRequirement(req.key, req.operator, tuple(sorted(req.values))))
    for i, expr in enumerate(obj.get("matchFields") or []):
        where = f"{path}.matchFields[{i}]"
        if not isinstance(expr, Mapping):
            raise SelectorError(f"{where}: must be an object")
        op, values = str(expr.get("operator", "")), [str(v) for v in expr.get("values") or ()]
        if op not in (IN, NOT_IN):
            raise SelectorError(f'{where}.operator: "{op}" is not a valid node field selector operator')
        if len(values) != 1:
            raise SelectorError(f'{where}.values: unexpected number of value ({len(values)}) for operator "{op}"')
        out.append(NodeRequirement(FIELD_PREFIX + str(expr.get("key", "")), op, (values[0],)))
    return tuple(out)


def _invalid(reason: str) -> Term:
    return (NodeRequirement("", INVALID, (reason,)),)


def node_selector_pairs(spec: PodSpec) -> tuple[tuple[str, str], ...]:
    """The nodeSelector's pairs; raises SelectorError when it is not an object."""
    selector = spec.get("nodeSelector") or {}
    if not isinstance(selector, Mapping):
        raise SelectorError("nodeSelector: must be an object")
    return tuple(sorted((str(k), str(v)) for k, v in selector.items()))


def _shaped(item: Any, path: str) -> None:
    """Raises SelectorError when a term is not shaped as the API requires (an object of lists of
    objects): such a pod is malformed, not merely unmatched."""
    if item is None:
        return
    if not isinstance(item, Mapping):
        raise SelectorError(f"{path}: must be an object")
    for field in ("matchExpressions", "matchFields"):
        exprs = item.get(field) or []
        if not isinstance(exprs, list) or not all(isinstance(e, Mapping) for e in exprs):
            raise SelectorError(f"{path}.{field}: must be a list of objects")


def required_terms(spec: PodSpec) -> tuple[Term, ...]:
    """The required node affinity of a pod spec as terms. `()` when the pod states none; a required
    affinity that can never match (no terms) is `((),)`. Terms whose requirements do not parse (an
    unknown operator, values that do not suit it) are kept as a never-matching term carrying the
    reason, as kube-scheduler's lazy-error node selector ignores them; a malformed shape (a term
    that is not an object) raises SelectorError."""
    node_affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}) if isinstance(spec, Mapping) else {}
    if not isinstance(node_affinity, Mapping):
        raise SelectorError("affinity.nodeAffinity: must be an object")
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return ()
    if not isinstance(required, Mapping):
        raise SelectorError("requiredDuringSchedulingIgnoredDuringExecution: must be an object")
    items = required.get("nodeSelectorTerms") or []
    if not isinstance(items, list):
        raise SelectorError("nodeSelectorTerms: must be a list")
    terms: list[Term] = []
    for i, item in enumerate(items):
        path = f"nodeSelectorTerms[{i}]"
        _shaped(item, path)
        try:
            terms.append(_term(item, path))
        except SelectorError as exc:
            terms.append(_invalid(str(exc)))
    return tuple(terms) or ((),)


@dataclass(frozen=True)
class PreferredTerm:
    weight: int
    term: Term


def preferred_terms(spec: PodSpec) -> tuple[PreferredTerm, ...]:
    """The preferred node affinity terms (weight 0 and empty terms left out). Raises SelectorError
    when one does not parse: kube-scheduler's PreScore fails the pod then."""
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    out: list[PreferredTerm] = []
    for i, item in enumerate(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []):
        if not isinstance(item, Mapping):
            raise SelectorError(f"preferredDuringSchedulingIgnoredDuringExecution[{i}]: must be an object")
        weight = item.get("weight", 0)
        term = _term(item.get("preference"), f"[{i}].preference")
        if isinstance(weight, int) and weight and term:
            out.append(PreferredTerm(weight, term))
    return tuple(out)


def preferred_score(terms: Sequence[PreferredTerm], labels: Mapping[str, str], name: str) -> int:
    """The sum of the weights of the terms the node matches (before normalisation)."""
    return sum(t.weight for t in terms if term_matches(t.term, labels, name))

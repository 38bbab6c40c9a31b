"""Cluster policy objects a session may carry besides nodes, pods and queues: PodDisruptionBudgets (the
`pdb` plugin keeps evictions within them) and ResourceQuotas (the `resourcequota` plugin admits pod
groups within them). Frozen values; the live cache reads them from the API (`cache/policy.py`). A
leaf module (`info.py` uses it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction


@dataclass(frozen=True)
class LabelRequirement:
    """One `matchExpressions` entry of a label selector: key In/NotIn/Exists/DoesNotExist values."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        if self.operator == "DoesNotExist":
            return value is None
        return False  # not an operator of label selectors: selects nothing


@dataclass(frozen=True)
class LabelSelector:
    """A metav1.LabelSelector: every `matchLabels` pair and every expression must hold."""

    match_labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[LabelRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.match_labels and not self.expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels) and all(
            r.matches(labels) for r in self.expressions
        )


@dataclass(frozen=True)
class DisruptionBudget:
    """A PodDisruptionBudget. `allowed` is `status.disruptionsAllowed` once the disruption controller
    has written a status (None before: the plugin works it out from the spec); `disrupted` are the
    pods the API server already counts as disrupted (`status.disruptedPods`)."""

    namespace: str
    name: str
    selector: LabelSelector | None  # None: the spec has none (it selects nothing)
    allowed: int | None = None
    min_available: int | str | None = None  # a count or a percentage ("50%")
    max_unavailable: int | str | None = None
    disrupted: frozenset[str] = frozenset()


@dataclass(frozen=True)
class NamespaceQuota:
    """A ResourceQuota: `hard` limits by quota resource name (`cpu`, `requests.memory`, `pods`, ...) and
    what is `used` of them (`status.used`, or None when no quota controller has written it)."""

    namespace: str
    name: str
    hard: Mapping[str, Fraction] = field(default_factory=dict)
    used: Mapping[str, Fraction] | None = None

"""Cluster policy objects a session may carry besides nodes, pods and queues: PodDisruptionBudgets (the
`pdb` plugin keeps evictions within them) and ResourceQuotas (the `resourcequota` plugin admits pod
groups within them). Frozen values; the live cache reads them from the API (`cache/policy.py`). A
leaf of the framework (`info.py` uses it); a budget's selector is Kubernetes' (`kube.semantics.labels`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from runtimekit.kube.objects import IntOrString
from runtimekit.kube.semantics.labels import Selector


@dataclass(frozen=True)
class DisruptionBudget:
    """A PodDisruptionBudget. `allowed` is `status.disruptionsAllowed` once the disruption controller
    has written a status (None before: the plugin works it out from the spec); `disrupted` are the
    pods the API server already counts as disrupted (`status.disruptedPods`)."""

    namespace: str
    name: str
    selector: Selector  # NOTHING when the spec has none, or one that does not parse
    allowed: int | None = None
    min_available: IntOrString | None = None  # a count or a percentage ("50%")
    max_unavailable: IntOrString | None = None
    disrupted: frozenset[str] = frozenset()


@dataclass(frozen=True)
class NamespaceQuota:
    """A ResourceQuota: `hard` limits by quota resource name (`cpu`, `requests.memory`, `pods`, ...) and
    what is `used` of them (`status.used`, or None when no quota controller has written it)."""

    namespace: str
    name: str
    hard: Mapping[str, Fraction] = field(default_factory=dict)
    used: Mapping[str, Fraction] | None = None

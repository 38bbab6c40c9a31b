"""Topology spread over the placed pods of a session: the per-constraint inputs of the spread math
(`spread.SpreadInput`) from a `PodIndex`, the node `Topology` and the pod's node masks.

Pure; callers: the predicates plugin (hard constraints) and the nodeorder plugin (soft ones).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from runtimekit.kube.semantics.labels import NOTHING
from runtimekit.scheduler.kubesem.affinity import AffinityTerm
from runtimekit.scheduler.kubesem.index import PodIndex
from runtimekit.scheduler.kubesem.pods import PodFacts
from runtimekit.scheduler.kubesem.spread import SpreadConstraint, SpreadInput
from runtimekit.scheduler.kubesem.topology import Topology

Mask = npt.NDArray[np.bool_]


def counting_term(constraint: SpreadConstraint, namespace: str) -> AffinityTerm:
    """The term that selects the pods a constraint counts (its selector, the pod's namespace); the
    topology key is left out so that constraints alike share one count."""
    return AffinityTerm(frozenset({namespace}), NOTHING, constraint.selector, "")


def inputs(
    constraints: Sequence[SpreadConstraint],
    pod: PodFacts,
    index: PodIndex,
    topology: Topology,
    affinity: Mask,
    taints: Mask,
) -> list[SpreadInput]:
    """One input per constraint. `affinity`/`taints`: per row, the node matches the pod's required
    node affinity and selector / has no NoSchedule or NoExecute taint the pod does not tolerate
    (read only for constraints whose inclusion policy honours them). A node counts towards the
    domains only when it carries the keys of all `constraints`."""
    keys = topology.has_all(c.topology_key for c in constraints)
    out = []
    for c in constraints:
        eligible = keys
        if c.honor_affinity:
            eligible = eligible & affinity
        if c.honor_taints:
            eligible = eligible & taints
        if c.counts_pods:
            count = index.counts((counting_term(c, pod.namespace),), skip_terminating=True)
        else:
            count = np.zeros(topology.rows, np.int64)
        out.append(SpreadInput(c, topology.domains(c.topology_key), count, eligible))
    return out

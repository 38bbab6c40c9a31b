"""Inter-pod affinity and anti-affinity with the semantics of kube-scheduler's InterPodAffinity plugin.

Filter, per node, in this order (the first failure is the node's reason):
1. the pod's required affinity: the node carries every term's topology key and, for each term, its
   domain holds a pod that all the terms select; except that when no pod anywhere is selected by
   all the terms and the pod selects itself, it may go to any node carrying the keys (the first pod
   of a group with affinity to itself);
2. the pod's required anti-affinity: no term's domain on the node holds a pod the term selects;
3. the existing pods' required anti-affinity: no placed pod whose term selects the incoming pod is
   in that term's domain on the node.

Score (before nodeorder's weight): per topology (key, value) the sum of +weight for each placed
pod the incoming pod's preferred affinity terms select (-weight for anti-affinity), +weight for
each placed pod whose preferred affinity term selects the incoming pod (-weight for anti-affinity),
and +hardPodAffinityWeight for each placed pod whose required affinity term selects it; a node
scores the sum over its labels, normalised to 0-100 by (s - min) / (max - min) over the scored
nodes (all 0 when nothing counted).

Pure (arrays over node rows); callers: the predicates and nodeorder plugins.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from runtimekit.scheduler.kubesem.affinity import AffinityTerm, WeightedTerm
from runtimekit.scheduler.kubesem.index import PodIndex
from runtimekit.scheduler.kubesem.pods import PodFacts
from runtimekit.scheduler.kubesem.topology import Topology

Ints = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]

AFFINITY_REASON = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_REASON = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY_REASON = "node(s) didn't satisfy existing pods anti-affinity rules"
PASS, AFFINITY, ANTI_AFFINITY, EXISTING_ANTI_AFFINITY = 0, 1, 2, 3
REASONS = {
    AFFINITY: AFFINITY_REASON,
    ANTI_AFFINITY: ANTI_AFFINITY_REASON,
    EXISTING_ANTI_AFFINITY: EXISTING_ANTI_AFFINITY_REASON,
}
MAX_SCORE = 100


def _domain_sums(topology: Topology, key: str, counts: Ints) -> tuple[Ints, npt.NDArray[np.float64]]:
    """The rows' domains for `key` and the per-domain sums of `counts`."""
    domains = topology.domains(key)
    has = domains >= 0
    sums = np.bincount(domains[has], weights=counts[has], minlength=topology.count(key)).astype(np.float64)
    return domains, sums


def _at(sums: npt.NDArray[np.float64], domains: Ints) -> npt.NDArray[np.float64]:
    if sums.size == 0:
        return np.zeros(domains.size)
    return np.where(domains >= 0, sums[np.maximum(domains, 0)], 0.0)


def affinity_fails(index: PodIndex, topology: Topology, pod: PodFacts) -> Mask:
    """Per row: the pod's required affinity rejects the node."""
    terms = pod.affinity
    counts = index.counts(terms)
    missing = np.zeros(topology.rows, np.bool_)
    found = np.ones(topology.rows, np.bool_)
    anywhere = False
    for term in terms:
        domains, sums = _domain_sums(topology, term.topology_key, counts)
        missing |= domains < 0
        found &= _at(sums, domains) > 0
        anywhere = anywhere or bool(sums.any())
    if not anywhere:
        own = index.ns_labels(pod.namespace)
        if all(t.matches(pod.namespace, pod.labels, own) for t in terms):
            return missing
    return missing | ~found


def anti_affinity_fails(index: PodIndex, topology: Topology, pod: PodFacts) -> Mask:
    """Per row: a term of the pod's required anti-affinity finds a selected pod in the node's domain."""
    out = np.zeros(topology.rows, np.bool_)
    for term in pod.anti_affinity:
        domains, sums = _domain_sums(topology, term.topology_key, index.counts((term,)))
        out |= _at(sums, domains) > 0
    return out


def existing_anti_affinity_fails(index: PodIndex, topology: Topology, pod: PodFacts) -> Mask | None:
    """Per row: a placed pod's required anti-affinity term selects the pod and holds the node's
    domain. None when no placed pod has required anti-affinity."""
    if not index.has_anti_affinity:
        return None
    ns_labels = index.ns_labels(pod.namespace) or {}
    out = None
    for term, rows in index.selecting("anti_affinity", pod, ns_labels):
        assert isinstance(term, AffinityTerm)
        domains = topology.domains(term.topology_key)
        held = domains[np.fromiter(rows, np.int64, len(rows))]
        bad = held[held >= 0]
        if bad.size:
            flagged = np.zeros(topology.count(term.topology_key) + 1, np.bool_)  # the last: no domain (-1)
            flagged[bad] = True
            hit = flagged[domains]
            out = hit if out is None else out | hit
    return out


def filter_codes(index: PodIndex, topology: Topology, pod: PodFacts, rows: Ints) -> npt.NDArray[np.int8]:
    """Per row of `rows`: PASS or the first check the node fails (see REASONS)."""
    codes = np.zeros(rows.size, np.int8)
    checks = []
    if pod.affinity:
        checks.append((AFFINITY, affinity_fails(index, topology, pod)))
    if pod.anti_affinity:
        checks.append((ANTI_AFFINITY, anti_affinity_fails(index, topology, pod)))
    existing = existing_anti_affinity_fails(index, topology, pod)
    if existing is not None:
        checks.append((EXISTING_ANTI_AFFINITY, existing))
    for code, fails in reversed(checks):  # the first check's reason wins
        codes[fails[rows]] = code
    return codes


class _Topologies:
    """Score sums per topology key, per domain id."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.sums: dict[str, npt.NDArray[np.float64]] = {}
        self.touched = False

    def _of(self, key: str) -> npt.NDArray[np.float64]:
        found = self.sums.get(key)
        if found is None:
            found = self.sums[key] = np.zeros(self.topology.count(key))
        return found

    def add_counts(self, key: str, counts: Ints, weight: int) -> None:
        _domains, sums = _domain_sums(self.topology, key, counts)
        if sums.any():
            self.touched = True
            self._of(key)[:] += weight * sums

    def add_rows(self, key: str, rows: Mapping[int, int], weight: int) -> None:
        """Adds weight x count to the domain of each row (rows without the key count nowhere), summed
        with numpy: a term that every placed pod carries has thousands of rows, and the sums are
        whole numbers, exact in any order."""
        domains = self.topology.domains(key)[np.fromiter(rows.keys(), np.int64, len(rows))]
        counts = np.fromiter(rows.values(), np.int64, len(rows))
        kept = (domains >= 0) & (counts != 0)
        if kept.any():
            self.touched = True
            sums = self._of(key)
            sums += np.bincount(domains[kept], weights=weight * counts[kept], minlength=sums.size)

    def per_row(self, rows: Ints) -> npt.NDArray[np.float64]:
        out = np.zeros(rows.size)
        for key, sums in self.sums.items():
            out += _at(sums, self.topology.domains(key)[rows])
        return out


def raw_scores(index: PodIndex, topology: Topology, pod: PodFacts, rows: Ints, hard_weight: int) -> Ints | None:
    """kube-scheduler's InterPodAffinity Score per row of `rows`, before normalisation; None when
    no term counted anything (PreScore's Skip: every node scores 0)."""
    sums = _Topologies(topology)
    for weighted in pod.preferred_affinity:
        sums.add_counts(weighted.term.topology_key, index.counts((weighted.term,)), weighted.weight)
    for weighted in pod.preferred_anti_affinity:
        sums.add_counts(weighted.term.topology_key, index.counts((weighted.term,)), -weighted.weight)
    ns_labels = index.ns_labels(pod.namespace) or {}
    if hard_weight > 0:
        for term, placed in index.selecting("affinity", pod, ns_labels):
            assert isinstance(term, AffinityTerm)
            sums.add_rows(term.topology_key, placed, hard_weight)
    for key, placed in index.selecting("preferred_affinity", pod, ns_labels):
        assert isinstance(key, WeightedTerm)
        sums.add_rows(key.term.topology_key, placed, key.weight)
    for key, placed in index.selecting("preferred_anti_affinity", pod, ns_labels):
        assert isinstance(key, WeightedTerm)
        sums.add_rows(key.term.topology_key, placed, -key.weight)
    if not sums.touched:
        return None
    return np.rint(sums.per_row(rows)).astype(np.int64)


def normalize(raw: Ints) -> npt.NDArray[np.float64]:
    """kube-scheduler's NormalizeScore for inter-pod affinity: 100 x (s - min) / (max - min), truncated."""
    if raw.size == 0:
        return np.zeros(0)
    low, high = int(raw.min()), int(raw.max())
    if high - low <= 0:
        return np.zeros(raw.size)
    return np.trunc(MAX_SCORE * ((raw - low) / (high - low)))


def needs_filter(pod: PodFacts, index: PodIndex) -> bool:
    """Whether the filter has anything to check for this pod (else every node passes)."""
    return bool(pod.affinity or pod.anti_affinity) or index.has_anti_affinity

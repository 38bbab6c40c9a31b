"""Pod topology spread with the semantics of kube-scheduler's PodTopologySpread plugin (1.28-1.35).

Constraints: `whenUnsatisfiable` DoNotSchedule ones filter, ScheduleAnyway ones score. `minDomains`
defaults to 1, `nodeAffinityPolicy` to Honor and `nodeTaintsPolicy` to Ignore; `matchLabelKeys`
adds `key in (the pod's value)` for the keys the pod carries (a missing labelSelector stays one
that selects nothing). Pods are counted in the incoming pod's namespace only, terminating pods
not at all, and a constraint whose selector is empty ({}) counts no pod.

Filter, per node and constraint in order: a node without the topology key fails with the
"(missing required label)" reason; else skew = matching pods in its domain + 1 if the pod matches
its own selector - the smallest count over the eligible domains (0 when there are fewer eligible
domains than minDomains), and skew > maxSkew fails. A domain is eligible when a node in it carries
every constraint's key and passes the constraint's inclusion policies.

Score (ScheduleAnyway): nodes without every key are ignored (0); per constraint the weight is
ln(domains among the scored nodes + 2) (for `kubernetes.io/hostname`, the scored nodes), a node
scores count x weight + maxSkew - 1 summed, rounded, and is normalised so fewer pods score higher.

Pure (numpy arrays over node rows); callers: the predicates and nodeorder plugins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from runtimekit.kube.objects import PodSpec
from runtimekit.kube.semantics.labels import IN, Selector, SelectorError, label_keys_requirements, label_selector

HOSTNAME = "kubernetes.io/hostname"
DO_NOT_SCHEDULE, SCHEDULE_ANYWAY = "DoNotSchedule", "ScheduleAnyway"
HONOR, IGNORE = "Honor", "Ignore"
REASON = "node(s) didn't match pod topology spread constraints"
LABEL_REASON = REASON + " (missing required label)"
MAX_SCORE = 100

Mask = npt.NDArray[np.bool_]
Ints = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    max_skew: int
    topology_key: str
    hard: bool  # whenUnsatisfiable: DoNotSchedule
    selector: Selector
    min_domains: int = 1
    honor_affinity: bool = True
    honor_taints: bool = False

    @property
    def counts_pods(self) -> bool:
        """False for an empty selector ({}): kube-scheduler counts no pod for it."""
        return not self.selector.everything


def _policy(given: Any, default: str, path: str) -> bool:
    value = default if given is None else str(given)
    if value not in (HONOR, IGNORE):
        raise SelectorError(f'{path}: Unsupported value: "{value}": supported values: Honor, Ignore')
    return value == HONOR


def spread_constraints(spec: PodSpec, labels: Mapping[str, str]) -> tuple[SpreadConstraint, ...]:
    """A pod's topologySpreadConstraints; raises SelectorError naming the first that is invalid."""
    out: list[SpreadConstraint] = []
    for i, obj in enumerate(spec.get("topologySpreadConstraints") or []):
        path = f"topologySpreadConstraints[{i}]"
        if not isinstance(obj, Mapping):
            raise SelectorError(f"{path}: must be an object")
        skew, when = obj.get("maxSkew"), str(obj.get("whenUnsatisfiable", ""))
        if not isinstance(skew, int) or isinstance(skew, bool) or skew <= 0:
            raise SelectorError(f"{path}.maxSkew: Invalid value: {skew!r}: must be greater than zero")
        if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            raise SelectorError(f'{path}.whenUnsatisfiable: Unsupported value: "{when}"')
        key = str(obj.get("topologyKey") or "")
        if not key:
            raise SelectorError(f"{path}.topologyKey: Required value: can not be empty")
        min_domains = obj.get("minDomains")
        min_domains = 1 if min_domains is None else min_domains
        if not isinstance(min_domains, int) or isinstance(min_domains, bool) or min_domains <= 0:
            raise SelectorError(f"{path}.minDomains: Invalid value: {min_domains!r}: must be greater than zero")
        selector = label_selector(obj.get("labelSelector"), f"{path}.labelSelector")
        extra = label_keys_requirements(obj.get("matchLabelKeys"), labels, IN, f"{path}.matchLabelKeys")
        if extra and not selector.nothing:
            selector = selector.adding(extra)
        honor_affinity = _policy(obj.get("nodeAffinityPolicy"), HONOR, f"{path}.nodeAffinityPolicy")
        honor_taints = _policy(obj.get("nodeTaintsPolicy"), IGNORE, f"{path}.nodeTaintsPolicy")
        out.append(
            SpreadConstraint(skew, key, when == DO_NOT_SCHEDULE, selector, min_domains, honor_affinity, honor_taints)
        )
    return tuple(out)


@dataclass(frozen=True)
class SpreadInput:
    """One constraint's view of the cluster, arrays over every node row.

    `domains`: the row's domain id for the constraint's key, -1 without the key; `count`: pods on the
    row the constraint counts; `eligible`: the row counts towards domains (it carries every key the
    constraints of its kind need and passes this constraint's inclusion policies)."""

    constraint: SpreadConstraint
    domains: Ints
    count: Ints
    eligible: Mask


PASS, MISSING_LABEL, TOO_SKEWED = 0, 1, 2
REASONS = {MISSING_LABEL: LABEL_REASON, TOO_SKEWED: REASON}


def filter_codes(inputs: Sequence[SpreadInput], pod_labels: Mapping[str, str], rows: Ints) -> npt.NDArray[np.int8]:
    """Per row of `rows`: PASS, or why the node fails the hard constraints (the first failing one):
    MISSING_LABEL or TOO_SKEWED (see REASONS)."""
    codes = np.zeros(rows.size, np.int8)
    for item in inputs:
        c = item.constraint
        sums, present = _domain_sums(item)
        smallest = float(sums[present].min()) if present.any() else float(2**31 - 1)
        if int(np.count_nonzero(present)) < c.min_domains:
            smallest = 0.0
        self_match = 1 if c.selector.matches(pod_labels) else 0
        row_domains = item.domains[rows]
        missing = row_domains < 0
        skewed = ~missing & (_at(sums, row_domains) + self_match - smallest > c.max_skew)
        codes = np.where(codes != PASS, codes, np.where(missing, MISSING_LABEL, np.where(skewed, TOO_SKEWED, PASS)))
    return codes.astype(np.int8)


def score(inputs: Sequence[SpreadInput], rows: Ints) -> npt.NDArray[np.float64]:
    """Normalised 0-100 scores of `rows` for the soft constraints (kube-scheduler's Score and
    NormalizeScore). A constraint on `kubernetes.io/hostname` counts the pods of the node itself."""
    if not inputs:
        return np.zeros(rows.size)
    ignored = np.zeros(rows.size, np.bool_)
    for item in inputs:
        ignored |= item.domains[rows] < 0
    kept = rows[~ignored]
    raw = np.zeros(rows.size)
    for item in inputs:
        c = item.constraint
        row_domains = item.domains[rows]
        if c.topology_key == HOSTNAME:
            size = int(kept.size)
            per_row = item.count[rows].astype(np.float64)
        else:
            sums, _present = _domain_sums(item)
            size = int(np.count_nonzero(np.bincount(item.domains[kept], minlength=sums.size)))
            per_row = _at(sums, row_domains)
        weight = float(np.log(size + 2))
        raw += np.where(row_domains >= 0, per_row * weight + (c.max_skew - 1), 0.0)
    rounded = np.floor(raw + 0.5)  # Go's math.Round for non-negative values
    rounded[ignored] = 0
    return normalize(rounded, ignored)


def _domain_sums(item: SpreadInput) -> tuple[npt.NDArray[np.float64], Mask]:
    """Per domain id: the pods counted on its eligible nodes, and whether it has an eligible node."""
    ndom = int(item.domains.max(initial=-1)) + 1
    use = item.eligible & (item.domains >= 0)
    picked = item.domains[use]
    sums = np.bincount(picked, weights=item.count[use], minlength=ndom).astype(np.float64)
    present = np.bincount(picked, minlength=ndom) > 0
    return sums, present


def _at(per_domain: npt.NDArray[np.float64], domains: Ints) -> npt.NDArray[np.float64]:
    """`per_domain[d]` for each domain id, 0 where the id is -1."""
    if per_domain.size == 0:
        return np.zeros(domains.size)
    return np.where(domains >= 0, per_domain[np.maximum(domains, 0)], 0.0)


def normalize(raw: npt.NDArray[np.float64], ignored: Mask) -> npt.NDArray[np.float64]:
    """kube-scheduler's NormalizeScore for topology spread: MaxNodeScore x (max + min - s) / max in
    integers, 100 for every node when the largest is 0, 0 for ignored nodes."""
    out = np.zeros(raw.size)
    kept = ~ignored
    if not kept.any():
        return out
    values = raw[kept].astype(np.int64)
    high, low = int(values.max(initial=0)), int(values.min())
    if high == 0:
        out[kept] = MAX_SCORE
    else:
        out[kept] = (MAX_SCORE * (high + low - values)) // high
    return out

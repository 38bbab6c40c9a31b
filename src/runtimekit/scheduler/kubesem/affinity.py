"""Inter-pod affinity terms with the semantics of kube-scheduler's `framework.AffinityTerm`.

A term selects the pods whose namespace is in `namespaces` or whose namespace's labels match
`ns_selector`, and whose labels match `selector`. With neither `namespaces` nor `namespaceSelector`
the term means the pod's own namespace; an empty `namespaceSelector` ({}) means every namespace, a
missing one none. `matchLabelKeys` adds `key in (the pod's value)` to the selector and
`mismatchLabelKeys` adds `key notin (the pod's value)`, for the keys the pod carries (what the API
server does on pod creation; doing it again is harmless). `topologyKey` names the node label whose
value forms the domain.

Pure; callers: the pod parsing in this package (`pods.py`) and the inter-pod affinity filter and score.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from runtimekit.kube.objects import Affinity
from runtimekit.kube.semantics.labels import (
    IN,
    NOT_IN,
    NOTHING,
    Selector,
    SelectorError,
    label_keys_requirements,
    label_selector,
)


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    namespaces: frozenset[str]
    ns_selector: Selector
    selector: Selector
    topology_key: str

    def matches(self, namespace: str, labels: Mapping[str, str], ns_labels: Mapping[str, str] | None) -> bool:
        """Whether a pod (namespace, labels) is selected. `ns_labels` are its namespace's labels
        (None: the namespace is not known, so only an empty namespaceSelector selects it; kube-scheduler
        reads an unknown incoming pod's namespace as having no labels, so callers pass {} there)."""
        if namespace not in self.namespaces:
            selector = self.ns_selector
            if selector.nothing:
                return False
            if not selector.everything and (ns_labels is None or not selector.matches(ns_labels)):
                return False
        return self.selector.matches(labels)


@dataclass(frozen=True, slots=True)
class WeightedTerm:
    term: AffinityTerm
    weight: int


def affinity_term(obj: Any, namespace: str, labels: Mapping[str, str], path: str) -> AffinityTerm:
    """One PodAffinityTerm of a pod in `namespace` with `labels`; raises SelectorError when invalid."""
    if not isinstance(obj, Mapping):
        raise SelectorError(f"{path}: must be an object")
    selector = label_selector(obj.get("labelSelector"), f"{path}.labelSelector")
    extra = label_keys_requirements(obj.get("matchLabelKeys"), labels, IN, f"{path}.matchLabelKeys")
    extra += label_keys_requirements(obj.get("mismatchLabelKeys"), labels, NOT_IN, f"{path}.mismatchLabelKeys")
    if extra:
        selector = selector.adding(extra)
    names = obj.get("namespaces") or []
    ns_obj = obj.get("namespaceSelector")
    own = not names and ns_obj is None  # neither field: the pod's own namespace
    namespaces = frozenset({namespace}) if own else frozenset(str(n) for n in names)
    ns_selector = label_selector(ns_obj, f"{path}.namespaceSelector") if ns_obj is not None else NOTHING
    return AffinityTerm(namespaces, ns_selector, selector, str(obj.get("topologyKey") or ""))


def affinity_terms(
    affinity: Affinity, kind: Literal["podAffinity", "podAntiAffinity"], namespace: str, labels: Mapping[str, str]
) -> tuple[tuple[AffinityTerm, ...], tuple[WeightedTerm, ...]]:
    """The required and preferred terms of `podAffinity` or `podAntiAffinity` (`kind`); raises
    SelectorError naming the first that does not parse."""
    block = affinity.get(kind) or {}
    if not isinstance(block, Mapping):
        raise SelectorError(f"{kind}: must be an object")
    required = tuple(
        affinity_term(obj, namespace, labels, f"{kind}.required[{i}]")
        for i, obj in enumerate(block.get("requiredDuringSchedulingIgnoredDuringExecution") or [])
    )
    preferred: list[WeightedTerm] = []
    for i, obj in enumerate(block.get("preferredDuringSchedulingIgnoredDuringExecution") or []):
        path = f"{kind}.preferred[{i}]"
        if not isinstance(obj, Mapping):
            raise SelectorError(f"{path}: must be an object")
        weight = obj.get("weight", 0)
        if not isinstance(weight, int) or isinstance(weight, bool):
            raise SelectorError(f"{path}.weight: must be an integer")
        preferred.append(WeightedTerm(affinity_term(obj.get("podAffinityTerm"), namespace, labels, path), weight))
    return required, tuple(preferred)

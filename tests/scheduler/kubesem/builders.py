"""Pod and node manifests for the kube-scheduler semantics tables, and a harness that runs the pure
filters and scores over them (node rows in the order the nodes are listed).

The tables (`*_cases.py`) hold the facts of kube-scheduler's own test tables (nodes, existing pods,
the incoming pod, the expected outcome per node) written as our own data; the pure tests here and
the plugin tests (`tests/scheduler/plugins`) run the same tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from runtimekit.kube.semantics.nodeaffinity import node_selector_pairs, required_matches, required_terms
from runtimekit.kube.semantics.tolerations import untolerated
from runtimekit.scheduler.kubesem import interpod, spread, spreading
from runtimekit.scheduler.kubesem.index import PodIndex
from runtimekit.scheduler.kubesem.podbook import PodBook
from runtimekit.scheduler.kubesem.pods import PodFacts, pod_facts
from runtimekit.scheduler.kubesem.topology import Topology

HOST = "kubernetes.io/hostname"
Json = dict[str, Any]


# -- label selectors ---------------------------------------------------------------------------
def sel(**match_labels: str) -> Json:
    return {"matchLabels": dict(match_labels)}


def expr(key: str, op: str, *values: str) -> Json:
    out: Json = {"key": key, "operator": op}
    if values:
        out["values"] = list(values)
    return out


def exprs(*items: Json) -> Json:
    return {"matchExpressions": list(items)}


def exists(key: str) -> Json:
    return exprs(expr(key, "Exists"))


def is_in(key: str, *values: str) -> Json:
    return exprs(expr(key, "In", *values))


def not_in(key: str, *values: str) -> Json:
    return exprs(expr(key, "NotIn", *values))


# -- pod affinity terms --------------------------------------------------------------------------
def term(
    selector: Json | None,
    topology: str,
    namespaces: Sequence[str] | None = None,
    ns_selector: Json | None = None,
    match_label_keys: Sequence[str] | None = None,
    mismatch_label_keys: Sequence[str] | None = None,
) -> Json:
    out: Json = {"topologyKey": topology}
    if selector is not None:
        out["labelSelector"] = selector
    if namespaces is not None:
        out["namespaces"] = list(namespaces)
    if ns_selector is not None:
        out["namespaceSelector"] = ns_selector
    if match_label_keys is not None:
        out["matchLabelKeys"] = list(match_label_keys)
    if mismatch_label_keys is not None:
        out["mismatchLabelKeys"] = list(mismatch_label_keys)
    return out


def weighted(weight: int, item: Json) -> Json:
    return {"weight": weight, "podAffinityTerm": item}


def constraint(
    max_skew: int,
    key: str,
    selector: Json | None,
    when: str = "DoNotSchedule",
    min_domains: int | None = None,
    affinity_policy: str | None = None,
    taints_policy: str | None = None,
    match_label_keys: Sequence[str] | None = None,
) -> Json:
    out: Json = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when}
    if selector is not None:
        out["labelSelector"] = selector
    if min_domains is not None:
        out["minDomains"] = min_domains
    if affinity_policy is not None:
        out["nodeAffinityPolicy"] = affinity_policy
    if taints_policy is not None:
        out["nodeTaintsPolicy"] = taints_policy
    if match_label_keys is not None:
        out["matchLabelKeys"] = list(match_label_keys)
    return out


def soft(max_skew: int, key: str, selector: Json | None, **kwargs: Any) -> Json:
    return constraint(max_skew, key, selector, when="ScheduleAnyway", **kwargs)


# -- pods and nodes ------------------------------------------------------------------------------
def pod(
    name: str = "p",
    node: str = "",
    ns: str = "default",
    labels: Mapping[str, str] | None = None,
    affinity: Sequence[Json] = (),
    anti: Sequence[Json] = (),
    preferred: Sequence[Json] = (),
    preferred_anti: Sequence[Json] = (),
    spread: Sequence[Json] = (),
    ports: Sequence[tuple[str, str, int]] = (),
    node_selector: Mapping[str, str] | None = None,
    node_affinity: Json | None = None,
    tolerations: Sequence[Json] = (),
    images: Sequence[str] = (),
    init_images: Sequence[str] = (),
    terminating: bool = False,
) -> Json:
    """A pod manifest. `ports`: (protocol, hostIP, hostPort) of its one app container."""
    meta: Json = {"name": name, "namespace": ns, "uid": f"uid-{ns}-{name}"}
    if labels:
        meta["labels"] = dict(labels)
    if terminating:
        meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    container: Json = {"name": "c", "image": images[0] if images else "busybox"}
    if ports:
        container["ports"] = [{"containerPort": p, "hostPort": p, "protocol": pr, "hostIP": ip} for pr, ip, p in ports]
    containers = [container] + [{"name": f"c{i}", "image": image} for i, image in enumerate(images[1:])]
    spec: Json = {"containers": containers}
    if init_images:
        spec["initContainers"] = [{"name": f"i{i}", "image": image} for i, image in enumerate(init_images)]
    if node:
        spec["nodeName"] = node
    aff: Json = {}
    if affinity or preferred:
        aff["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": list(affinity),
            "preferredDuringSchedulingIgnoredDuringExecution": list(preferred),
        }
    if anti or preferred_anti:
        aff["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": list(anti),
            "preferredDuringSchedulingIgnoredDuringExecution": list(preferred_anti),
        }
    if node_affinity is not None:
        aff["nodeAffinity"] = node_affinity
    if aff:
        spec["affinity"] = aff
    if spread:
        spec["topologySpreadConstraints"] = list(spread)
    if node_selector is not None:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = list(tolerations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def required_node_terms(*terms: Json) -> Json:
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}


@dataclass(frozen=True)
class Node:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[tuple[str, str, str], ...] = ()  # (key, value, effect)
    images: tuple[tuple[tuple[str, ...], int], ...] = ()  # (names, size bytes)


def node(name: str, taints: Sequence[tuple[str, str, str]] = (), **labels: str) -> Node:
    """A node with plain label keys (`labelled` takes any keys)."""
    return Node(name, dict(labels), tuple(taints))


def labelled(name: str, labels: Mapping[str, str], taints: Sequence[tuple[str, str, str]] = ()) -> Node:
    return Node(name, dict(labels), tuple(taints))


UNSCHEDULABLE_TAINT = ("node.kubernetes.io/unschedulable", "", "NoSchedule")


# -- harness over the pure modules ---------------------------------------------------------------
@dataclass(frozen=True)
class _Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True)
class _Toleration:
    key: str
    operator: str
    value: str
    effect: str


def tolerations_of(manifest: Json) -> tuple[_Toleration, ...]:
    return tuple(
        _Toleration(
            str(t.get("key", "")), str(t.get("operator", "")), str(t.get("value", "")), str(t.get("effect", ""))
        )
        for t in manifest["spec"].get("tolerations") or []
    )


class Cluster:
    """Nodes and placed pods as the pure modules see them."""

    def __init__(
        self, nodes: Sequence[Node], pods: Sequence[Json] = (), namespaces: Mapping[str, Mapping[str, str]] = ()
    ) -> None:
        self.nodes = list(nodes)
        self.rows = {n.name: i for i, n in enumerate(self.nodes)}
        book = PodBook()
        for name, labels in dict(namespaces).items():
            book.set_namespace(name, labels)
        for manifest in pods:
            meta = manifest["metadata"]
            book.add(meta["uid"], pod_facts(manifest), manifest["spec"]["nodeName"])
        self.index = PodIndex(book.frozen(), self.rows.get, len(self.nodes))
        self.topology = Topology([n.labels for n in self.nodes])

    def all_rows(self) -> np.ndarray:
        return np.arange(len(self.nodes), dtype=np.int64)

    def interpod_reasons(self, incoming: Json) -> dict[str, str | None]:
        facts = pod_facts(incoming)
        assert not facts.problem, facts.problem
        codes = interpod.filter_codes(self.index, self.topology, facts, self.all_rows())
        return {n.name: interpod.REASONS.get(int(c)) for n, c in zip(self.nodes, codes, strict=True)}

    def interpod_scores(self, incoming: Json, rows: Sequence[str] | None = None, hard_weight: int = 1) -> list[int]:
        facts = pod_facts(incoming)
        picked = np.array([self.rows[n] for n in rows] if rows else self.all_rows(), np.int64)
        raw = interpod.raw_scores(self.index, self.topology, facts, picked, hard_weight)
        return [0] * picked.size if raw is None else [int(s) for s in interpod.normalize(raw)]

    def _masks(self, manifest: Json) -> tuple[np.ndarray, np.ndarray]:
        spec = manifest["spec"]
        pairs, terms = node_selector_pairs(spec), required_terms(spec)
        tols = tolerations_of(manifest)
        affinity = np.array([required_matches(pairs, terms, n.labels, n.name) for n in self.nodes])
        taints = np.array([untolerated([_Taint(*t) for t in n.taints], tols) is None for n in self.nodes])
        return affinity, taints

    def spread_inputs(self, manifest: Json, facts: PodFacts, hard: bool) -> list[spread.SpreadInput]:
        affinity, taints = self._masks(manifest)
        chosen = [c for c in facts.spread if c.hard == hard]
        return spreading.inputs(chosen, facts, self.index, self.topology, affinity, taints)

    def spread_reasons(self, incoming: Json) -> dict[str, str | None]:
        facts = pod_facts(incoming)
        assert not facts.problem, facts.problem
        codes = spread.filter_codes(self.spread_inputs(incoming, facts, True), facts.labels, self.all_rows())
        return {n.name: spread.REASONS.get(int(c)) for n, c in zip(self.nodes, codes, strict=True)}

    def spread_scores(self, incoming: Json, rows: Sequence[str]) -> list[int]:
        facts = pod_facts(incoming)
        picked = np.array([self.rows[n] for n in rows], np.int64)
        return [int(s) for s in spread.score(self.spread_inputs(incoming, facts, False), picked)]


def fails(reasons: Mapping[str, str | None]) -> dict[str, str]:
    return {k: v for k, v in reasons.items() if v is not None}

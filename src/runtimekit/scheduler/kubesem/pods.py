"""What the inter-pod filters and scores need to know about one pod, parsed once from its manifest
(kube-scheduler's `framework.PodInfo`, plus its spread constraints, host ports, images and the
volumes the volume filters read).

A part that does not parse (an affinity term, a spread constraint) is left out and named in
`problem`: kube-scheduler refuses to place such a pod ("parsing pod: ..."), while an existing pod
with one still counts with the parts that did parse. Pure (`PodFactsMemo` keeps what it parsed for
its owner); callers: the scheduler cache's `PodBook` (placed pods) and the predicates and nodeorder
plugins (the pods being placed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from runtimekit.kube.objects import Pod
from runtimekit.kube.semantics.labels import SelectorError
from runtimekit.kube.semantics.nodeaffinity import PreferredTerm, preferred_terms
from runtimekit.scheduler.kubesem.affinity import AffinityTerm, WeightedTerm, affinity_terms
from runtimekit.scheduler.kubesem.ports import HostPort, host_ports
from runtimekit.scheduler.kubesem.spread import SpreadConstraint, spread_constraints
from runtimekit.scheduler.kubesem.volumes import PodVolumes, pod_volumes

DEFAULT_NAMESPACE = "default"


@dataclass(frozen=True, eq=False)
class PodFacts:
    namespace: str
    labels: Mapping[str, str] = field(default_factory=dict)
    terminating: bool = False
    affinity: tuple[AffinityTerm, ...] = ()  # required
    anti_affinity: tuple[AffinityTerm, ...] = ()  # required
    preferred_affinity: tuple[WeightedTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedTerm, ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()
    ports: tuple[HostPort, ...] = ()
    preferred_nodes: tuple[PreferredTerm, ...] = ()  # preferred node affinity
    images: tuple[str, ...] = ()  # normalised image names of init and app containers
    containers: int = 0  # init and app containers (image locality's threshold scales with it)
    volumes: PodVolumes | None = None  # what the volume filters read (None: the pod has none of it)
    problem: str = ""

    @property
    def has_pod_affinity(self) -> bool:
        return bool(self.affinity or self.anti_affinity or self.preferred_affinity or self.preferred_anti_affinity)

    @property
    def simple(self) -> bool:
        """No inter-pod affinity, spread constraint or host port of its own (only existing pods'
        terms can concern it)."""
        return not (self.has_pod_affinity or self.spread or self.ports)


@lru_cache(maxsize=256)
def plain_facts(namespace: str) -> PodFacts:
    """The facts of a pod known without a manifest (trace replay): its namespace, no labels."""
    return PodFacts(namespace)


def normalized_image(name: str) -> str:
    """The CRI name of an image reference: ':latest' added when it names neither tag nor digest."""
    return name + ":latest" if name.rfind(":") <= name.rfind("/") else name


def pod_facts(pod: Pod) -> PodFacts:
    """The facts of a pod manifest (a dict as the API serves it)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    namespace = str(meta.get("namespace") or DEFAULT_NAMESPACE)
    raw_labels = meta.get("labels") or {}
    labels = {str(k): str(v) for k, v in raw_labels.items()} if isinstance(raw_labels, Mapping) else {}
    containers = [
        c for c in (spec.get("initContainers") or []) + (spec.get("containers") or []) if isinstance(c, Mapping)
    ]
    images = tuple(normalized_image(str(c["image"])) for c in containers if c.get("image"))
    terminating = bool(meta.get("deletionTimestamp"))
    volumes = pod_volumes(spec, str(meta.get("name") or ""), str(meta.get("uid") or ""))
    if not spec.get("affinity") and not spec.get("topologySpreadConstraints") and not host_ports(spec):
        # the usual pod: none of the terms below, so nothing to parse or to get wrong
        return PodFacts(namespace, labels, terminating, images=images, containers=len(containers), volumes=volumes)
    problems: list[str] = []
    affinity = spec.get("affinity") or {}
    if not isinstance(affinity, Mapping):
        affinity = {}
    try:
        required, preferred = affinity_terms(affinity, "podAffinity", namespace, labels)
    except SelectorError as exc:
        required, preferred = (), ()
        problems.append(f"affinity terms: {exc}")
    try:
        anti, preferred_anti = affinity_terms(affinity, "podAntiAffinity", namespace, labels)
    except SelectorError as exc:
        anti, preferred_anti = (), ()
        problems.append(f"anti-affinity terms: {exc}")
    try:
        spread = spread_constraints(spec, labels)
    except SelectorError as exc:
        spread = ()
        problems.append(f"topology spread constraints: {exc}")
    try:
        preferred_nodes = preferred_terms(spec)
    except SelectorError as exc:
        preferred_nodes = ()
        problems.append(f"preferred node affinity: {exc}")
    return PodFacts(
        namespace=namespace,
        labels=labels,
        terminating=terminating,
        affinity=required,
        anti_affinity=anti,
        preferred_affinity=preferred,
        preferred_anti_affinity=preferred_anti,
        spread=spread,
        ports=host_ports(spec),
        preferred_nodes=preferred_nodes,
        images=images,
        containers=len(containers),
        volumes=volumes,
        problem=f"parsing pod: {'; '.join(problems)}" if problems else "",
    )


def _same_facts(before: Pod, after: Pod) -> bool:
    """Whether two manifests of a pod have the same facts: equal labels, namespace, deletion mark
    and spec apart from `nodeName` (which no fact reads)."""
    old_meta, new_meta = before.get("metadata") or {}, after.get("metadata") or {}
    if (
        old_meta.get("labels") != new_meta.get("labels")
        or old_meta.get("namespace") != new_meta.get("namespace")
        or bool(old_meta.get("deletionTimestamp")) != bool(new_meta.get("deletionTimestamp"))
    ):
        return False
    return same_spec_but_node(before, after)


def same_spec_but_node(before: Pod, after: Pod) -> bool:
    """Whether two manifests of a pod have the same spec apart from `nodeName` (what its binding sets)."""
    old_spec, new_spec = before.get("spec") or {}, after.get("spec") or {}
    if not isinstance(old_spec, Mapping) or not isinstance(new_spec, Mapping):
        return False
    # one comparison in C first (every pod event of a bound pod asks this); only when it fails, the
    # key by key one, which also takes a field left out for one set to null
    if {**old_spec, "nodeName": None} == {**new_spec, "nodeName": None}:
        return True
    return all(old_spec.get(k) == new_spec.get(k) for k in old_spec.keys() | new_spec.keys() if k != "nodeName")


class PodFactsMemo:
    """Pods' facts parsed once per manifest, by pod key: a later manifest of a pod that reads the
    same (its binding, a status) gets the same `PodFacts` object. Bounded (`keep` pods; past that
    it starts afresh). Owned by a scheduler cache's `PodBook` and lent to its sessions (the
    snapshot's `pod_facts`). A live cache's is used by informer threads under the cache's lock and
    by the scheduling thread without it: single dict operations only, so the worst a race does is
    parse a pod again."""

    __slots__ = ("_keep", "_parsed")

    def __init__(self, keep: int = 1 << 16) -> None:
        self._keep = keep
        self._parsed: dict[str, tuple[Pod, PodFacts]] = {}

    def of(self, key: str, pod: Pod | None, namespace: str) -> PodFacts:
        """`pod_facts(pod)`, parsed once per manifest under the pod's key; only the namespace when
        there is no manifest (trace replay)."""
        if pod is None:
            return plain_facts(namespace)
        found = self._parsed.get(key)
        if found is not None and (found[0] is pod or _same_facts(found[0], pod)):
            self._parsed[key] = (pod, found[1])  # a later event of the pod (its binding, a status) reads the same
            return found[1]
        if len(self._parsed) >= self._keep:
            self._parsed.clear()
        parsed = pod_facts(pod)
        self._parsed[key] = (pod, parsed)
        return parsed

    def forget(self, key: str) -> None:
        """The pod is gone (its key will not be asked again)."""
        self._parsed.pop(key, None)

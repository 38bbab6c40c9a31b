"""The pods placed on nodes, as a scheduler cache keeps them for inter-pod affinity, topology spread
and host ports, and the immutable sets it hands to sessions.

- `PodBook` (mutable, one per scheduler cache): pods bound or assumed, by key, with the node they
  are on, and the labels of every namespace; with indexes kept current as pods come and go (pod
  keys by label and by what they carry: each kind of inter-pod term, host ports; and per kind of
  term, the distinct terms with the nodes of the pods carrying them). It owns the cache's
  `PodFactsMemo` (`facts`): `add_pod` parses a pod once per manifest, so that a later event of a
  pod leaves the book as it is, and the cache lends the memo to its sessions, whose plugins parse
  the pods they place into it (a placed pod is then booked without being parsed again).
- `PodSet` (immutable): what `PodBook.frozen()` hands out, the same object until something
  changes. The indexes are copied on write, so freezing costs one copy of the top-level maps, not
  a pass over every pod; a session reads them instead of scanning all pods.
Pure (no scheduler types); callers: the scheduler caches, `kubesem.index.PodIndex`.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, field
from functools import cached_property
from typing import Generic, Literal, TypeVar

from runtimekit.kube.objects import Pod
from runtimekit.scheduler.kubesem.affinity import AffinityTerm, WeightedTerm
from runtimekit.scheduler.kubesem.pods import PodFacts, PodFactsMemo

H = TypeVar("H")
V = TypeVar("V")
TermKey = AffinityTerm | WeightedTerm
Hint = tuple[str, str] | None

# what a pod may carry, as `PodSet.carrying` names it
Kind = Literal["affinity", "anti_affinity", "preferred_affinity", "preferred_anti_affinity"]
KINDS: tuple[Kind, ...] = ("affinity", "anti_affinity", "preferred_affinity", "preferred_anti_affinity")
TERMS, PORTS = "terms", "ports"  # any inter-pod term; any host port


def carried(facts: PodFacts) -> tuple[str, ...]:
    """The `carrying` groups a pod belongs to."""
    if not facts.ports and not facts.has_pod_affinity:
        return ()
    out: tuple[str, ...] = tuple(kind for kind in KINDS if getattr(facts, kind))
    if out:
        out = (*out, TERMS)
    return (*out, PORTS) if facts.ports else out


def term_of(key: TermKey) -> AffinityTerm:
    return key.term if isinstance(key, WeightedTerm) else key


def hint_of(key: TermKey) -> Hint:
    """A (key, value) label every pod the term selects carries (None: no such label)."""
    return term_of(key).selector.hint()


class _Groups(Generic[H, V]):
    """name -> members (pod keys, terms), copied on write once handed out by `freeze()`."""

    def __init__(self) -> None:
        self._sets: dict[H, set[V]] = {}
        self._owned: set[H] = set()  # sets made since the last freeze (safe to change in place)
        self._shared = False

    def _own(self, name: H) -> set[V]:
        if self._shared:
            self._sets, self._owned, self._shared = dict(self._sets), set(), False
        found = self._sets.get(name)
        if found is None:
            found = self._sets[name] = set()
            self._owned.add(name)
        elif name not in self._owned:
            found = self._sets[name] = set(found)
            self._owned.add(name)
        return found

    def add(self, name: H, key: V) -> None:
        self._own(name).add(key)

    def discard(self, name: H, key: V) -> None:
        if key in self._sets.get(name, ()):
            keys = self._own(name)
            keys.discard(key)
            if not keys:
                del self._sets[name]

    def freeze(self) -> Mapping[H, Set[V]]:
        self._shared = True
        return self._sets


@dataclass(frozen=True)
class Terms:
    """The distinct terms of one kind carried by placed pods: each with the nodes of the pods
    carrying it (how many there), and the terms by `hint_of`."""

    nodes: Mapping[TermKey, Mapping[str, int]] = field(default_factory=dict)
    by_hint: Mapping[Hint, Set[TermKey]] = field(default_factory=dict)

    def candidates(self, labels: Mapping[str, str]) -> set[TermKey]:
        """The terms that may select a pod with these labels."""
        out = set(self.by_hint.get(None, ()))
        for pair in labels.items():
            out.update(self.by_hint.get(pair, ()))
        return out


class _TermBook:
    """`Terms` of one kind, kept current and copied on write once handed out by `freeze()`."""

    def __init__(self) -> None:
        self._nodes: dict[TermKey, dict[str, int]] = {}
        self._owned: set[TermKey] = set()
        self._shared = False
        self._hints: _Groups[Hint, TermKey] = _Groups()

    def apply(self, terms: tuple[TermKey, ...], node: str, sign: int) -> None:
        for key in terms:
            if self._shared:
                self._nodes, self._owned, self._shared = dict(self._nodes), set(), False
            nodes = self._nodes.get(key)
            if nodes is None:
                if sign < 0:
                    continue
                nodes = self._nodes[key] = {}
                self._owned.add(key)
                self._hints.add(hint_of(key), key)
            elif key not in self._owned:
                nodes = self._nodes[key] = dict(nodes)
                self._owned.add(key)
            count = nodes.get(node, 0) + sign
            if count > 0:
                nodes[node] = count
            else:
                nodes.pop(node, None)
                if not nodes:
                    del self._nodes[key]
                    self._hints.discard(hint_of(key), key)

    def freeze(self) -> Terms:
        self._shared = True
        return Terms(self._nodes, self._hints.freeze())


class PodSet:
    """An immutable set of placed pods: key -> (facts, node name); namespace -> labels; and the
    indexes (`by_label`, `by_namespace`, `carrying`, `terms`) over them."""

    def __init__(
        self,
        pods: Mapping[str, tuple[PodFacts, str]],
        namespaces: Mapping[str, Mapping[str, str]],
        version: int = 0,
        by_label: Mapping[tuple[str, str], Set[str]] | None = None,
        carrying: Mapping[str, Set[str]] | None = None,
        terms: Mapping[str, Terms] | None = None,
    ) -> None:
        self.pods = pods
        self.namespaces = namespaces
        self.version = version
        self.by_label: Mapping[tuple[str, str], Set[str]] = by_label or {}
        self.carrying: Mapping[str, Set[str]] = carrying or {}
        self.terms: Mapping[str, Terms] = terms or {}  # per kind (`KINDS`)

    @cached_property
    def by_namespace(self) -> Mapping[str, Set[str]]:
        """Pod keys by namespace, worked out when first asked (only terms that select by namespace
        alone, with an empty label selector, need it; a bind costs nothing for it)."""
        out: dict[str, set[str]] = {}
        for key, (facts, _) in self.pods.items():
            out.setdefault(facts.namespace, set()).add(key)
        return out

    def keys_carrying(self, group: str) -> Set[str]:
        """Keys of the pods carrying a kind of term (`KINDS`), any term (`TERMS`), host ports (`PORTS`)."""
        return self.carrying.get(group, frozenset())

    @property
    def with_terms(self) -> Set[str]:
        return self.keys_carrying(TERMS)

    @property
    def with_anti_affinity(self) -> int:
        """How many pods carry required anti-affinity (every placement must respect them)."""
        return len(self.keys_carrying("anti_affinity"))


EMPTY = PodSet({}, {})


class PodBook:
    """The pods a scheduler cache knows on nodes; not thread-safe (the cache holds its lock)."""

    def __init__(self) -> None:
        self._pods: dict[str, tuple[PodFacts, str]] = {}
        self._namespaces: dict[str, Mapping[str, str]] = {}
        self._by_label: _Groups[tuple[str, str], str] = _Groups()
        self._carrying: _Groups[str, str] = _Groups()
        self._terms: dict[str, _TermBook] = {kind: _TermBook() for kind in KINDS}
        self._version = 0
        self._frozen: PodSet = EMPTY
        self.facts = PodFactsMemo()  # the pods' facts, parsed once per manifest (see above)

    def _index(self, key: str, facts: PodFacts, node: str, sign: int) -> None:
        for pair in facts.labels.items():
            (self._by_label.add if sign > 0 else self._by_label.discard)(pair, key)
        for group in carried(facts):
            (self._carrying.add if sign > 0 else self._carrying.discard)(group, key)
            if group in self._terms:
                self._terms[group].apply(getattr(facts, group), node, sign)

    def add(self, key: str, facts: PodFacts, node: str) -> None:
        old = self._pods.get(key)
        if old is not None and old[0] is facts and old[1] == node:
            return  # the same pod, as it was (a later event of it)
        if old is not None:
            self._index(key, old[0], old[1], -1)
        self._pods[key] = (facts, node)
        self._index(key, facts, node, +1)
        self._version += 1

    def add_pod(self, key: str, pod: Pod | None, namespace: str, node: str) -> None:
        """`add` a pod by its manifest (None: only its namespace is known), parsed once per manifest."""
        self.add(key, self.facts.of(key, pod, namespace), node)

    def remove(self, key: str) -> None:
        self.facts.forget(key)
        old = self._pods.pop(key, None)
        if old is not None:
            self._index(key, old[0], old[1], -1)
            self._version += 1

    def set_namespace(self, name: str, labels: Mapping[str, str] | None) -> None:
        """The labels of a namespace (None: it was deleted)."""
        if labels is None:
            if self._namespaces.pop(name, None) is not None:
                self._version += 1
        elif self._namespaces.get(name) != labels:
            self._namespaces[name] = dict(labels)
            self._version += 1

    def __contains__(self, key: object) -> bool:
        return key in self._pods

    def __len__(self) -> int:
        return len(self._pods)

    def frozen(self) -> PodSet:
        if self._frozen.version != self._version or (self._frozen is EMPTY and (self._pods or self._namespaces)):
            self._frozen = PodSet(
                dict(self._pods),
                dict(self._namespaces),
                self._version,
                self._by_label.freeze(),
                self._carrying.freeze(),
                {kind: book.freeze() for kind, book in self._terms.items()},
            )
        return self._frozen

"""The pods placed on nodes, as the inter-pod filters and scores read them.

- `PodBook` (mutable, one per scheduler cache): pods bound or assumed, by key, with the node they
  are on, and the labels of every namespace. `frozen()` hands out an immutable `PodSet`, the same
  object until something changes, so a snapshot costs nothing when nothing did.
- `PodIndex` (one per session): the `PodSet` plus the session's own placements and evictions
  (kube-scheduler's AddPod/RemovePod), with what the filters and scores ask for worked out on first
  use and then kept current as pods are added and removed:
  * `counts(terms)`: per node row, the pods every term selects (the pre-computed topology counts
    of PreFilter/PreScore), found through a label index rather than by scanning every pod;
  * `selecting(kind, pod)`: the existing pods' terms of one kind (required anti-affinity, ...)
    that select a pod, with the rows of the pods carrying them;
  * `ports(row)`: the host ports held on a node.
Pure (no scheduler types); callers: the scheduler caches (`PodBook`) and the plugins (`PodIndex`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np
import numpy.typing as npt

from runtimekit.scheduler.kubesem.affinity import AffinityTerm, WeightedTerm
from runtimekit.scheduler.kubesem.pods import PodFacts
from runtimekit.scheduler.kubesem.ports import HostPort, PortsInUse

Ints = npt.NDArray[np.int64]
Kind = Literal["affinity", "anti_affinity", "preferred_affinity", "preferred_anti_affinity"]
TermKey = AffinityTerm | WeightedTerm


class PodSet:
    """An immutable set of placed pods: key -> (facts, node name), and namespace -> labels."""

    def __init__(
        self,
        pods: Mapping[str, tuple[PodFacts, str]],
        namespaces: Mapping[str, Mapping[str, str]],
        version: int = 0,
    ) -> None:
        self.pods = pods
        self.namespaces = namespaces
        self.version = version

    @cached_property
    def with_terms(self) -> frozenset[str]:
        """Keys of the pods with any inter-pod affinity term."""
        return frozenset(k for k, (f, _) in self.pods.items() if f.has_pod_affinity)

    @cached_property
    def with_anti_affinity(self) -> int:
        """How many pods carry required anti-affinity (every placement must respect them)."""
        return sum(1 for k in self.with_terms if self.pods[k][0].anti_affinity)


EMPTY = PodSet({}, {})


class PodBook:
    """The pods a scheduler cache knows on nodes; not thread-safe (the cache holds its lock)."""

    def __init__(self) -> None:
        self._pods: dict[str, tuple[PodFacts, str]] = {}
        self._namespaces: dict[str, Mapping[str, str]] = {}
        self._version = 0
        self._frozen: PodSet = EMPTY

    def add(self, key: str, facts: PodFacts, node: str) -> None:
        self._pods[key] = (facts, node)
        self._version += 1

    def remove(self, key: str) -> None:
        if self._pods.pop(key, None) is not None:
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
        if self._frozen.version != self._version or (self._frozen is EMPTY and self._pods):
            self._frozen = PodSet(dict(self._pods), dict(self._namespaces), self._version)
        return self._frozen


@dataclass
class _Counter:
    terms: tuple[AffinityTerm, ...]
    skip_terminating: bool
    counts: Ints


class PodIndex:
    def __init__(self, base: PodSet, row_of: Callable[[str], int | None], rows: int) -> None:
        """`row_of(node)`: the node's row in the session's table (None: the node is gone)."""
        self.base = base
        self.rows = rows
        self._row_of = row_of
        self._base_rows: dict[str, int] | None = None
        self.added: dict[str, tuple[PodFacts, int]] = {}
        self.removed: set[str] = set()
        self._labels: dict[tuple[str, str], set[str]] | None = None  # (key, value) -> pod keys
        self._namespace_keys: dict[str, set[str]] | None = None
        self._counters: dict[tuple[tuple[AffinityTerm, ...], bool], _Counter] = {}
        # counters by a (key, value) label every pod they count carries (None: no such label)
        self._counters_by_hint: dict[tuple[str, str] | None, list[_Counter]] = {}
        self._terms: dict[Kind, _TermIndex] = {}
        self._ports: dict[int, PortsInUse] | None = None
        self._added_anti = self._removed_anti = self._added_terms = self._removed_terms = 0

    # -- the live set ----------------------------------------------------------------------
    def _rows_of_base(self) -> dict[str, int]:
        if self._base_rows is None:
            out: dict[str, int] = {}
            for key, (_, node) in self.base.pods.items():
                row = self._row_of(node)
                if row is not None:
                    out[key] = row
            self._base_rows = out
        return self._base_rows

    def get(self, key: str) -> tuple[PodFacts, int] | None:
        """A placed pod's facts and row (None: not placed, or on a node the session does not know)."""
        found = self.added.get(key)
        if found is not None:
            return found
        if key in self.removed:
            return None
        placed = self.base.pods.get(key)
        if placed is None:
            return None
        row = self._base_rows.get(key) if self._base_rows is not None else self._row_of(placed[1])
        return None if row is None else (placed[0], row)

    def items(self) -> Iterator[tuple[str, PodFacts, int]]:
        removed, added = self.removed, self.added
        for key, row in self._rows_of_base().items():
            if key not in removed and key not in added:
                yield key, self.base.pods[key][0], row
        for key, (facts, row) in added.items():
            yield key, facts, row

    def ns_labels(self, namespace: str) -> Mapping[str, str] | None:
        return self.base.namespaces.get(namespace)

    @property
    def has_anti_affinity(self) -> bool:
        """Whether any placed pod carries required anti-affinity (else nobody need look)."""
        return self.base.with_anti_affinity - self._removed_anti + self._added_anti > 0

    @property
    def has_terms(self) -> bool:
        """Whether any placed pod carries inter-pod affinity terms of any kind."""
        return len(self.base.with_terms) - self._removed_terms + self._added_terms > 0

    def _with_terms(self) -> Iterator[tuple[str, PodFacts, int]]:
        removed, added, rows = self.removed, self.added, self._rows_of_base()
        for key in self.base.with_terms:
            if key not in removed and key not in added and key in rows:
                yield key, self.base.pods[key][0], rows[key]
        for key, (facts, row) in added.items():
            if facts.has_pod_affinity:
                yield key, facts, row

    # -- session changes (AddPod / RemovePod) ----------------------------------------------
    def add(self, key: str, facts: PodFacts, row: int) -> None:
        """A pod placed in the session (or an eviction undone). Idempotent."""
        current = self.get(key)
        if current is not None and current[1] == row:
            return
        if current is not None:
            self._forget(key, *current)
        placed = self.base.pods.get(key)
        if key in self.removed and placed is not None and placed[0] is facts and self._row_of(placed[1]) == row:
            self.removed.discard(key)  # the base pod comes back
            self._count(facts, -1, removed=True)
        else:
            self.added[key] = (facts, row)
            self._count(facts, +1, removed=False)
        self._apply(key, facts, row, +1)

    def remove(self, key: str) -> None:
        """A pod evicted in the session (or a placement undone). Idempotent."""
        current = self.get(key)
        if current is not None:
            self._forget(key, *current)

    def _forget(self, key: str, facts: PodFacts, row: int) -> None:
        if self.added.pop(key, None) is not None:
            self._count(facts, -1, removed=False)
        else:
            self.removed.add(key)
            self._count(facts, +1, removed=True)
        self._apply(key, facts, row, -1)

    def _count(self, facts: PodFacts, sign: int, removed: bool) -> None:
        anti, terms = (sign if facts.anti_affinity else 0), (sign if facts.has_pod_affinity else 0)
        if removed:
            self._removed_anti += anti
            self._removed_terms += terms
        else:
            self._added_anti += anti
            self._added_terms += terms

    def _apply(self, key: str, facts: PodFacts, row: int, sign: int) -> None:
        if self._labels is not None and self._namespace_keys is not None:
            keys = self._namespace_keys.setdefault(facts.namespace, set())
            (keys.add if sign > 0 else keys.discard)(key)
            for pair in facts.labels.items():
                found = self._labels.setdefault(pair, set())
                (found.add if sign > 0 else found.discard)(key)
        by_hint = self._counters_by_hint
        if by_hint:
            for counter in by_hint.get(None, ()):
                if self._selected(counter, facts):
                    counter.counts[row] += sign
            for pair in facts.labels.items():
                for counter in by_hint.get(pair, ()):
                    if self._selected(counter, facts):
                        counter.counts[row] += sign
        for kind, index in self._terms.items():
            index.apply(_terms_of(facts, kind), row, sign)
        if self._ports is not None and facts.ports:
            held = self._ports.setdefault(row, PortsInUse())
            for port in facts.ports:
                (held.add if sign > 0 else held.remove)(port)

    # -- counts (PreFilter / PreScore topology counts) -------------------------------------
    def _selected(self, counter: _Counter, facts: PodFacts) -> bool:
        if counter.skip_terminating and facts.terminating:
            return False
        ns_labels = self.base.namespaces.get(facts.namespace)
        return all(t.matches(facts.namespace, facts.labels, ns_labels) for t in counter.terms)

    def _build_labels(self) -> None:
        if self._labels is None or self._namespace_keys is None:
            labels: dict[tuple[str, str], set[str]] = {}
            namespaces: dict[str, set[str]] = {}
            for key, facts, _row in self.items():
                namespaces.setdefault(facts.namespace, set()).add(key)
                for pair in facts.labels.items():
                    labels.setdefault(pair, set()).add(key)
            self._labels, self._namespace_keys = labels, namespaces

    def _candidates(self, terms: tuple[AffinityTerm, ...]) -> Iterator[str] | None:
        """Keys that may satisfy all terms, from the label index (None: every pod may)."""
        self._build_labels()
        assert self._labels is not None
        assert self._namespace_keys is not None
        for term in terms:
            hint = term.selector.hint()
            if hint is not None:
                return iter(list(self._labels.get(hint, ())))
        first = terms[0] if terms else None
        if first is not None and first.ns_selector.nothing:
            return iter([k for ns in first.namespaces for k in self._namespace_keys.get(ns, ())])
        return None

    def counts(self, terms: tuple[AffinityTerm, ...], skip_terminating: bool = False) -> Ints:
        """Per row: the placed pods every term selects (terminating ones left out if asked). The
        array is kept current by `add`/`remove`; do not modify it."""
        key = (terms, skip_terminating)
        counter = self._counters.get(key)
        if counter is None:
            counter = _Counter(terms, skip_terminating, np.zeros(self.rows, np.int64))
            keys = self._candidates(terms)
            if keys is None:
                for _key, facts, row in self.items():
                    if self._selected(counter, facts):
                        counter.counts[row] += 1
            else:
                for pod_key in keys:
                    found = self.get(pod_key)
                    if found is not None and self._selected(counter, found[0]):
                        counter.counts[found[1]] += 1
            self._counters[key] = counter
            hint = next((h for h in (t.selector.hint() for t in terms) if h is not None), None)
            self._counters_by_hint.setdefault(hint, []).append(counter)
        return counter.counts

    # -- existing pods' terms --------------------------------------------------------------
    def selecting(self, kind: Kind, pod: PodFacts, ns_labels: Mapping[str, str]) -> list[tuple[TermKey, Counter[int]]]:
        """The terms of this kind carried by placed pods that select `pod` (in a namespace with
        `ns_labels`), each with the rows of the pods that carry it and how many there."""
        index = self._terms.get(kind)
        if index is None:
            index = self._terms[kind] = _TermIndex()
            for _key, facts, row in self._with_terms():
                index.apply(_terms_of(facts, kind), row, +1)
        return index.selecting(pod, ns_labels)

    # -- host ports ------------------------------------------------------------------------
    def _held_ports(self) -> dict[int, PortsInUse]:
        if self._ports is None:
            self._ports = {}
            for _key, facts, at in self.items():
                if facts.ports:
                    held = self._ports.setdefault(at, PortsInUse())
                    for port in facts.ports:
                        held.add(port)
        return self._ports

    def ports(self, row: int) -> PortsInUse | None:
        """The host ports held on a node (None: none)."""
        return self._held_ports().get(row)

    def port_conflicts(self, wanted: Iterable[HostPort]) -> list[int]:
        """The rows where a held host port conflicts with one of `wanted`."""
        asked = tuple(wanted)
        return [row for row, held in self._held_ports().items() if held.any_conflict(asked)]


def _terms_of(facts: PodFacts, kind: Kind) -> tuple[TermKey, ...]:
    terms: tuple[TermKey, ...] = getattr(facts, kind)
    return terms


class _TermIndex:
    """Distinct terms of one kind -> rows of the pods carrying them; with a (key, value) hint index
    so that a pod is tested only against the terms that can select it."""

    def __init__(self) -> None:
        self.rows: dict[TermKey, Counter[int]] = {}
        self.by_hint: dict[tuple[str, str], set[TermKey]] = {}
        self.unhinted: set[TermKey] = set()

    def apply(self, terms: tuple[TermKey, ...], row: int, sign: int) -> None:
        for key in terms:
            rows = self.rows.get(key)
            if rows is None:
                if sign < 0:
                    continue
                rows = self.rows[key] = Counter()
                hint = _term(key).selector.hint()
                (self.by_hint.setdefault(hint, set()).add(key) if hint else self.unhinted.add(key))
            rows[row] += sign
            if rows[row] <= 0:
                del rows[row]

    def selecting(self, pod: PodFacts, ns_labels: Mapping[str, str]) -> list[tuple[TermKey, Counter[int]]]:
        candidates = set(self.unhinted)
        for pair in pod.labels.items():
            candidates.update(self.by_hint.get(pair, ()))
        out = []
        for key in candidates:
            rows = self.rows[key]
            if rows and _term(key).matches(pod.namespace, pod.labels, ns_labels):
                out.append((key, rows))
        return out


def _term(key: TermKey) -> AffinityTerm:
    return key.term if isinstance(key, WeightedTerm) else key

"""The pods placed on nodes, as the inter-pod filters and scores of one session read them.

`PodIndex` (one per session): a `podbook.PodSet` plus the session's own placements and evictions
(kube-scheduler's AddPod/RemovePod), with what the filters and scores ask for worked out on first
use and then kept current as pods are added and removed:
  * `counts(terms)`: per node row, the pods every term selects (the pre-computed topology counts
    of PreFilter/PreScore), found through the set's label index rather than by scanning every pod;
  * `selecting(kind, pod)`: the existing pods' terms of one kind (required anti-affinity, ...)
    that select a pod, with the rows of the pods carrying them;
  * `ports(row)`: the host ports held on a node.
Pure (no scheduler types); callers: the plugins.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from runtimekit.scheduler.kubesem.affinity import AffinityTerm, WeightedTerm
from runtimekit.scheduler.kubesem.podbook import KINDS, PORTS, VOLUMES, Hint, Kind, PodSet, carried, hint_of, term_of
from runtimekit.scheduler.kubesem.pods import PodFacts
from runtimekit.scheduler.kubesem.ports import HostPort, PortsInUse

Ints = npt.NDArray[np.int64]
TermKey = AffinityTerm | WeightedTerm


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
        self._counters: dict[tuple[tuple[AffinityTerm, ...], bool], _Counter] = {}
        # counters by a (key, value) label every pod they count carries (None: no such label)
        self._counters_by_hint: dict[tuple[str, str] | None, list[_Counter]] = {}
        self._added_by: dict[tuple[str, str] | str, set[str]] = {}  # added keys by label, by namespace
        self._overlay: dict[Kind, _Overlay] = {}  # the session's changes to the set's `terms`
        self._term_rows: dict[tuple[Kind, TermKey], dict[int, int]] = {}  # the set's part of `selecting`
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

    def _carrying(self, group: str) -> Iterator[tuple[str, PodFacts, int]]:
        """The placed pods in one of the set's `carrying` groups (a kind of term, ports)."""
        added, get = self.added, self.get
        for key in self.base.keys_carrying(group):
            if key not in added:
                found = get(key)
                if found is not None:
                    yield key, found[0], found[1]
        for key, (facts, row) in added.items():
            if group in carried(facts):
                yield key, facts, row

    def with_volumes(self) -> Iterator[tuple[str, PodFacts, int]]:
        """The placed pods (the set's and the session's) whose volumes the volume filters read."""
        return self._carrying(VOLUMES)

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
            self._added_keys(key, facts, +1)
            self._count(facts, +1, removed=False)
        self._apply(key, facts, row, +1)

    def remove(self, key: str) -> None:
        """A pod evicted in the session (or a placement undone). Idempotent."""
        current = self.get(key)
        if current is not None:
            self._forget(key, *current)

    def _added_keys(self, key: str, facts: PodFacts, sign: int) -> None:
        """Keep the session's placements indexed by label and namespace, as the set's pods are."""
        groups: list[tuple[str, str] | str] = [*facts.labels.items(), facts.namespace]
        for group in groups:
            keys = self._added_by.setdefault(group, set())
            (keys.add if sign > 0 else keys.discard)(key)

    def _forget(self, key: str, facts: PodFacts, row: int) -> None:
        if self.added.pop(key, None) is not None:
            self._added_keys(key, facts, -1)
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
        by_hint = self._counters_by_hint
        if by_hint:
            for counter in by_hint.get(None, ()):
                if self._selected(counter, facts):
                    counter.counts[row] += sign
            for pair in facts.labels.items():
                for counter in by_hint.get(pair, ()):
                    if self._selected(counter, facts):
                        counter.counts[row] += sign
        if facts.has_pod_affinity:
            for kind in KINDS:
                terms = _terms_of(facts, kind)
                if terms:
                    overlay = self._overlay.get(kind)
                    if overlay is None:
                        overlay = self._overlay[kind] = _Overlay()
                    overlay.apply(terms, row, sign)
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

    def _candidates(self, terms: tuple[AffinityTerm, ...]) -> Iterator[str] | None:
        """Keys that may satisfy all terms, from the set's label or namespace index and the
        session's placements (None: every pod may)."""
        added, by = self.added, self._added_by
        for term in terms:
            hint = term.selector.hint()
            if hint is not None:
                keys = [k for k in self.base.by_label.get(hint, ()) if k not in added]
                keys.extend(by.get(hint, ()))
                return iter(keys)
        first = terms[0] if terms else None
        if first is None or not first.ns_selector.nothing:
            return None
        keys = [k for ns in first.namespaces for k in self.base.by_namespace.get(ns, ()) if k not in added]
        keys.extend(k for ns in first.namespaces for k in by.get(ns, ()))
        return iter(keys)

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
    def selecting(
        self, kind: Kind, pod: PodFacts, ns_labels: Mapping[str, str]
    ) -> list[tuple[TermKey, Mapping[int, int]]]:
        """The terms of this kind carried by placed pods that select `pod` (in a namespace with
        `ns_labels`), each with the rows of the pods that carry it and how many there: the set's
        terms (by node, kept by the cache across sessions) with the session's changes."""
        base = self.base.terms.get(kind)
        overlay = self._overlay.get(kind)
        candidates: set[TermKey] = base.candidates(pod.labels) if base is not None else set()
        if overlay is not None:
            candidates |= overlay.candidates(pod.labels)
        out: list[tuple[TermKey, Mapping[int, int]]] = []
        for key in candidates:
            if not term_of(key).matches(pod.namespace, pod.labels, ns_labels):
                continue
            rows = self._base_term_rows(kind, key) if base is not None else {}
            changes = overlay.rows.get(key) if overlay is not None else None
            if changes:
                rows = dict(rows)
                for row, n in changes.items():  # the counts that stay positive
                    total = rows.get(row, 0) + n
                    if total > 0:
                        rows[row] = total
                    else:
                        rows.pop(row, None)
            if rows:
                out.append((key, rows))
        return out

    def _base_term_rows(self, kind: Kind, key: TermKey) -> dict[int, int]:
        """The set's pods carrying a term, counted by row (positive counts only), worked out once a
        session: the set does not change under a session, and a pod's scoring would otherwise map every
        node that carries the term to its row again (thousands of nodes when every pod carries it)."""
        found = self._term_rows.get((kind, key))
        if found is None:
            counted: Counter[int] = Counter()
            terms = self.base.terms.get(kind)
            row_of = self._row_of
            for node, n in terms.nodes.get(key, {}).items() if terms is not None else ():
                row = row_of(node)
                if row is not None:
                    counted[row] += n
            found = self._term_rows[(kind, key)] = dict(+counted)
        return found

    # -- host ports ------------------------------------------------------------------------
    def _held_ports(self) -> dict[int, PortsInUse]:
        if self._ports is None:
            self._ports = {}
            for _key, facts, at in self._carrying(PORTS):
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


class _Overlay:
    """A session's changes to one kind of `Terms`: term -> row -> pods added (less those removed);
    with the terms by `hint_of`."""

    def __init__(self) -> None:
        self.rows: dict[TermKey, Counter[int]] = {}
        self.by_hint: dict[Hint, set[TermKey]] = {}

    def apply(self, terms: tuple[TermKey, ...], row: int, sign: int) -> None:
        for key in terms:
            rows = self.rows.get(key)
            if rows is None:
                rows = self.rows[key] = Counter()
                self.by_hint.setdefault(hint_of(key), set()).add(key)
            rows[row] += sign
            if rows[row] == 0:
                del rows[row]

    def candidates(self, labels: Mapping[str, str]) -> set[TermKey]:
        out = set(self.by_hint.get(None, ()))
        for pair in labels.items():
            out.update(self.by_hint.get(pair, ()))
        return out

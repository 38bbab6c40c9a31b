"""Topology domains of node rows: for a topology key, the id of each row's value (-1 when the node
does not carry the key), worked out once per set of node labels and kept per key.

Pure; callers: the inter-pod affinity and topology spread filters and scores, through the plugins,
which keep one `Topology` per snapshot of node labels.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]


class Topology:
    def __init__(self, labels: Sequence[Mapping[str, str] | None]) -> None:
        """`labels[row]`: the labels of the node in that row (None for a row without a node)."""
        self._labels = labels
        self.rows = len(labels)
        self._domains: dict[str, tuple[Ints, dict[str, int]]] = {}

    def _build(self, key: str) -> tuple[Ints, dict[str, int]]:
        found = self._domains.get(key)
        if found is None:
            ids: dict[str, int] = {}
            out = np.full(self.rows, -1, np.int64)
            for row, labels in enumerate(self._labels):
                if labels is not None:
                    value = labels.get(key)
                    if value is not None:
                        out[row] = ids.setdefault(value, len(ids))
            out.setflags(write=False)
            found = self._domains[key] = (out, ids)
        return found

    def domains(self, key: str) -> Ints:
        """Per row: the domain id of the row's value for `key`, -1 without the key. Do not modify."""
        return self._build(key)[0]

    def domain_of(self, key: str, value: str) -> int:
        """The id of a value of `key` (-1 when no node carries it)."""
        return self._build(key)[1].get(value, -1)

    def count(self, key: str) -> int:
        """How many distinct values of `key` the nodes carry."""
        return len(self._build(key)[1])

    def has_all(self, keys: Iterable[str]) -> Mask:
        """Per row: the node carries every key."""
        out = np.ones(self.rows, np.bool_)
        for key in keys:
            out &= self.domains(key) >= 0
        return out

    def labels(self, row: int) -> Mapping[str, str]:
        found = self._labels[row]
        return found if found is not None else {}

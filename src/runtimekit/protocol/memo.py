"""`PerProtocol`: a bounded memo of what callers work out from a protocol and a key (a pod's
amounts, its resource and annotation names), for the paths that read every pod.

A `KitProtocol` holds mappings and is not hashable, so entries are keyed by the protocol's id and
keep the protocol itself: an id is never read for another protocol that later takes its address.
The memo is cleared whole when it reaches its size (the keys of one cluster's pods are few).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from runtimekit.protocol.loader import KitProtocol

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class PerProtocol(Generic[K, V]):
    def __init__(self, size: int) -> None:
        self.size = size
        self._found: dict[tuple[int, K], tuple[KitProtocol, V]] = {}

    def get(self, protocol: KitProtocol, key: K, make: Callable[[], V]) -> V:
        """The value for (`protocol`, `key`), made by `make()` the first time (an exception it raises
        is not kept: the next call makes it again)."""
        slot = (id(protocol), key)
        found = self._found.get(slot)
        if found is not None and found[0] is protocol:
            return found[1]
        value = make()
        if len(self._found) >= self.size:
            self._found.clear()
        self._found[slot] = (protocol, value)
        return value

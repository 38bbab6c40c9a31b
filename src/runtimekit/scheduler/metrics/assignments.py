"""`runtimekit_scheduler_unverified_assignments_total{reason}`: the assignment annotations of bound
pods the scheduler ignored (booked no GPU for), once per pod and annotation text, by why
(`cache/authority.py`: `unreadable`, `other_node`, `unsigned`, `signature`, `requests`). Read at
scrape time from the cluster cache's counts; every reason is written, 0 until one is seen, so a
rate over it exists from the start. Registered by the scheduler server (`server.py`).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from runtimekit.scheduler.cache.cluster import ClusterCache
from runtimekit.scheduler.metrics.series import ValueVec

NAME = "runtimekit_scheduler_unverified_assignments_total"
DOC = (
    "Assignment annotations of bound pods that the scheduler ignored (no GPU booked), once per pod and "
    "annotation text, by reason: unreadable, other_node, unsigned, signature (does not verify), "
    "requests (differs from the pod's requests)"
)


class IgnoredAssignments(Collector):
    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache

    def collect(self) -> Iterator[Metric]:
        with self.cache.lock:
            counts = dict(self.cache.authority.ignored)
        family = ValueVec(NAME, DOC, ("reason",), "counter")
        family.replace(((reason,), float(count)) for reason, count in counts.items())
        yield from family.collect()

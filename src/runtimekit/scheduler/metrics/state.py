"""Figures that are a state, worked out at scrape time from the live cache and the latest session.

Volcano's queue families (`volcano_queue_*`, from its proportion/capacity plugins and, for the pod
group counts, its queue controller) and the kit's GPU-sharing figures:
- `runtimekit_scheduler_gpus{state}`: usable GPUs that are `whole_free` (no share taken), `shared`
  (partly taken) or `full` (no compute or no memory left), and GPUs in MIG mode (`mig`);
- `runtimekit_scheduler_gpu_free_milli{state}`: free GPU compute (1000 per GPU) on whole-free and on
  shared GPUs; `runtimekit_scheduler_gpu_fragmentation_ratio`: the shared part of the free compute,
  which only pods small enough for a share can use (0 with nothing free);
- `runtimekit_scheduler_pending_pods`, `runtimekit_scheduler_leader`, and the conf reload figures.
Allocated resources come from the cache (what bound pods hold now); the other queue figures from the
plugin that shares the cluster between queues (proportion), as of its latest session, and are absent
without one, as in Volcano. A queue's series go with its Queue object: only queues the cache knows
now (and the two Volcano always has) are written, whatever the latest session saw, so a deleted
queue's series are gone at the next scrape, with no session in between. Units are Volcano's: milli
CPU, memory bytes, scalar resources in milli.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Protocol

import numpy as np
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from runtimekit.model.scalars import LIMIT
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.cache.cluster import ClusterCache
from runtimekit.scheduler.cache.queues import ALWAYS
from runtimekit.scheduler.framework.info import Resources
from runtimekit.scheduler.framework.observe import QueueFigures

POD_GROUP_PHASES = ("inqueue", "pending", "running", "unknown", "completed")


class Leading(Protocol):
    @property
    def leading(self) -> bool: ...


class ClusterState(Collector):
    """Queue and GPU figures at scrape time; `figures` gives the latest session's queue figures."""

    def __init__(
        self,
        cache: ClusterCache,
        protocol: KitProtocol,
        figures: Callable[[], Mapping[str, QueueFigures]],
        leader: Leading | None = None,
    ) -> None:
        self.cache, self.protocol, self.figures, self.leader = cache, protocol, figures, leader

    def collect(self) -> Iterator[Metric]:
        with self.cache.lock:
            allocated = dict(self.cache.queue_allocated)
            queues = list(self.cache.queues)
            pending = len(self.cache.queue)
            table = self.cache.ledger.table
            rows = table.active_rows()
            usable = table.usable[rows]
            core, gmem, gtotal = table.core_free[rows], table.gmem_free[rows], table.gmem_total[rows]
            mig = sum(len(gpus) for gpus in table.mig.values())
        statuses = self.cache.queue_statuses()
        yield from self._queues(allocated, queues, statuses)
        yield from _gpus(usable, core, gmem, gtotal, mig)
        yield GaugeMetricFamily("runtimekit_scheduler_pending_pods", "Pods waiting to be scheduled", value=pending)
        if self.leader is not None:
            yield GaugeMetricFamily(
                "runtimekit_scheduler_leader", "1 while this scheduler leads (schedules)", value=self.leader.leading
            )

    def _queues(
        self, allocated: Mapping[str, Resources], queues: list[str], statuses: Mapping[str, Mapping[str, object]]
    ) -> Iterator[Metric]:
        alive = {*queues, *ALWAYS, self.cache.default_queue}
        names = sorted(alive & ({*queues, *allocated}))
        yield from self._resources("allocated", {q: allocated.get(q, Resources()) for q in names})
        figures = {q: f for q, f in self.figures().items() if q in alive}
        for kind in ("request", "deserved", "inqueue"):
            yield from self._resources(kind, {q: getattr(f, kind) for q, f in figures.items()})
        yield from self._resources("capacity", {q: f.capability for q, f in figures.items() if f.capability})
        yield from self._resources("real_capacity", {q: f.real_capability for q, f in figures.items()})
        for name, doc, value in (
            ("share", "A queue's share: the largest of allocated over deserved", lambda f: f.share),
            ("weight", "A queue's weight", lambda f: f.weight),
            ("overused", "1 when a queue holds its deserved share", lambda f: float(f.overused)),
        ):
            family = GaugeMetricFamily(f"volcano_queue_{name}", doc, labels=["queue_name"])
            for queue, f in sorted(figures.items()):
                family.add_metric([queue], value(f))
            yield family
        for phase in POD_GROUP_PHASES:
            family = GaugeMetricFamily(
                f"volcano_queue_pod_group_{phase}_count",
                f"PodGroups of a queue in phase {phase}",
                labels=["queue_name"],
            )
            for queue, status in sorted(statuses.items()):
                count = status.get(phase, 0)
                family.add_metric([queue], float(count) if isinstance(count, int | float) else 0.0)
            yield family

    def _resources(self, kind: str, per_queue: Mapping[str, Resources | None]) -> Iterator[Metric]:
        what = kind.replace("_", " ")
        cpu = GaugeMetricFamily(
            f"volcano_queue_{kind}_milli_cpu", f"A queue's {what} CPU, milli", labels=["queue_name"]
        )
        mem = GaugeMetricFamily(
            f"volcano_queue_{kind}_memory_bytes", f"A queue's {what} memory, bytes", labels=["queue_name"]
        )
        scalar = GaugeMetricFamily(
            f"volcano_queue_{kind}_scalar_resources",
            f"A queue's {what} scalar resources (GPUs among them), milli",
            labels=["queue_name", "resource"],
        )
        for queue, res in sorted(per_queue.items()):
            if res is None:
                continue
            if res.cpu < LIMIT:
                cpu.add_metric([queue], res.cpu)
            if res.memory < LIMIT:
                mem.add_metric([queue], res.memory)
            if res.gpu < LIMIT:
                scalar.add_metric([queue, self.protocol.resources.gpu], res.gpu)
            for name, amount in res.scalars:
                if amount < LIMIT:
                    scalar.add_metric([queue, name], amount * 1000)
        yield from (cpu, mem, scalar)


def _gpus(usable: np.ndarray, core: np.ndarray, gmem: np.ndarray, gtotal: np.ndarray, mig: int) -> Iterator[Metric]:
    whole = usable & (core == 1000) & (gmem == gtotal)
    full = usable & ((core <= 0) | (gmem <= 0))
    shared = usable & ~whole & ~full
    gpus = GaugeMetricFamily("runtimekit_scheduler_gpus", "GPUs by sharing state", labels=["state"])
    for state, mask in (("whole_free", whole), ("shared", shared), ("full", full)):
        gpus.add_metric([state], float(np.count_nonzero(mask)))
    gpus.add_metric(["mig"], float(mig))
    yield gpus
    free_whole, free_shared = float(core[whole].sum()), float(core[shared].clip(min=0).sum())
    free = GaugeMetricFamily("runtimekit_scheduler_gpu_free_milli", "Free GPU compute, milli", labels=["state"])
    free.add_metric(["whole_free"], free_whole)
    free.add_metric(["shared"], free_shared)
    yield free
    total = free_whole + free_shared
    yield GaugeMetricFamily(
        "runtimekit_scheduler_gpu_fragmentation_ratio",
        "The part of the free GPU compute that lies on shared GPUs",
        value=free_shared / total if total else 0.0,
    )

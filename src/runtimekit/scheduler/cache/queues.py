"""Volcano's queues as the scheduler keeps them: the queues that always exist (`default`, `root`),
and each queue's `status` (state, how many pod groups are pending, inqueue, running, completed or
unknown, and what its pods hold) as Volcano's queue controller reports it. Pure functions;
callers: the cluster cache and the binder (status) and the scheduler server (creating the
always-there queues).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from runtimekit.kube.objects import Queue, QueueStatus, ResourceList
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.framework.info import DEFAULT_QUEUE, Resources

ROOT_QUEUE = "root"
ALWAYS = (DEFAULT_QUEUE, ROOT_QUEUE)  # Volcano creates these; a pod never waits for them to exist
PHASES = ("Pending", "Inqueue", "Running", "Completed", "Unknown")
OPEN = "Open"


def queue_manifest(name: str) -> Queue:
    """A Queue as Volcano installs its `default` and `root`: weight 1, reclaimable."""
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, "reclaimable": True},
    }


def resource_list(allocated: Resources, protocol: KitProtocol) -> ResourceList:
    """A queue's held resources as a ResourceList: cpu, memory, GPU compute (in the protocol's core
    percent) and scalar resources by name; zero amounts left out."""
    out: ResourceList = {}
    if allocated.cpu:
        out["cpu"] = f"{allocated.cpu}m"
    if allocated.memory:
        # bytes, as Volcano writes them: in MiB when whole MiB (the common case), else in bytes
        mib, rest = divmod(allocated.memory, 1 << 20)
        out["memory"] = f"{mib}Mi" if not rest else str(allocated.memory)
    if allocated.gpu:
        out[protocol.resources.core] = str(allocated.gpu // 10)
    for name, amount in allocated.scalars:
        out[name] = str(amount)
    return out


def queue_status(state: str, phases: Iterable[str], allocated: Resources, protocol: KitProtocol) -> QueueStatus:
    """The `status` of one queue from its pod groups' phases and what its pods hold."""
    counts = dict.fromkeys(PHASES, 0)
    for phase in phases:
        counts[phase if phase in counts else "Unknown"] += 1
    return {
        "state": state or OPEN,
        "pending": counts["Pending"],
        "inqueue": counts["Inqueue"],
        "running": counts["Running"],
        "completed": counts["Completed"],
        "unknown": counts["Unknown"],
        "allocated": resource_list(allocated, protocol),
    }


def changed(written: Mapping[str, QueueStatus], current: Mapping[str, QueueStatus]) -> dict[str, QueueStatus]:
    """The statuses in `current` that differ from what was last `written`."""
    return {name: status for name, status in current.items() if written.get(name) != status}

"""Small clusters written as data for the queue and policy plugins' tests: nodes with CPU, memory and
extended resources, pods running or pending in pod groups, queues with deserved, capability and
guarantee. `run` puts them on a StaticCache and runs one session of the given conf."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runtimekit.kube.semantics.quantity import cpu_milli, memory_bytes
from runtimekit.model import NodeCapacity, NodeInventory, NodeName, Placement, PodKey, PodRequest
from runtimekit.model.scalars import LIMIT, scalars_of
from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.cache import StaticCache
from runtimekit.scheduler.framework import BuildContext, Framework, Session, parse_conf
from runtimekit.scheduler.framework.info import (
    Constraints,
    JobInfo,
    JobKey,
    NodeMeta,
    QueueInfo,
    Resources,
    TaskInfo,
    TaskStatus,
)


def amounts(cpu: str = "0", memory: str = "0", **scalars: int) -> dict[str, Any]:
    return {"cpu": cpu, "memory": memory, **{k.replace("__", "/").replace("_", "."): v for k, v in scalars.items()}}


def resources(spec: dict[str, Any] | None, unset: int = 0) -> Resources | None:
    """A queue's resource list; dimensions it does not name are `unset` (LIMIT for a capability)."""
    if spec is None:
        return None
    cpu = cpu_milli(spec["cpu"]) if spec.get("cpu") not in (None, "") else unset
    memory = memory_bytes(spec["memory"]) if spec.get("memory") not in (None, "") else unset
    scalars = {k: int(v) for k, v in spec.items() if k not in ("cpu", "memory")}
    return Resources(cpu, memory, unset, scalars_of(scalars))


@dataclass
class Node:
    name: str
    cpu: str
    memory: str
    scalars: dict[str, int] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)


@dataclass
class Pod:
    name: str
    group: str
    cpu: str = "0"
    memory: str = "0"
    scalars: dict[str, int] = field(default_factory=dict)
    node: str = ""  # running there; "" pending
    preemptable: bool = True
    selector: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    namespace: str = "ns1"
    priority: int = 0  # the pod's spec.priority


@dataclass
class Group:
    name: str
    queue: str
    phase: str = "Inqueue"
    min_member: int = 1
    min_resources: dict[str, Any] | None = None
    namespace: str = "ns1"


@dataclass
class Queue:
    name: str
    deserved: dict[str, Any] | None = None
    capability: dict[str, Any] | None = None
    guarantee: dict[str, Any] | None = None
    priority: int = 0
    parent: str = ""
    weight: int = 1

    def info(self) -> QueueInfo:
        return QueueInfo(
            self.name,
            weight=self.weight,
            capability=resources(self.capability, LIMIT),
            guarantee=resources(self.guarantee) or Resources(),
            priority=self.priority,
            deserved=resources(self.deserved),
            parent=self.parent,
        )


def request(pod: Pod) -> PodRequest:
    return PodRequest(cpu_milli(pod.cpu), memory_bytes(pod.memory), (), scalars_of(pod.scalars))


def build_cache(nodes: list[Node], pods: list[Pod], groups: list[Group], queues: list[Queue]) -> StaticCache:
    cache = StaticCache(
        [
            (
                NodeInventory(NodeName(n.name)),
                NodeCapacity(cpu_milli(n.cpu), memory_bytes(n.memory), 110, scalars_of(n.scalars)),
                NodeMeta(NodeName(n.name), n.labels),
            )
            for n in nodes
        ],
        [q.info() for q in queues],
    )
    jobs: dict[str, JobInfo] = {}
    for g in groups:
        job = JobInfo(JobKey(f"{g.namespace}/{g.name}"), g.namespace, g.name, queue=g.queue, min_member=g.min_member)
        job.phase, job.has_podgroup = g.phase, True
        job.min_resources = resources(g.min_resources)
        jobs[g.name] = job
    for i, pod in enumerate(pods):
        job = jobs[pod.group]
        task = TaskInfo(
            PodKey(f"{pod.namespace}/{pod.name}"),
            pod.namespace,
            pod.name,
            job.key,
            request(pod),
            created=float(i),
            priority=pod.priority,
            preemptable=pod.preemptable,
            constraints=Constraints(tuple(sorted(pod.selector.items()))),
            pod={"metadata": {"name": pod.name, "namespace": pod.namespace, "labels": pod.labels}},
        )
        if pod.node:
            placement = Placement(
                NodeName(pod.node), task.request.cpu_milli, task.request.memory_bytes, (), task.request.scalars
            )
            cache.ledger.reserve(task.key, placement)
            task.status, task.node, task.placement = TaskStatus.RUNNING, placement.node, placement
        job.add(task)
    for job in jobs.values():
        job.created = min((t.created for t in job.tasks.values()), default=0.0)
        cache.add_job(job)
    return cache


def run(conf: str, cache: StaticCache) -> Session:
    return Framework(parse_conf(conf), builtin_registry(), BuildContext()).run_once(cache)


def bound(cache: StaticCache) -> dict[str, str]:
    return {task.name: str(task.node) for task in cache.bound.values()}


def evicted(cache: StaticCache) -> list[str]:
    return sorted(key.split("/", 1)[1] for key, _ in cache.evicted)


def pipelined(ssn: Session) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for job in ssn.jobs.values():
        nodes = sorted(str(t.node) for t in job.tasks.values() if t.status is TaskStatus.PIPELINED)
        if nodes:
            out[f"{job.namespace}/{job.name}"] = nodes
    return out

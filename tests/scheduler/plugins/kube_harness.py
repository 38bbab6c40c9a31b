"""Run the kube-scheduler tables (`scheduler/kubesem/*_cases.py`) through the real framework: a
StaticCache of the table's nodes, its placed pods booked in the cache's pod book, the incoming pod
parsed as the live cache parses pods, and the `predicates`/`nodeorder` plugins of a session."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from runtimekit.model import NodeCapacity, NodeInventory, NodeName
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.cache import StaticCache
from runtimekit.scheduler.cache.objects import task_from_pod
from runtimekit.scheduler.framework import BuildContext, Framework, parse_conf
from runtimekit.scheduler.framework.info import JobInfo, NodeMeta, Taint, TaskInfo
from runtimekit.scheduler.framework.session import Session
from runtimekit.scheduler.kubesem.pods import pod_facts
from runtimekit.scheduler.plugins.nodeorder import NodeOrderPlugin
from runtimekit.scheduler.plugins.predicates import Predicates
from scheduler.kubesem.builders import Node

P = KitProtocol.default()
ONLY = {
    "leastrequested.weight": 0,
    "balancedresource.weight": 0,
    "nodeaffinity.weight": 0,
    "podaffinity.weight": 0,
    "tainttoleration.weight": 0,
    "imagelocality.weight": 0,
    "podtopologyspread.weight": 0,
}


def score_only(name: str, **extra: Any) -> dict[str, Any]:
    """nodeorder arguments that leave one score on (weight 1)."""
    return {**ONLY, f"{name}.weight": 1, **extra}


def _yaml(arguments: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {str(v).lower() if isinstance(v, bool) else v}" for k, v in arguments.items()) + "}"


def cache_of(
    nodes: Sequence[Node],
    placed: Sequence[Mapping[str, Any]] = (),
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
    unschedulable: Sequence[str] = (),
    share_table: bool = False,
) -> StaticCache:
    entries = []
    for n in nodes:
        images = tuple(sorted((name, size * (1 << 20)) for names, size in n.images for name in names))
        taints = tuple(Taint(k, v, e) for k, v, e in n.taints)
        meta = NodeMeta(NodeName(n.name), dict(n.labels), taints, n.name in unschedulable, "T4", True, images)
        entries.append((NodeInventory.simulated(n.name, "T4", 1, 16384), NodeCapacity(64000, 1 << 40, 110), meta))
    cache = StaticCache(entries, share_table=share_table)
    for name, labels in (namespaces or {}).items():
        cache.pods.set_namespace(name, labels)
    for manifest in placed:
        cache.pods.add(manifest["metadata"]["uid"], pod_facts(manifest), manifest["spec"]["nodeName"])
    return cache


def session_of(
    cache: StaticCache, predicates: Mapping[str, Any] | None = None, nodeorder: Mapping[str, Any] | None = None
) -> Session:
    conf = parse_conf(
        'actions: "allocate"\ntiers:\n- plugins:\n'
        f"  - name: predicates\n    arguments: {_yaml(predicates or {})}\n"
        f"  - name: nodeorder\n    arguments: {_yaml(nodeorder or {})}\n"
    )
    framework = Framework(conf, builtin_registry(), BuildContext())
    return framework.open_session(cache)


def task_of(manifest: Mapping[str, Any]) -> TaskInfo:
    task = task_from_pod(manifest, P)
    job = JobInfo(task.job, task.namespace, task.name)
    job.add(task)
    return task


def plugin(ssn: Session, kind: type[Any]) -> Any:
    return next(p for p in ssn.plugins.every.flat if isinstance(p, kind))


def reasons(ssn: Session, manifest: Mapping[str, Any]) -> dict[str, str]:
    """Per node that fails: the predicates plugin's reason."""
    task = task_of(manifest)
    rows = ssn.table.active_rows()
    verdict = plugin(ssn, Predicates).predicate(task, rows, ssn)
    names = ssn.table.names()
    out: dict[str, str] = {}
    explained = verdict.reasons() if callable(verdict.reasons) else verdict.reasons
    for reason, mask in explained:
        for i in np.flatnonzero(mask):
            out.setdefault(str(names[rows[i]]), reason)
    failing = {str(names[rows[i]]) for i in np.flatnonzero(~verdict.passed)}
    assert set(out) == failing
    return out


def scores(ssn: Session, manifest: Mapping[str, Any], nodes: Sequence[str]) -> list[int]:
    task = task_of(manifest)
    rows = np.array([ssn.table.row(n) for n in nodes], np.int64)
    return [int(s) for s in plugin(ssn, NodeOrderPlugin).node_order(task, rows, ssn)]

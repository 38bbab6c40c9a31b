"""CPU the live scheduler spends per pod outside placement, in process: a pending pod's watch event
decoded and handed to the cache (`added`), the session's placement booked (`assume`), the binder's
`finish_binding`, and the pod's bound event decoded and confirmed (`bound`), through `live_cache`
as `runtimekit scheduler` wires it (signed assignments), on lines shaped as the embedded API server
sends them (a scheduler_perf pod with its managedFields). No HTTP, no session, no binding sent.
Prints JSON: microseconds of CPU per pod for each step.
Usage: .venv/bin/python benchmarks/bench_pod_events.py [--pods 3000]
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from runtimekit.base.keyring import KeyRing
from runtimekit.kube import jsoncodec
from runtimekit.kube.informer import strip_managed_fields
from runtimekit.model import NodeName, Placement
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.cache.live import live_cache
from runtimekit.scheduler.framework.info import TaskInfo

P = KitProtocol.default()
NODES = 200
FIELDS = {
    "f:spec": {
        "f:containers": {'k:{"name":"pause"}': {".": {}, "f:image": {}, "f:name": {}, "f:resources": {}}},
        **{f"f:{name}": {} for name in ("dnsPolicy", "priority", "restartPolicy", "schedulerName", "tolerations")},
    }
}
AMOUNTS = {"cpu": "100m", "memory": "500Mi"}
TOLERATE = {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
POD: dict[str, Any] = {
    "kind": "Pod",
    "apiVersion": "v1",
    "metadata": {
        "generateName": "pod-",
        "namespace": "namespace-1",
        "creationTimestamp": "2026-12-05T11:44:22Z",
        "managedFields": [
            {"manager": "runtimekit", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": FIELDS}
        ],
    },
    "spec": {
        "containers": [
            {
                "name": "pause",
                "image": "registry.k8s.io/pause:3.10.1",
                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                "resources": {
                    "limits": {"cpu": "100m", "memory": "500Mi"},
                    "requests": {"cpu": "100m", "memory": "500Mi"},
                },
                "imagePullPolicy": "IfNotPresent",
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
            }
        ],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "securityContext": {},
        "schedulerName": "default-scheduler",
        "serviceAccountName": "default",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", **TOLERATE},
            {"key": "node.kubernetes.io/unreachable", **TOLERATE},
        ],
    },
    "status": {"phase": "Pending", "qosClass": "Guaranteed"},
}


class NullBinder:
    """A binder that writes nothing (the steps measured never reach it)."""

    def bind(self, *args: object, **kwargs: object) -> None: ...
    def evict(self, *args: object) -> None: ...
    def report(self, *args: object) -> None: ...
    def event(self, *args: object) -> None: ...
    def update_group(self, *args: object) -> None: ...
    def update_queue(self, *args: object) -> None: ...


def event(i: int, node: str | None) -> bytes:
    pod = copy.deepcopy(POD)
    pod["metadata"] |= {"name": f"pod-{i:06d}", "uid": f"uid-{i:012d}", "resourceVersion": str(1000 + 2 * i)}
    if node is None:
        return jsoncodec.dumps({"type": "ADDED", "object": pod})
    pod["metadata"]["resourceVersion"] = str(1001 + 2 * i)
    pod["metadata"]["annotations"] = {P.annotations.assume_time: str(1733399062000000000 + i)}
    pod["spec"]["nodeName"] = node
    pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "True", "lastProbeTime": None}]
    return jsoncodec.dumps({"type": "MODIFIED", "object": pod})


def node(i: int) -> dict[str, Any]:
    amounts = {"cpu": "32", "memory": "256Gi", "pods": "110"}
    return {"metadata": {"name": f"n{i}", "uid": f"nu{i}"}, "status": {"capacity": amounts, "allocatable": amounts}}


def run(pods: int) -> dict[str, float]:
    keys = KeyRing.from_secrets(b"k" * 32)
    live = live_cache(P, "default-scheduler", NullBinder(), signer=keys, keys=keys, bind_workers=1)
    cache = live.cache
    for i in range(NODES):
        cache.on_node("ADDED", node(i))
    # the scheduler's decoder of pod events where there is one (`loads_event_lean`), else the plain one
    lean: Mapping[str, Callable[[bytes], Any]] = vars(jsoncodec)
    decode = lean.get("loads_event_lean", jsoncodec.loads)
    added = [event(i, None) for i in range(pods)]
    bound = [event(i, f"n{i % NODES}") for i in range(pods)]
    spent = dict.fromkeys(("added", "assume", "finish", "bound"), 0.0)
    clock = time.process_time

    def deliver(line: bytes) -> None:
        got = decode(line)
        live.on_pod(got["type"], strip_managed_fields(got["object"]))

    gc.collect()
    for i in range(pods):
        start = clock()
        deliver(added[i])
        spent["added"] += clock() - start
        entry = live.queue.get(cache.uid_of[f"namespace-1/pod-{i:06d}"])
        assert entry is not None
        task: TaskInfo = entry.task.clone()
        task.node = NodeName(f"n{i % NODES}")
        task.placement = Placement(task.node, task.request.cpu_milli, task.request.memory_bytes)
        start = clock()
        held = cache.assume(task)
        spent["assume"] += clock() - start
        assert held is not None
        start = clock()
        cache.finish_binding(held)
        spent["finish"] += clock() - start
        start = clock()
        deliver(bound[i])
        spent["bound"] += clock() - start
    assert len(cache.running) == pods
    assert not cache.assumed
    out = {f"{step}_us": round(seconds / pods * 1e6, 1) for step, seconds in spent.items()}
    out["total_us"] = round(sum(spent.values()) / pods * 1e6, 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=3000)
    args = parser.parse_args()
    print(json.dumps({"pods": args.pods, **run(args.pods)}))


if __name__ == "__main__":
    main()

"""The extender's latency and its placements (prints JSON).

Latency: filter, prioritize and bind per call, p50 and p99, over HTTP (a kept-alive connection, as
kube-scheduler's client keeps it) to the extender's own HTTP server and verbs, on `--nodes` nodes of
8 H200s (default 5,000) already holding `--prefill` pods; each measured pod is filtered over every
node (kube-scheduler with percentageOfNodesToScore 100; `--sample` adds kube-scheduler's adaptive
default, 10 % of 5,000 nodes), prioritized over the nodes that pass, and bound to the best. With
nodeCacheCapable (node names) and without (whole Node objects, encoded before the clock starts).
Binding goes to an in-process stand-in for the API server that applies it and echoes it to the cache
as a watch event would: the figures are the extender's own. Goal: <= 5 ms per call with node names.

Trace: the bundled openb default pod list (or its first `--trace-pods`) on the openb GPU node list,
each pod placed by the standalone scheduler's live side (a session of the allocate action, the binder)
and, on a second copy of the cluster, through the extender's verbs as kube-scheduler calls them
(filter, prioritize, the top score, bind); reports how many pods each placed and how many got another
node or other GPUs (the allocation difference; 0 is the goal).

Usage: .venv/bin/python benchmarks/bench_extender.py [--nodes 5000] [--pods 300] [--prefill 5000] [--sample 500]
       [--modes node_names,node_objects] [--trace-pods 2000] [--no-trace] [--no-latency]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, cast

import msgspec

from runtimekit.kube.objects import Node, Pod
from runtimekit.model import NodeInventory
from runtimekit.model.trace import TraceNode, TracePod, read_node_list, read_pod_list
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.cache.cluster import ClusterCache
from runtimekit.scheduler.cache.live import LiveCache, live_cache
from runtimekit.scheduler.collector import fewer_collections
from runtimekit.scheduler.extender.caller import KubeSchedulerCaller
from runtimekit.scheduler.extender.http import HttpServer, handler
from runtimekit.scheduler.extender.interest import asks_kit_resources
from runtimekit.scheduler.extender.schedconfig import EXTENDER_CONF_TEXT
from runtimekit.scheduler.extender.service import Verbs
from runtimekit.scheduler.extender.snapshot import NodeView
from runtimekit.scheduler.extender.wire import BindingArgs, ExtenderArgs
from runtimekit.scheduler.framework import Framework, parse_conf
from runtimekit.scheduler.framework.info import TaskInfo
from runtimekit.scheduler.inprocess import FrameworkConfig, build_framework
from runtimekit.sim.runner import DEFAULT_NODES, DEFAULT_PODS, bundled

P = KitProtocol.default()
RES = P.resources
ENCODE = msgspec.json.Encoder()


class EchoApi:
    """The API server's side of binding, in process: a bind sets the pod's node and annotations and
    the cache hears of it as from its pod informer. Events and status writes are dropped."""

    def __init__(self) -> None:
        self.pods: dict[str, dict[str, Any]] = {}
        self.cache: ClusterCache | None = None
        self.lock = threading.Lock()

    def add_pod(self, pod: dict[str, Any]) -> None:
        self.pods[f"default/{pod['metadata']['name']}"] = pod
        assert self.cache is not None
        self.cache.on_pod("ADDED", cast(Pod, pod))

    def bind(self, task: TaskInfo, node: str, annotations: Mapping[str, str]) -> None:
        with self.lock:
            pod = self.pods[f"{task.namespace}/{task.name}"]
            pod["spec"]["nodeName"] = node
            pod["metadata"]["annotations"].update(annotations)
        assert self.cache is not None
        self.cache.on_pod("MODIFIED", cast(Pod, pod))

    def evict(self, task: TaskInfo, reason: str) -> None:
        return

    def report(self, task: TaskInfo, scheduled: bool, reason: str, message: str) -> None:
        return

    def event(self, task: TaskInfo, kind: str, reason: str, message: str) -> None:
        return

    def update_group(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        return

    def update_queue(self, name: str, status: Mapping[str, Any]) -> None:
        return


def node_object(name: str, model: str, gpus: int, cpu_milli: int, memory_mib: int) -> dict[str, Any]:
    inventory = NodeInventory.simulated(name, model, gpus)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": {P.labels.gpu_model: model, "kubernetes.io/hostname": name},
            "annotations": {P.annotations.node_devices: inventory.to_annotation()},
        },
        "spec": {},
        "status": {
            "allocatable": {"cpu": f"{cpu_milli}m", "memory": f"{memory_mib}Mi", "pods": "1001"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod_object(
    name: str, cpu_milli: int, memory_mib: int, limits: Mapping[str, Any], models: str = ""
) -> dict[str, Any]:
    annotations = {P.annotations.gpu_models: models} if models else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "annotations": annotations},
        "spec": {
            "schedulerName": P.scheduler_name,
            "containers": [
                {
                    "name": "main",
                    "resources": {
                        "requests": {"cpu": f"{cpu_milli}m", "memory": f"{memory_mib}Mi"},
                        "limits": dict(limits),
                    },
                }
            ],
        },
        "status": {"phase": "Pending"},
    }


def trace_pod(pod: TracePod) -> dict[str, Any]:
    """An openb pod as a manifest: whole GPUs at 1000 milli, else a compute share in percent."""
    limits: dict[str, Any] = {}
    if pod.num_gpu and pod.gpu_milli >= 1000:
        limits = {RES.gpu: pod.num_gpu}
    elif pod.num_gpu and pod.gpu_milli:
        limits = {RES.core: max(1, round(pod.gpu_milli / 10))}
        if pod.num_gpu > 1:
            limits[RES.gpu] = pod.num_gpu
    return pod_object(pod.name, pod.cpu_milli, pod.memory_mib, limits, pod.gpu_spec)


class Side:
    """A live cache, its node view and an echoing API: what a scheduler of either mode runs on."""

    def __init__(self, nodes: Sequence[dict[str, Any]], framework: Framework) -> None:
        self.api = EchoApi()
        self.live: LiveCache = live_cache(P, P.scheduler_name, self.api, bind_workers=1)
        self.api.cache = self.live.cache
        self.view = NodeView(self.live.cache)
        for node in nodes:
            self.view.on_node("ADDED", cast(Node, node))
        self.framework = framework
        self.verbs = Verbs(framework, self.live, self.view, P, threading.Lock())
        self.names = [str(n["metadata"]["name"]) for n in nodes]

    def standalone(self, pod: dict[str, Any]) -> str:
        """The standalone scheduler's way: the pod pending, one session, its binds done."""
        self.api.add_pod(pod)
        self.framework.run_once(self.live)
        self.live.binder.drain()
        return self.assignment(pod)

    def extended(self, pod: dict[str, Any], standalone_node: str | None) -> str:
        """kube-scheduler's way with the extender: filter, prioritize, the top score, bind. A pod
        without the kit's resources never reaches the extender (managedResources): kube-scheduler
        places it itself, here where the standalone scheduler put it, so that the GPU pods meet the
        same nodes."""
        self.api.add_pod(pod)
        typed = cast(Pod, pod)
        name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
        if not asks_kit_resources(typed, P):
            if standalone_node is not None:
                assert self.verbs.bind(BindingArgs(name, "default", uid, standalone_node)) is None
            return self.assignment(pod)
        passed = self.verbs.filter(ExtenderArgs(typed, tuple(self.names))).passed
        if passed:
            node = passed[0]
            if len(passed) > 1:
                scores = self.verbs.prioritize(ExtenderArgs(typed, passed))
                node = max(scores, key=lambda hs: hs[1])[0]
            error = self.verbs.bind(BindingArgs(name, "default", uid, node))
            assert error is None, error
        return self.assignment(pod)

    def node_of(self, pod: dict[str, Any]) -> str | None:
        node = self.api.pods[f"default/{pod['metadata']['name']}"]["spec"].get("nodeName")
        return str(node) if node else None

    def assignment(self, pod: dict[str, Any]) -> str:
        return str(self.api.pods[f"default/{pod['metadata']['name']}"]["metadata"]["annotations"].get(
            P.annotations.assignment, ""
        ))  # fmt: skip


def framework() -> Framework:
    return build_framework(FrameworkConfig(parse_conf(EXTENDER_CONF_TEXT), explain=False))


# -- latency -------------------------------------------------------------------------------------------
def random_limits(rng: random.Random) -> dict[str, Any]:
    if rng.random() < 0.7:
        return {RES.core: rng.choice([5, 10, 20, 25, 30, 50, 60]), RES.memory: rng.choice([4, 8, 16, 20])}
    return {RES.gpu: rng.choice([1, 1, 1, 2, 4, 8])}


class Served:
    def __init__(self, verbs: Verbs) -> None:
        self._verbs = verbs

    def verbs(self) -> Verbs:
        return self._verbs

    def not_serving(self) -> str:
        return ""

    def observe(self, verb: str, seconds: float, result: str) -> None:
        return


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p99_ms": round(p99 * 1000, 3),
        "calls": len(ordered),
    }


def latency(nodes: int, pods: int, prefill: int, sample: int | None, seed: int, modes: Sequence[str]) -> dict[str, Any]:
    rng = random.Random(seed)
    objects = [node_object(f"node-{i:05d}", "H200", 8, 128_000, 1024 * 1024) for i in range(nodes)]
    side = Side(objects, framework())
    started = time.perf_counter()
    for i in range(prefill):  # a cluster in use: pods placed by the extender itself
        pod = pod_object(f"fill-{i:06d}", 1000, 1024, random_limits(rng))
        side.api.add_pod(pod)
        node = objects[rng.randrange(nodes)]["metadata"]["name"]
        side.verbs.bind(BindingArgs(pod["metadata"]["name"], "default", pod["metadata"]["uid"], node))
    built = time.perf_counter() - started
    server = HttpServer("127.0.0.1:0", handler(Served(side.verbs), "/lj-runtimekit", {})).start()
    out: dict[str, Any] = {"nodes": nodes, "gpus_per_node": 8, "prefilled_pods": prefill, "prefill_s": round(built, 1)}
    try:
        for mode, capable in (("node_names", True), ("node_objects", False)):
            if mode not in modes:
                continue
            out[mode] = measure(side, objects, server.port, capable, pods, None, rng)
            if sample:
                out[f"{mode}_sample_{sample}"] = measure(side, objects, server.port, capable, pods, sample, rng)
    finally:
        server.stop()
    return out


def measure(
    side: Side,
    objects: list[dict[str, Any]],
    port: int,
    capable: bool,
    pods: int,
    sample: int | None,
    rng: random.Random,
) -> dict[str, Any]:
    caller = KubeSchedulerCaller(f"http://127.0.0.1:{port}/lj-runtimekit", capable)
    times: dict[str, list[float]] = {"filter": [], "prioritize": [], "bind": []}
    tag = f"{'n' if capable else 'o'}{sample or 'all'}"
    try:
        for i in range(pods):
            pod = pod_object(f"m-{tag}-{i:05d}", 1000, 1024, random_limits(rng))
            side.api.add_pod(pod)
            candidates = rng.sample(objects, sample) if sample else objects
            body = filter_body(pod, candidates, capable)
            began = time.perf_counter()
            status, answer = caller.post("filter", body)
            times["filter"].append(time.perf_counter() - began)
            assert status == 200, answer
            result = {k.casefold(): v for k, v in msgspec.json.decode(answer).items()}
            if capable:
                passed = list(result["nodenames"] or [])
            else:
                passed = [n["metadata"]["name"] for n in (result["nodes"] or {}).get("items") or []]
            if not passed:
                continue
            kept = {n["metadata"]["name"] for n in candidates if n["metadata"]["name"] in set(passed)}
            body = filter_body(pod, [n for n in candidates if n["metadata"]["name"] in kept], capable)
            began = time.perf_counter()
            status, answer = caller.post("prioritize", body)
            times["prioritize"].append(time.perf_counter() - began)
            assert status == 200, answer
            scores = {e["Host"]: e["Score"] for e in msgspec.json.decode(answer)}
            node = max(scores, key=lambda name: scores[name])
            body = ENCODE.encode(
                {
                    "PodName": pod["metadata"]["name"],
                    "PodNamespace": "default",
                    "PodUID": pod["metadata"]["uid"],
                    "Node": node,
                }
            )
            began = time.perf_counter()
            status, answer = caller.post("bind", body)
            times["bind"].append(time.perf_counter() - began)
            assert status == 200, answer
            assert b'"Error":""' in answer, answer
    finally:
        caller.close()
    return {verb: percentiles(samples) for verb, samples in times.items() if samples}


def filter_body(pod: dict[str, Any], nodes: Sequence[dict[str, Any]], capable: bool) -> bytes:
    if capable:
        return ENCODE.encode({"Pod": pod, "Nodes": None, "NodeNames": [n["metadata"]["name"] for n in nodes]})
    return ENCODE.encode({"Pod": pod, "Nodes": {"metadata": {}, "items": list(nodes)}, "NodeNames": None})


# -- the trace -----------------------------------------------------------------------------------------
def trace(limit: int | None) -> dict[str, Any]:
    trace_nodes: list[TraceNode] = read_node_list(bundled(DEFAULT_NODES))
    trace_pods: list[TracePod] = read_pod_list(bundled(DEFAULT_PODS))[:limit]
    objects = [node_object(n.name, n.model, n.gpus, n.cpu_milli, n.memory_mib) for n in trace_nodes if n.gpus]
    alone, extended = Side(objects, framework()), Side(objects, framework())
    placed_alone = placed_extended = differ = gpu_milli_alone = gpu_milli_extended = 0
    started = time.perf_counter()
    seconds = {"standalone": 0.0, "extender": 0.0}
    for pod in trace_pods:
        manifest = trace_pod(pod)
        began = time.perf_counter()
        a = alone.standalone(json.loads(json.dumps(manifest)))
        middle = time.perf_counter()
        b = extended.extended(json.loads(json.dumps(manifest)), alone.node_of(manifest))
        seconds["standalone"] += middle - began
        seconds["extender"] += time.perf_counter() - middle
        placed_alone += bool(a)
        placed_extended += bool(b)
        differ += a != b
        if a:
            gpu_milli_alone += pod.total_gpu_milli
        if b:
            gpu_milli_extended += pod.total_gpu_milli
    return {
        "pods": len(trace_pods),
        "nodes": len(objects),
        "placed_standalone": placed_alone,
        "placed_extender": placed_extended,
        "gpu_milli_standalone": gpu_milli_alone,
        "gpu_milli_extender": gpu_milli_extended,
        "pods_placed_differently": differ,
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
        "wall_s": round(time.perf_counter() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=300, help="pods measured per mode")
    parser.add_argument("--prefill", type=int, default=5000, help="pods placed before measuring")
    parser.add_argument("--sample", type=int, default=500, help="also measure with this many candidate nodes (0: no)")
    parser.add_argument("--trace-pods", type=int, default=2000, help="replay the first N pods of the trace (0: all)")
    parser.add_argument("--no-trace", action="store_true")
    parser.add_argument("--no-latency", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--modes", default="node_names,node_objects", help="node_names (nodeCacheCapable), node_objects, or both"
    )
    args = parser.parse_args()
    out: dict[str, Any] = {"benchmark": "extender"}
    with fewer_collections():
        if not args.no_latency:
            modes = args.modes.split(",")
            out["latency"] = latency(args.nodes, args.pods, args.prefill, args.sample or None, args.seed, modes)
        if not args.no_trace:
            out["trace"] = trace(args.trace_pods or None)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

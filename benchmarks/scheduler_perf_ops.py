"""kube-scheduler's scheduler_perf opcodes, played against a live API server.

A workload of `test/integration/scheduler_perf` (its test case's `workloadTemplate` with the workload's
`params` put in for each `$name`) is a list of ops; `Runner.run` plays them in order, as scheduler_perf's
`runWorkload` does: createNodes (a node template, each node named from its `generateName` and labelled
`kubernetes.io/hostname` as scheduler_perf's node preparer does, then `labelNodePrepareStrategy` (one of
`labelValues` per node, seeded) or `uniqueNodeLabelStrategy`), createNamespaces (`prefix-i`),
createPods (in `namespace`, else `namespace-<op index>`; waits until they are bound unless
`skipWaitToCompletion`; `collectMetrics` makes it the measured op), createPodSets (createPodsOp once per
`namespacePrefix-i`), churn (create or recreate objects of `templatePaths` every `intervalMilliseconds`
until the workload ends), barrier (`Scheduled` or `Attempted`), deletePods (`deletePodsPerSecond`), sleep.

One watch over every pod records when each is first seen bound (`spec.nodeName`) or attempted (a
`PodScheduled` condition, or scheduling gates: a gated pod is in the queue as soon as it exists). The
measured op samples, once a second, how many of its pods are bound: scheduler_perf's throughputCollector
(the first sample skipped, an interval without a new binding folded into the next). Caller:
`scheduler_perf.py` (and its test).
"""

from __future__ import annotations

import contextlib
import copy
import fnmatch
import random
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from e2e_harness import own_cpu_seconds

from runtimekit.kube.errors import KubeError
from runtimekit.kube.http import KubeHttp
from runtimekit.model import NodeInventory
from runtimekit.protocol import KitProtocol

P = KitProtocol.default()
CREATE_WORKERS = 16  # scheduler_perf creates pods with this many goroutines (ParallelizeUntil)
NAME_LETTERS = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's rand.String alphabet
SUPPORTED = ("createNodes", "createNamespaces", "createPods", "createPodSets", "churn", "barrier", "deletePods")
SUPPORTED += ("sleep", "createAny", "createResourceDriver", "allocResourceClaims")
INDEX = re.compile(r"\{\{\s*\.Index\s*\}\}")  # the one Go template action the copied templates keep
RESOURCES = {  # kind -> (API group path, plural, namespaced) of what createAny makes
    "DeviceClass": ("/apis/resource.k8s.io/v1", "deviceclasses", False),
    "ResourceClaim": ("/apis/resource.k8s.io/v1", "resourceclaims", True),
    "ResourceClaimTemplate": ("/apis/resource.k8s.io/v1", "resourceclaimtemplates", True),
}
Obj = dict[str, Any]


def substitute(op: Mapping[str, Any], params: Mapping[str, int]) -> Obj:
    """The op with every `xParam: $name` replaced by `x: params[name]` (nested ops too)."""
    out: Obj = {}
    for key, value in op.items():
        if key.endswith("Param") and isinstance(value, str) and value.startswith("$"):
            if value[1:] not in params:
                raise KeyError(f"{key}: {value} is not among the workload's params {sorted(params)}")
            out[key.removesuffix("Param")] = params[value[1:]]
        elif isinstance(value, Mapping):
            out[key] = substitute(value, params)
        else:
            out[key] = value
    return out


def indexed(template: Obj, index: int) -> Obj:
    """The template with `{{.Index}}` replaced by `index` in every string (scheduler_perf's templating)."""

    def put(value: Any) -> Any:
        if isinstance(value, str):
            return INDEX.sub(str(index), value)
        if isinstance(value, dict):
            return {k: put(v) for k, v in value.items()}
        if isinstance(value, list):
            return [put(v) for v in value]
        return value

    out: Obj = put(template)
    return out


def go_duration(text: str) -> float:
    """A Go duration ("500ms", "5s", "1m30s") in seconds."""
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    parts = re.findall(r"([\d.]+)(ms|s|m|h)", text)
    if not parts:
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(n) * units[u] for n, u in parts)


def percentile(values: list[float], q: int) -> float:
    """scheduler_perf's percentile: the ceil(len*q/100)-th of the sorted values."""
    ordered = sorted(values)
    return ordered[max(0, -(-len(ordered) * q // 100) - 1)]


@dataclass
class Measured:
    """What the collectMetrics op saw: each pod's creation (API server acknowledged) and the throughput samples."""

    arrived: dict[str, float] = field(default_factory=dict)
    samples: list[float] = field(default_factory=list)
    started: float = 0.0
    finished: float = 0.0
    scheduler_cpu: float = 0.0
    apiserver_cpu: float = 0.0
    client_cpu: float = 0.0  # this process: the creating threads, the watch, the sampler


class Runner:
    """Plays one workload's ops against the API server at `url`; `gpu_share` > 0 makes each pod of a
    createPods op also ask for that share of a GPU (percent) and each node carry 8 simulated H200s."""

    def __init__(
        self,
        url: str,
        base: Path,
        gpu_share: int = 0,
        scheduler_cpu: Callable[[], float] | None = None,
        apiserver_cpu: Callable[[], float] | None = None,
    ):
        self.http = KubeHttp.connect(server=url, timeout=60)
        self.url = url
        self.base = base
        self.gpu_share = gpu_share
        self.scheduler_cpu = scheduler_cpu or (lambda: 0.0)
        self.apiserver_cpu = apiserver_cpu or (lambda: 0.0)
        self.bound: dict[str, float] = {}
        self.attempted: set[str] = set()
        self.created: dict[str, list[str]] = {}  # namespace -> pod keys created by ops
        self.namespaces: set[str] = {"default"}
        self.templates: dict[Path, Obj] = {}
        self.measured: Measured | None = None
        self.stop = threading.Event()
        self.background: list[threading.Thread] = []
        self.timeout = 600.0
        self.handlers: dict[str, Callable[[int, Obj], None]] = {
            "createNodes": self.create_nodes,
            "createNamespaces": self.create_namespaces,
            "createPods": self.create_pods,
            "createPodSets": self.create_pod_sets,
            "churn": self.churn,
            "barrier": self.barrier,
            "deletePods": self.delete_pods,
            "sleep": self.sleep,
            "createAny": self.create_any,
            "createResourceDriver": self.create_resource_driver,
            "allocResourceClaims": self.alloc_resource_claims,
        }
        _, version = self.http.list("/api/v1/pods")
        self.version = version
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        watcher = KubeHttp.connect(server=self.url, timeout=60)
        while not self.stop.is_set():
            try:
                self._follow(watcher)
            except (KubeError, OSError):
                if self.stop.is_set():  # the server went away with the workload
                    return
                raise

    def _follow(self, watcher: KubeHttp) -> None:
        while not self.stop.is_set():
            for event in watcher.watch("/api/v1/pods", self.version, timeout_seconds=60):
                meta = event.object.get("metadata") or {}
                self.version = meta.get("resourceVersion", self.version)
                key = f"{meta.get('namespace')}/{meta.get('name')}"
                spec = event.object.get("spec") or {}
                if spec.get("nodeName") and key not in self.bound:
                    self.bound[key] = time.perf_counter()
                if spec.get("schedulingGates") or any(
                    c.get("type") == "PodScheduled" for c in (event.object.get("status") or {}).get("conditions") or ()
                ):
                    self.attempted.add(key)

    def wait_for_scheduler(self, timeout: float = 60.0) -> None:
        """Binds a probe pod to a probe node, then deletes both: scheduler_perf starts a workload once the
        scheduler's informers have synced, and a scheduler that binds a pod has."""
        name = "scheduler-perf-probe"
        capacity = {"cpu": "1", "memory": "1Gi", "pods": "1"}
        labels = {"kubernetes.io/hostname": name}
        node = {"metadata": {"name": name, "labels": labels}, "status": {"capacity": capacity}}
        pod = {
            "metadata": {"name": name},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": name}, "containers": [{"name": "c", "image": "pause"}]},
        }
        self.http.post("/api/v1/nodes", node | {"apiVersion": "v1", "kind": "Node"})
        self.http.post("/api/v1/namespaces/default/pods", pod | {"apiVersion": "v1", "kind": "Pod"})
        self._wait([f"default/{name}"], self.bound, timeout)
        if f"default/{name}" not in self.bound:
            raise TimeoutError(f"the scheduler bound no probe pod in {timeout:.0f} s")
        self.http.delete(f"/api/v1/namespaces/default/pods/{name}")
        self.http.delete(f"/api/v1/nodes/{name}")

    def template(self, path: str) -> Obj:
        resolved = (self.base / path).resolve()
        if resolved not in self.templates:
            self.templates[resolved] = yaml.safe_load(resolved.read_text())
        return self.templates[resolved]

    def run(self, ops: list[Obj], params: Mapping[str, int], default_pod_template: str | None) -> Measured | None:
        self.default_pod_template = default_pod_template or "../templates/pod-default.yaml"
        try:
            for index, raw in enumerate(ops):
                op = substitute(raw, params)
                self.handlers[op["opcode"]](index, op)
        finally:
            self.stop.set()
            for thread in self.background:
                thread.join(30)
        return self.measured

    # -- opcodes ------------------------------------------------------------------------------------------

    def create_nodes(self, index: int, op: Obj) -> None:
        node = self.template(op.get("nodeTemplatePath") or "../templates/node-default.yaml")
        rng = random.Random(f"nodes-{index}")
        names: list[str] = []
        taken: set[str] = set()
        for i in range(op["count"]):
            name = str(indexed(node, i)["metadata"].get("name") or "")
            while not name or name in taken:
                name = node["metadata"].get("generateName", "node-") + "".join(rng.choices(NAME_LETTERS, k=5))
            taken.add(name)
            names.append(name)
        by_value = op.get("labelNodePrepareStrategy")
        unique = op.get("uniqueNodeLabelStrategy")
        extra = {name: {} for name in names}
        if by_value:
            for name in names:
                extra[name][by_value["labelKey"]] = rng.choice(by_value["labelValues"])
        if unique:
            for name in names:
                extra[name][unique["labelKey"]] = name

        def create(name: str) -> None:
            body = copy.deepcopy(node)
            meta = body["metadata"]
            meta.pop("generateName", None)
            meta["name"] = name
            meta["labels"] = {**(meta.get("labels") or {}), "kubernetes.io/hostname": name, **extra[name]}
            if self.gpu_share:
                meta["labels"] |= {P.labels.gpu_model: "H200", P.labels.gpu_count: "8"}
                inventory = NodeInventory.simulated(name, "H200", 8)
                devices = {P.annotations.node_devices: inventory.to_annotation()}
                meta["annotations"] = {**(meta.get("annotations") or {}), **devices}
            self.http.post("/api/v1/nodes", body)

        with ThreadPoolExecutor(CREATE_WORKERS) as pool:
            list(pool.map(create, names))

    def create_namespaces(self, index: int, op: Obj) -> None:
        body = self.template(op["namespaceTemplatePath"]) if op.get("namespaceTemplatePath") else {"metadata": {}}
        for i in range(op["count"]):
            self._namespace(f"{op['prefix']}-{i}", body)

    def _namespace(self, name: str, template: Obj | None = None) -> None:
        if name in self.namespaces:
            return
        body = copy.deepcopy(template or {"metadata": {}})
        body |= {"apiVersion": "v1", "kind": "Namespace"}
        body["metadata"] = {**body.get("metadata", {}), "name": name}
        try:
            self.http.post("/api/v1/namespaces", body)
        except KubeError as exc:
            if exc.code != 409:  # made already (by an earlier workload on the same server)
                raise
        self.namespaces.add(name)

    def create_pods(self, index: int, op: Obj, namespace: str | None = None) -> None:
        if op.get("steadyState"):
            self.steady_state(index, op)
            return
        namespace = op.get("namespace") or namespace or f"namespace-{index}"
        self._namespace(namespace)
        pod = self.template(op.get("podTemplatePath") or self.default_pod_template)
        measured = Measured() if op.get("collectMetrics") else None
        keys: list[str] = []

        def create(_: int) -> None:
            body = copy.deepcopy(pod)
            if self.gpu_share:
                resources = body["spec"]["containers"][0].setdefault("resources", {})
                resources["limits"] = {**(resources.get("limits") or {}), P.resources.core: self.gpu_share}
            answer = self.http.post(f"/api/v1/namespaces/{namespace}/pods", body)
            key = f"{namespace}/{answer['metadata']['name']}"
            keys.append(key)
            if measured is not None:
                measured.arrived[key] = time.perf_counter()

        with self._measuring(keys, measured) if measured is not None else contextlib.nullcontext():
            with ThreadPoolExecutor(CREATE_WORKERS) as pool:
                list(pool.map(create, range(op["count"])))
            self.created.setdefault(namespace, []).extend(keys)
            if not op.get("skipWaitToCompletion"):
                self._wait(keys, self.bound)
            if measured is not None:
                measured.finished = max((self.bound.get(k, 0.0) for k in keys), default=time.perf_counter())

    @contextlib.contextmanager
    def _measuring(self, keys: list[str], measured: Measured) -> Iterator[None]:
        """Around the measured op: the throughput sampler over `keys`, and each process's CPU; the
        op sets `measured.finished`."""
        done = threading.Event()
        sampler = threading.Thread(target=self._sample, args=(keys, measured, done), daemon=True)
        measured.started = time.perf_counter()
        cpu_before, apiserver_before, client_before = self.scheduler_cpu(), self.apiserver_cpu(), own_cpu_seconds()
        sampler.start()
        try:
            yield
        finally:
            measured.scheduler_cpu = self.scheduler_cpu() - cpu_before
            measured.apiserver_cpu = self.apiserver_cpu() - apiserver_before
            measured.client_cpu = own_cpu_seconds() - client_before
            done.set()
            sampler.join()
        self.measured = measured

    def steady_state(self, index: int, op: Obj) -> None:
        """scheduler_perf's steadyState createPods: `count` pods at all times for `duration`; each pod
        deleted once it is bound and another made in its place. The bound ones are the measured pods."""
        namespace = op.get("namespace") or f"namespace-{index}"
        self._namespace(namespace)
        pod = self.template(op.get("podTemplatePath") or self.default_pod_template)
        measured = Measured()
        keys: list[str] = []  # every pod made, for the sampler
        live: list[str] = []

        def create() -> None:
            answer = self.http.post(f"/api/v1/namespaces/{namespace}/pods", copy.deepcopy(pod))
            key = f"{namespace}/{answer['metadata']['name']}"
            measured.arrived[key] = time.perf_counter()
            keys.append(key)
            live.append(key)

        with self._measuring(keys, measured):
            for _ in range(op["count"]):
                create()
            end = measured.started + go_duration(str(op["duration"]))
            while time.perf_counter() < end:
                bound = [key for key in live if key in self.bound]
                for key in bound:
                    live.remove(key)
                    name = key.split("/", 1)[1]
                    self.http.delete(f"/api/v1/namespaces/{namespace}/pods/{name}?gracePeriodSeconds=0")
                    create()
                if not bound:
                    time.sleep(0.01)
            # the pods still pending at the end were made but not measured (scheduler_perf counts the bound)
            for key in live:
                measured.arrived.pop(key, None)
            measured.finished = time.perf_counter()
        self.created.setdefault(namespace, []).extend(keys)

    def create_any(self, index: int, op: Obj) -> None:
        """createAny: `count` (default 1) objects of the template, `{{.Index}}` put in, in `namespace`
        for a namespaced kind."""
        template = self.template(op["templatePath"])
        group, plural, namespaced = RESOURCES[template["kind"]]
        namespace = op.get("namespace") or f"namespace-{index}"
        if namespaced:
            self._namespace(namespace)
        path = f"{group}/namespaces/{namespace}/{plural}" if namespaced else f"{group}/{plural}"

        def create(i: int) -> None:
            self.http.post(path, indexed(template, i))

        with ThreadPoolExecutor(CREATE_WORKERS) as pool:
            list(pool.map(create, range(int(op.get("count", 1)))))

    def create_resource_driver(self, index: int, op: Obj) -> None:
        """createResourceDriver: a ResourceSlice of `maxClaimsPerNode` devices (`instance-<i>`, kube's
        test driver's attributes and 1Gi of memory) for each node whose name matches the `nodes` glob."""
        nodes = [n["metadata"]["name"] for n in self.http.list("/api/v1/nodes")[0]]
        driver = op["driverName"]
        for name in [n for n in nodes if fnmatch.fnmatchcase(n, op["nodes"])]:
            devices = [
                {
                    "name": f"instance-{i}",
                    "attributes": {
                        "model": {"string": "A100"},
                        "family": {"string": "GPU"},
                        "driverVersion": {"version": "1.2.3"},
                        "dra.example.com/numa": {"int": i},
                    },
                    "capacity": {"memory": {"value": "1Gi"}},
                }
                for i in range(op["maxClaimsPerNode"])
            ]
            spec = {"driver": driver, "nodeName": name, "pool": {"name": name, "resourceSliceCount": 1}}
            body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}}
            self.http.post("/apis/resource.k8s.io/v1/resourceslices", body | {"spec": spec | {"devices": devices}})

    def alloc_resource_claims(self, index: int, op: Obj) -> None:
        """allocResourceClaims: every claim of `namespace` not allocated yet is allocated by the structured
        allocator on a node picked at random among those it fits, and written (no pod uses it)."""
        from runtimekit.kube.semantics.draalloc import DevicePools, InUseByPool, allocate

        namespace = op.get("namespace") or ""
        where = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims" if namespace else None
        claims = self.http.list(where or "/apis/resource.k8s.io/v1/resourceclaims")[0]
        everything = self.http.list("/apis/resource.k8s.io/v1/resourceclaims")[0]
        classes = {c["metadata"]["name"]: c for c in self.http.list("/apis/resource.k8s.io/v1/deviceclasses")[0]}
        pools = DevicePools(self.http.list("/apis/resource.k8s.io/v1/resourceslices")[0])
        nodes = self.http.list("/api/v1/nodes")[0]
        in_use = InUseByPool.of(everything)
        rng = random.Random(f"alloc-{index}")
        for claim in claims:
            if (claim.get("status") or {}).get("allocation") is not None:
                continue
            rng.shuffle(nodes)
            for node in nodes:
                meta = node["metadata"]
                found = allocate([claim], meta["name"], meta.get("labels") or {}, classes, pools, in_use)
                if found:
                    claim["status"] = {"allocation": found[0]}
                    path = f"/apis/resource.k8s.io/v1/namespaces/{claim['metadata']['namespace']}/resourceclaims"
                    self.http.put(f"{path}/{claim['metadata']['name']}/status", claim)
                    in_use = in_use.with_allocations([found[0]])
                    break
            else:
                raise RuntimeError(f"could not allocate claim {claim['metadata']['name']}")

    def _sample(self, keys: list[str], measured: Measured, done: threading.Event) -> None:
        """scheduler_perf's throughputCollector over the measured pods, one sample a second."""
        started, last, last_time, skipped = False, 0, 0.0, 0
        while not done.wait(1.0):
            now = time.perf_counter()
            scheduled = sum(1 for key in list(keys) if key in self.bound)
            if scheduled == 0:
                continue
            if not started:
                started, last, last_time = True, scheduled, now
                continue
            if scheduled == last:
                skipped += 1
                continue
            measured.samples.extend([(scheduled - last) / (now - last_time)] * (skipped + 1))
            last, last_time, skipped = scheduled, now, 0

    def _wait(self, keys: list[str], seen: Mapping[str, float] | set[str], timeout: float | None = None) -> None:
        deadline = time.perf_counter() + (timeout or max(self.timeout, len(keys) / 20))
        while time.perf_counter() < deadline:
            if all(key in seen for key in keys):
                return
            time.sleep(0.05)

    def create_pod_sets(self, index: int, op: Obj) -> None:
        for i in range(op["count"]):
            self.create_pods(index, op["createPodsOp"], namespace=f"{op['namespacePrefix']}-{i}")

    def barrier(self, index: int, op: Obj) -> None:
        namespaces = op.get("namespaces") or list(self.created)
        keys = [key for ns in namespaces for key in self.created.get(ns, ())]
        self._wait(keys, self.attempted | set(self.bound) if op.get("stageRequirement") == "Attempted" else self.bound)

    def delete_pods(self, index: int, op: Obj) -> None:
        keys = list(self.created.get(op["namespace"], ()))
        interval = 1.0 / op["deletePodsPerSecond"] if op.get("deletePodsPerSecond") else 0.0

        def delete() -> None:
            for key in keys:
                if self.stop.is_set():
                    return
                namespace, name = key.split("/", 1)
                self.http.delete(f"/api/v1/namespaces/{namespace}/pods/{name}")
                time.sleep(interval)

        if op.get("skipWaitToCompletion"):
            thread = threading.Thread(target=delete, daemon=True)
            thread.start()
            self.background.append(thread)
        else:
            delete()

    def sleep(self, index: int, op: Obj) -> None:
        time.sleep(go_duration(str(op["duration"])))

    def churn(self, index: int, op: Obj) -> None:
        templates = [self.template(path) for path in op["templatePaths"]]
        namespace = f"namespace-{index}"
        self._namespace(namespace)
        number = int(op.get("number", 0))
        recreate = op.get("mode", "create") == "recreate"
        interval = op.get("intervalMilliseconds", 500) / 1000

        def path(obj: Obj) -> str:
            kind = obj["kind"].lower() + "s"
            return f"/api/v1/{kind}" if kind == "nodes" else f"/api/v1/namespaces/{namespace}/{kind}"

        def loop() -> None:
            slots: list[list[str]] = [[""] * max(number, 1) for _ in templates]
            count = 0
            while not self.stop.wait(interval):
                for obj, slot in zip(templates, slots, strict=True):
                    if recreate:  # scheduler_perf's Recreate: delete the object in this slot, create a new one
                        k = count % len(slot)
                        if slot[k]:
                            self.http.delete(f"{path(obj)}/{slot[k]}")
                        slot[k] = self.http.post(path(obj), obj)["metadata"]["name"]
                    elif number == 0 or count < number:
                        self.http.post(path(obj), obj)
                count += 1

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        self.background.append(thread)

"""A seeded, repeatable driver of create/bind/admit/delete interleavings on one node's real parts: the
simulated kubelet's device manager (Register, ListAndWatch, GetPreferredAllocation and Allocate over
gRPC unix sockets) and its PodResources server, the real device plugin, the real runtime (simulated
GPUs, MPS isolation, its checkpoint) over gRPC. What the API server, the scheduler and kubelet's pod
loop do is played here, one step at a time, in an order drawn from the seed:

- the scheduler binds bursts of pods of a few sizes (so that many wait with the same size) created
  in the same second, signs their assignments, and frees a deleted or finished pod's GPU at once;
- kubelet hears of bound pods in batches and admits each batch sorted by creation time with ties in
  random order (Go's `sort.Sort` is not stable), adding each pod to its pod manager before
  admitting it; removals and additions are handled in the order it heard of them; with
  `list_inactive` (kubelets before 1.34) PodResources also lists the pods it rejected;
- the API server's watch-kept view the plugin reads lags a random number of changes behind, and a
  pod may be deleted while the plugin is marking it allocated;
- the runtime reconciles at random moments, with its default grace period.
After every admission the container's environment is compared with its own pod's assignment (the
GPUs it sees, its compute share and memory limit), and every refusal of a pod that still existed is
counted as spurious. At the end of each interleaving every pod is deleted and the node must hold
nothing. `Outcome` carries the counts.
"""

from __future__ import annotations

import copy
import itertools
import random
import shutil
import tempfile
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtimekit.api.podresources_client import PodResourcesClient
from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.base.keyring import KeyRing
from runtimekit.base.timestamps import rfc3339
from runtimekit.cluster.kubelet.devicemanager import AdmissionError, DeviceManager, PodIdentity
from runtimekit.cluster.kubelet.podresources import serve_pod_resources
from runtimekit.deviceplugin.manager import DevicePluginManager
from runtimekit.deviceplugin.service import DevicePluginService, DeviceState, PluginSettings
from runtimekit.kube.errors import ConflictError, NotFoundError
from runtimekit.model import Assignment, GpuShare, GpuUUID, NodeName, simulated_uuid
from runtimekit.model.authority import sign_assignment
from runtimekit.protocol import KitProtocol
from runtimekit.runtime.daemon import RuntimeDaemon
from runtimekit.runtime.isolation import make_isolation
from runtimekit.runtime.service import NodeRuntime
from runtimekit.runtime.simulated import SimulatedBackend, parse_gpu_spec
from runtimekit.runtime.values import RuntimeSettings

P = KitProtocol.default()
RES = P.resources
NODE = "node-x"
GPUS = 4
H200_MIB = 143771
UNIT = P.memory_unit_mib
KEYS = KeyRing.from_secrets(b"the scheduler's key in the interleaving harness")
# (name, limits): two share sizes and whole GPUs, so that several waiting pods share a size
SIZES = (
    ("small", {RES.core: 25, RES.memory: 10}),
    ("half", {RES.core: 50, RES.memory: 20}),
    ("whole", {RES.gpu: 1}),
)


@dataclass
class Outcome:
    interleavings: int = 0
    pods: int = 0
    admitted: int = 0
    refused_deleted: int = 0  # refusals of pods deleted before or during their admission (legitimate)
    mismatches: list[str] = field(default_factory=list)
    spurious: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)

    def add(self, other: Outcome) -> None:
        self.interleavings += other.interleavings
        self.pods += other.pods
        self.admitted += other.admitted
        self.refused_deleted += other.refused_deleted
        self.mismatches += other.mismatches
        self.spurious += other.spurious
        self.leftovers += other.leftovers


class MemoryApi:
    """The node's pods in memory: NodeApi for the plugin, PodSource for the runtime, and a PodView that
    lags a random number of changes behind (never going back in time, as a watch does).
    `delete_on_patch` is the chance that the pod being marked allocated is deleted just before."""

    def __init__(self) -> None:
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.history: list[tuple[int, list[dict[str, Any]]]] = [(0, [])]  # (change number, pods)
        self.seen = 0  # the change the view showed last
        self.rng = random.Random(0)
        self.max_lag = 3
        self.delete_on_patch = 0.0
        self.deleted_during_patch: list[str] = []  # uids
        self._rv = itertools.count(1)

    def _changed(self) -> None:
        self.history.append((self.history[-1][0] + 1, [copy.deepcopy(p) for p in self.pods.values()]))
        del self.history[: -self.max_lag - 2]

    def put(self, pod: dict[str, Any]) -> None:
        pod["metadata"]["resourceVersion"] = str(next(self._rv))
        self.pods[(pod["metadata"]["namespace"], pod["metadata"]["name"])] = pod
        self._changed()

    def delete(self, namespace: str, name: str) -> dict[str, Any] | None:
        pod = self.pods.pop((namespace, name), None)
        self._changed()
        return pod

    # NodeApi / PodSource
    def list_node_pods(self, node: str) -> list[dict[str, Any]]:
        return [copy.deepcopy(p) for p in self.pods.values() if p["spec"].get("nodeName") == node]

    def get_pod(self, namespace: str, name: str) -> dict[str, Any]:
        if (namespace, name) not in self.pods:
            raise NotFoundError(f"pod {namespace}/{name}")
        return copy.deepcopy(self.pods[(namespace, name)])

    def patch_pod_annotations(
        self, namespace: str, name: str, annotations: Mapping[str, str | None], resource_version: str | None
    ) -> dict[str, Any]:
        pod = self.pods.get((namespace, name))
        if pod is not None and self.rng.random() < self.delete_on_patch:
            self.deleted_during_patch.append(pod["metadata"]["uid"])
            self.delete(namespace, name)
            pod = None
        if pod is None:
            raise NotFoundError(f"pod {namespace}/{name}")
        if resource_version and resource_version != pod["metadata"]["resourceVersion"]:
            raise ConflictError(f"pod {namespace}/{name} changed")
        notes = pod["metadata"].setdefault("annotations", {})
        for key, value in annotations.items():
            if value is None:
                notes.pop(key, None)
            else:
                notes[key] = value
        self.put(pod)
        return copy.deepcopy(pod)

    def patch_node_metadata(self, node: str, labels: Mapping[str, Any], annotations: Mapping[str, Any]) -> None:
        return None

    # PodView
    def pods_view(self) -> list[dict[str, Any]]:
        lag = self.rng.randint(0, min(self.max_lag, len(self.history) - 1))
        number, pods = self.history[-1 - lag]
        if number < self.seen:
            number, pods = next(h for h in self.history if h[0] >= self.seen)
        self.seen = number
        return pods


class LaggingView:
    def __init__(self, api: MemoryApi) -> None:
        self.api = api

    def pods(self) -> list[dict[str, Any]]:
        return self.api.pods_view()

    def remember(self, pod: Mapping[str, Any]) -> None:
        return None  # the view catches up only with later changes


@dataclass
class Stack:
    """One node's real parts, kept across interleavings."""

    root: Path
    api: MemoryApi
    kubelet: DeviceManager
    daemon: RuntimeDaemon
    client: RuntimeClient
    lister: PodResourcesClient
    plugin_lister: PodResourcesClient
    service: DevicePluginService
    manager: DevicePluginManager
    pod_resources: Any
    model: KubeletModel

    @property
    def runtime(self) -> NodeRuntime:
        return self.daemon.runtime

    def close(self) -> None:
        self.manager.stop()
        self.pod_resources.stop(0).wait()
        self.kubelet.stop()
        self.lister.close()
        self.plugin_lister.close()
        self.client.close()
        self.daemon.stop()
        shutil.rmtree(self.root, ignore_errors=True)


class KubeletModel:
    """kubelet's pod loop: the updates it has heard of, in order, and the pods of its pod manager."""

    def __init__(self, manager: DeviceManager) -> None:
        self.manager = manager
        self.updates: deque[tuple[str, dict[str, Any]]] = deque()
        self.known: dict[str, dict[str, Any]] = {}  # uid -> pod: admitted, or being admitted
        self.rejected: dict[str, dict[str, Any]] = {}
        self.list_inactive = False
        self.rng = random.Random(0)

    def running_pods(self) -> list[tuple[PodIdentity, Sequence[str]]]:
        pods = list(self.known.values()) + (list(self.rejected.values()) if self.list_inactive else [])
        return [(_identity(p), [c["name"] for c in p["spec"]["containers"]]) for p in pods]

    def hear(self, kind: str, pod: dict[str, Any]) -> None:
        self.updates.append((kind, pod))

    def step(self) -> list[tuple[dict[str, Any], dict[str, dict[str, str]] | AdmissionError]]:
        """Handle the next update: a removal, or every addition up to the next removal (one batch,
        sorted by creation second, ties in random order). Returns the admissions made."""
        if not self.updates:
            return []
        kind, pod = self.updates.popleft()
        if kind == "REMOVE":
            uid = pod["metadata"]["uid"]
            self.known.pop(uid, None)
            self.rejected.pop(uid, None)
            self.manager.remove_pod(uid)
            return []
        batch = [pod]
        while self.updates and self.updates[0][0] == "ADD":
            batch.append(self.updates.popleft()[1])
        keyed = [(p["metadata"]["creationTimestamp"], self.rng.random(), i) for i, p in enumerate(batch)]
        results = []
        for _, _, i in sorted(keyed):
            pod = batch[i]
            uid = pod["metadata"]["uid"]
            self.known[uid] = pod  # podManager.AddPod, then canAdmitPod
            try:
                options = self.manager.admit_pod(pod)
            except AdmissionError as exc:
                del self.known[uid]
                self.rejected[uid] = pod
                results.append((pod, exc))
                continue
            results.append((pod, {name: dict(o.envs) for name, o in options.items()}))
        return results

    def finish(self, uid: str) -> None:
        self.known.pop(uid, None)
        self.manager.remove_pod(uid)


def _identity(pod: Mapping[str, Any]) -> PodIdentity:
    meta = pod["metadata"]
    return PodIdentity(meta["namespace"], meta["name"], meta["uid"])


def start_stack() -> Stack:
    root = Path(tempfile.mkdtemp(prefix="ilv-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    api = MemoryApi()
    kubelet = DeviceManager(root / "plugins").start()
    model = KubeletModel(kubelet)
    pod_resources = serve_pod_resources(kubelet, root / "pr.sock", model.running_pods)
    lister = PodResourcesClient(str(root / "pr.sock"))
    backend = SimulatedBackend(NODE, parse_gpu_spec(f"{GPUS}xH200"))
    settings = RuntimeSettings(NODE, root / "state", P, "0.1.0", reconcile_grace_s=30.0)
    runtime = NodeRuntime(settings, backend, make_isolation("mps"), pods=api, kubelet=lister, injector=backend)
    daemon = RuntimeDaemon(runtime, str(root / "rt.sock"), reconcile_interval_s=0).start()
    client = RuntimeClient(str(root / "rt.sock"))
    plugin_lister = PodResourcesClient(str(root / "pr.sock"))
    settings = PluginSettings(NODE, P, keys=KEYS)
    service = DevicePluginService(settings, client, api, DeviceState(), LaggingView(api), plugin_lister)
    manager = DevicePluginManager(service, client.watch_devices, root / "plugins", None, 0.05).start(30.0)
    names = sorted((RES.gpu, RES.core, RES.memory))
    assert kubelet.wait_for(lambda k: k.resources() == names and all(k.updates(r) for r in names), 30.0)
    return Stack(root, api, kubelet, daemon, client, lister, plugin_lister, service, manager, pod_resources, model)


class Scheduler:
    """Books GPUs per pod (never more than a GPU has) and frees a pod's as soon as it leaves the API server."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.free = dict.fromkeys(range(GPUS), (1000, H200_MIB))
        self.booked: dict[str, list[tuple[int, int, int]]] = {}  # uid -> [(gpu, milli, MiB)]

    def place(self, uid: str, limits: Mapping[str, int]) -> list[tuple[int, int, int]] | None:
        whole = RES.gpu in limits
        milli = 1000 if whole else limits[RES.core] * 10
        mib = H200_MIB if whole else limits[RES.memory] * UNIT
        order = list(self.free)
        self.rng.shuffle(order)
        for gpu in order:
            core, mem = self.free[gpu]
            if core >= milli and mem >= mib and (not whole or (core, mem) == (1000, H200_MIB)):
                self.free[gpu] = (core - milli, mem - mib)
                self.booked[uid] = [(gpu, milli, mib)]
                return self.booked[uid]
        return None

    def release(self, uid: str) -> None:
        for gpu, milli, mib in self.booked.pop(uid, []):
            core, mem = self.free[gpu]
            self.free[gpu] = (core + milli, mem + mib)


def make_pod(seed: int, n: int, size: int, second: int, containers: int) -> dict[str, Any]:
    name, limits = SIZES[size]
    return {
        "metadata": {
            "name": f"s{seed}-{n}-{name}",
            "namespace": "default",
            "uid": f"uid-{seed}-{n}",
            "creationTimestamp": rfc3339(1_700_000_000 + second),
            "annotations": {},
        },
        "spec": {
            "nodeName": NODE,
            "schedulerName": P.scheduler_name,
            "containers": [
                {"name": f"c{k}", "image": "x", "resources": {"limits": {r: str(v) for r, v in limits.items()}}}
                for k in range(containers)
            ],
        },
        "status": {"phase": "Pending"},
    }


def expected_env(assignment: Assignment, container: str) -> dict[str, str]:
    shares = assignment.containers[container]
    share = shares[0]
    return {
        "NVIDIA_VISIBLE_DEVICES": share.uuid,
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": str(max(1, share.core_milli // 10) if share.core_milli else 100),
        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": f"0={share.memory_mib}M",
    }


def run_interleaving(stack: Stack, seed: int) -> Outcome:
    """One interleaving, drawn from `seed`. Leaves the node empty."""
    rng = random.Random(seed)
    api, model = stack.api, stack.model
    api.rng, model.rng = random.Random(seed * 7 + 1), random.Random(seed * 7 + 2)
    api.max_lag = rng.choice((0, 1, 3))
    api.delete_on_patch = rng.choice((0.0, 0.0, 0.05))
    model.list_inactive = rng.random() < 0.5
    scheduler = Scheduler(random.Random(seed * 7 + 3))
    out = Outcome(interleavings=1)
    unheard: list[dict[str, Any]] = []  # bound, kubelet not told yet (in bind order)
    heard: set[str] = set()
    running: dict[str, dict[str, Any]] = {}
    assignments: dict[str, Assignment] = {}
    deleted: set[str] = set()
    counter = itertools.count()
    bursts = rng.randint(2, 4)
    second = 0

    def bind_burst() -> None:
        nonlocal second
        second += rng.choice((0, 0, 1))
        for _ in range(rng.randint(2, 8)):
            n = next(counter)
            pod = make_pod(seed, n, rng.randrange(len(SIZES)), second, 2 if rng.random() < 0.15 else 1)
            uid = pod["metadata"]["uid"]
            shares = {}
            for container in pod["spec"]["containers"]:
                limits = {r: int(v) for r, v in container["resources"]["limits"].items()}
                placed = scheduler.place(f"{uid}/{container['name']}", limits)
                if placed is None:
                    break
                gpu, milli, mib = placed[0]
                shares[container["name"]] = (GpuShare(GpuUUID(simulated_uuid(NODE, gpu)), gpu, milli, mib),)
            else:
                assignment = Assignment(NodeName(NODE), shares)
                text = assignment.to_annotation()
                pod["metadata"]["annotations"] = {
                    P.annotations.assignment: text,
                    P.annotations.assignment_signature: sign_assignment(KEYS, uid, text),
                    P.annotations.assume_time: str(1_700_000_000_000_000_000 + n),
                }
                assignments[uid] = assignment
                api.put(pod)
                unheard.append(pod)
                out.pods += 1
                continue
            for container in pod["spec"]["containers"]:  # did not fit: give back what it took
                scheduler.release(f"{uid}/{container['name']}")

    def delete(pod: dict[str, Any]) -> None:
        uid = pod["metadata"]["uid"]
        if api.delete("default", pod["metadata"]["name"]) is None and uid in deleted:
            return
        deleted.add(uid)
        for container in pod["spec"]["containers"]:
            scheduler.release(f"{uid}/{container['name']}")
        if pod in unheard:
            unheard.remove(pod)
        elif uid in heard:
            model.hear("REMOVE", pod)
        running.pop(uid, None)

    def admit() -> None:
        for pod, result in model.step():
            uid = pod["metadata"]["uid"]
            name = pod["metadata"]["name"]
            if isinstance(result, AdmissionError):
                if uid in deleted or uid in api.deleted_during_patch:
                    out.refused_deleted += 1
                    if uid in api.deleted_during_patch and uid not in deleted:
                        delete(pod)
                else:
                    out.spurious.append(f"seed {seed}: {name}: {result.message}")
                continue
            out.admitted += 1
            running[uid] = pod
            for container in pod["spec"]["containers"]:
                want = expected_env(assignments[uid], container["name"])
                got = {k: result.get(container["name"], {}).get(k, "") for k in want}
                if got != want:
                    out.mismatches.append(f"seed {seed}: {name}/{container['name']} sees {got}, assigned {want}")

    steps = 0
    while bursts or unheard or model.updates:
        steps += 1
        roll = rng.random()
        if bursts and (roll < 0.15 or not (unheard or model.updates)):
            bind_burst()
            bursts -= 1
            if bursts and rng.random() < 0.7:  # a third deleted between bursts
                live = list(api.pods.values())
                for pod in rng.sample(live, len(live) // 3):
                    delete(pod)
        elif unheard and roll < 0.45:
            for pod in unheard[: rng.randint(1, len(unheard))]:
                unheard.remove(pod)
                heard.add(pod["metadata"]["uid"])
                model.hear("ADD", pod)
        elif model.updates and roll < 0.8:
            admit()
        elif roll < 0.88 and api.pods:
            delete(rng.choice(list(api.pods.values())))
        elif roll < 0.94 and running:
            finish(stack, api, model, scheduler, running.pop(rng.choice(list(running))))
        else:
            stack.runtime.reconcile()
    for pod in list(api.pods.values()):
        delete(pod)
    while model.updates:
        admit()
    stack.runtime.reconcile(prompt=True)
    out.leftovers += [f"seed {seed}: runtime holds {a.pod.name}/{a.container}" for a in stack.runtime.allocations()]
    out.leftovers += [f"seed {seed}: kubelet holds {a.pod.name}/{a.container}" for a in stack.kubelet.allocations()]
    model.rejected.clear()
    return out


def finish(stack: Stack, api: MemoryApi, model: KubeletModel, scheduler: Scheduler, pod: dict[str, Any]) -> None:
    """A pod's containers end: kubelet stops it, the API server shows it Succeeded, the scheduler frees its GPU."""
    uid = pod["metadata"]["uid"]
    model.finish(uid)
    current = api.pods.get(("default", pod["metadata"]["name"]))
    if current is not None:
        current = copy.deepcopy(current)
        current["status"] = {"phase": "Succeeded"}
        api.put(current)
    for container in pod["spec"]["containers"]:
        scheduler.release(f"{uid}/{container['name']}")


def run(seeds: Sequence[int]) -> Outcome:
    total = Outcome()
    stack = start_stack()
    try:
        for seed in seeds:
            total.add(run_interleaving(stack, seed))
    finally:
        stack.close()
    return total


def seeds(count: int, first: int = 0) -> Iterator[int]:
    return iter(range(first, first + count))

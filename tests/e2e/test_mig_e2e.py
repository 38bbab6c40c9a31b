"""End to end on the embedded API server: the live scheduler (with the `mig` plugin, in process) places MIG
pods on simulated A100-80GB nodes, one in dynamic MIG mode and one with a static layout (and a GPU shared
by time); the simulated kubelets admit them through the real device plugins and runtimes; every
container gets the MIG UUIDs of its slots, and each runtime's MIG devices match the scheduler's ledger,
while pods come and go."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fixtures.waiting import wait_for
from runtimekit.api.podresources_client import PodResourcesClient
from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.base.keyring import KeyRing
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.cluster.kubelet.devicemanager import DeviceManager
from runtimekit.cluster.kubelet.devices import PluginDevices
from runtimekit.cluster.kubelet.kubelet import ENV_ANNOTATION, KubeletOptions, SimulatedKubelet
from runtimekit.cluster.kubelet.nodestatus import NodeShape
from runtimekit.cluster.kubelet.podresources import serve_pod_resources
from runtimekit.deviceplugin.manager import DevicePluginManager
from runtimekit.deviceplugin.publisher import NodePublisher
from runtimekit.deviceplugin.service import DevicePluginService, DeviceState, PluginSettings
from runtimekit.kube.http import KubeHttp
from runtimekit.kube.nodeapi import KubeNodeApi
from runtimekit.model import Assignment
from runtimekit.model.mig import geometry, mask
from runtimekit.protocol import KitProtocol
from runtimekit.runtime.daemon import RuntimeDaemon, RuntimeOptions, build_runtime
from runtimekit.scheduler.build import AssignmentKeys, SchedulerConfig, build_scheduler
from runtimekit.scheduler.framework import parse_conf
from runtimekit.scheduler.server import Scheduler

pytestmark = pytest.mark.e2e

P = KitProtocol.default()
KEYS = KeyRing.from_secrets(b"the key of the MIG end-to-end cluster's scheduler")
PODS = "/api/v1/namespaces/default/pods"
A100 = geometry("A100-80GB")
CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: nodeorder
  - name: gpushare
  - name: mig
"""


@dataclass(frozen=True)
class NodeSpec:
    name: str
    gpus: str
    mig_mode: str
    mig_layout: str = ""


DYNAMIC = NodeSpec("mig-dynamic", "2xA100-80GB", "dynamic")
STATIC = NodeSpec("mig-static", "1xA100-80GB,1xH200", "0:static", "3g.40gb,2g.20gb,1g.10gb,1g.10gb")


@dataclass
class Node:
    spec: NodeSpec
    runtime: RuntimeDaemon
    client: RuntimeClient
    stops: list[Callable[[], None]] = field(default_factory=list)


@dataclass
class Cluster:
    api: ApiServer
    http: KubeHttp
    scheduler: Scheduler
    nodes: dict[str, Node]


def start_node(api: ApiServer, spec: NodeSpec, index: int, folder: Path) -> Node:
    """kubelet (device manager, PodResources), runtime and device plugin of one node, wired as `runtimekit up` does."""
    http = KubeHttp.connect(server=api.url, user_agent=f"e2e/{spec.name}")
    manager = DeviceManager(folder / "plugins").start()
    shape = NodeShape(spec.name, labels={"e2e/node": spec.name})
    kubelet = SimulatedKubelet(http, PluginDevices(manager), KubeletOptions(shape, P, node_index=index, poll_s=0.1))
    api.add_kubelet_hook(kubelet)
    kubelet.start()
    pod_resources = serve_pod_resources(manager, folder / "pr.sock", kubelet.running_pods)
    options = RuntimeOptions(
        backend="simulated",
        socket_path=str(folder / "rt.sock"),
        state_dir=folder / "state",
        node_name=spec.name,
        simulate_gpus=spec.gpus,
        mig_mode=spec.mig_mode,
        mig_layout=spec.mig_layout,
        reconcile_interval_s=1.0,
        reconcile_grace_s=0.2,
    )
    runtime = build_runtime(options, KubeNodeApi(http), PodResourcesClient(str(folder / "pr.sock")))
    daemon = RuntimeDaemon(runtime, options.socket_path, options.reconcile_interval_s).start()
    client = RuntimeClient(options.socket_path)
    kube = KubeNodeApi(http)
    lister = PodResourcesClient(str(folder / "pr.sock"))
    service = DevicePluginService(PluginSettings(spec.name, P, keys=KEYS), client, kube, DeviceState(), kubelet=lister)
    plugin = DevicePluginManager(service, client.watch_devices, folder / "plugins", NodePublisher(kube, spec.name, P))
    plugin.start(30.0)
    names = sorted(resource.name for resource in service.specs())
    listed = manager.wait_for(lambda k: k.resources() == names and all(k.updates(r) for r in names), 30.0)
    assert listed, f"{spec.name}: kubelet lists {manager.resources()}, the plugin serves {names}"
    kubelet.on_pod_stopped.append(lambda _pod: runtime.reconcile())  # free a stopped pod before the next admission
    node = Node(spec, daemon, client)
    node.stops = [kubelet.stop, plugin.stop, client.close, lister.close, daemon.stop]
    node.stops.append(lambda: pod_resources.stop(0).wait())
    node.stops += [manager.stop, http.close, lambda: api.remove_kubelet_hook(kubelet)]
    return node


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    root = Path(tempfile.mkdtemp(prefix="mig-e2e-"))
    api = ApiServer(bookmark_interval=0.5, seed=7).start()
    nodes: dict[str, Node] = {}
    scheduler = None
    http = KubeHttp.connect(server=api.url, user_agent="e2e")
    try:
        for index, spec in enumerate((DYNAMIC, STATIC), start=1):
            nodes[spec.name] = start_node(api, spec, index, root / f"n{index}")
        config = SchedulerConfig(
            kube=http,
            conf=parse_conf(CONF),
            protocol=P,
            keys=AssignmentKeys(signer=KEYS),
            period=0.02,
            bind_workers=1,
            retry_seconds=1.0,
        )
        scheduler = build_scheduler(config)
        scheduler.start()
        assert scheduler.synced(10)
        wait_for(lambda: ledger_rows(scheduler) == {DYNAMIC.name: 2, STATIC.name: 1}, what="MIG GPUs in the ledger")
        yield Cluster(api, http, scheduler, nodes)
    finally:
        if scheduler is not None:
            scheduler.stop()
        for node in nodes.values():
            for stop in node.stops:
                stop()
        http.close()
        api.close()
        shutil.rmtree(root, ignore_errors=True)


def ledger_rows(scheduler: Scheduler) -> dict[str, int]:
    """Node -> how many MIG GPUs the scheduler's ledger knows there."""
    ledger = scheduler.cache.ledger
    with scheduler.cache.lock:
        names = {n: ledger.table.row(n) for n in (DYNAMIC.name, STATIC.name) if ledger.table.has_node(n)}
        return {n: len(ledger.table.mig.get(row, {})) for n, row in names.items()}


def mig_pod(name: str, node: NodeSpec, profile: str, count: int = 1) -> dict[str, Any]:
    limits = {P.resources.mig_prefix + profile: str(count)}
    return pod(name, node, limits)


def pod(name: str, node: NodeSpec, limits: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": P.scheduler_name,
            "nodeSelector": {"e2e/node": node.name},
            "containers": [{"name": "main", "image": "cuda:12", "resources": {"limits": limits}}],
        },
    }


def phase(http: KubeHttp, name: str) -> str:
    return str(http.get(f"{PODS}/{name}").get("status", {}).get("phase", ""))


def running(http: KubeHttp, names: list[str]) -> list[dict[str, Any]] | None:
    pods = [http.get(f"{PODS}/{n}") for n in names]
    failed = [p for p in pods if p.get("status", {}).get("phase") == "Failed"]
    assert not failed, [p["status"].get("message") for p in failed]
    return pods if all(p.get("status", {}).get("phase") == "Running" for p in pods) else None


def visible(pod: dict[str, Any]) -> list[str]:
    env = json.loads(pod["metadata"]["annotations"][ENV_ANNOTATION])
    return str(env["main"]["NVIDIA_VISIBLE_DEVICES"]).split(",")


def slots(pod: dict[str, Any]) -> list[tuple[str, str, int]]:
    assignment = Assignment.from_annotation(pod["metadata"]["annotations"][P.annotations.assignment])
    return [(str(s.parent_uuid), s.mig_profile, s.mig_start) for s in assignment.shares()]


def devices(node: Node) -> dict[tuple[str, str, int], str]:
    """(GPU, profile, start) -> MIG UUID of every MIG device the node's runtime has."""
    return {(d.uuid, m.profile, m.start): m.uuid for d in node.client.list_devices() for m in d.mig_devices}


def ledger_masks(cluster: Cluster, node: str) -> dict[str, int]:
    """GPU UUID -> the memory slices the scheduler's ledger has booked on it."""
    cache = cluster.scheduler.cache
    with cache.lock:
        row = cache.ledger.table.row(node)
        gpus = cache.nodes[node].inventory.gpus
        return {gpus[col].uuid: state.occupied for col, state in cache.ledger.table.mig.get(row, {}).items()}


def held_masks(node: Node) -> dict[str, int]:
    """GPU UUID -> the memory slices of the MIG devices the runtime has allocated to containers."""
    assert A100 is not None
    out: dict[str, int] = {}
    for allocation in node.client.list_allocations():
        for share in allocation.shares:
            if share.mig_profile:
                profile = A100.profile(share.mig_profile)
                assert profile is not None
                out[share.parent_uuid] = out.get(share.parent_uuid, 0) | mask(share.mig_start, profile.size)
    return out


def agree(cluster: Cluster, node: Node) -> bool:
    """The runtime holds exactly what the ledger booked (GPUs with nothing booked may be left out)."""
    booked = {g: m for g, m in ledger_masks(cluster, node.spec.name).items() if m}
    return booked == held_masks(node)


def delete(cluster: Cluster, *names: str) -> None:
    for name in names:
        cluster.http.delete(f"{PODS}/{name}", {"gracePeriodSeconds": 0})
    wait_for(lambda: not any(p["metadata"]["name"] in names for p in cluster.http.list(PODS)[0]), what="deleted")


def test_dynamic_mig_pods_get_devices_made_on_their_slots(cluster: Cluster) -> None:
    http, node = cluster.http, cluster.nodes[DYNAMIC.name]
    wanted = {"d-3g": ("3g.40gb", 1), "d-1g-pair": ("1g.10gb", 2), "d-7g": ("7g.80gb", 1), "d-1g": ("1g.10gb", 1)}
    for name, (profile, count) in wanted.items():
        http.post(PODS, mig_pod(name, DYNAMIC, profile, count))
    pods = wait_for(lambda: running(http, list(wanted)), what="dynamic MIG pods running")
    made = devices(node)
    index = {d.uuid: d.index for d in node.client.list_devices()}
    seen: set[str] = set()
    for manifest in pods:
        uuids, places = visible(manifest), slots(manifest)
        # the container sees the devices made on its slots, in device-ordinal order (GPU, start slice),
        # whatever order the assignment lists them in
        ordinal = sorted(places, key=lambda p: (index[p[0]], p[2]))
        assert [made[p] for p in ordinal] == uuids, (manifest["metadata"]["name"], places, uuids)
        assert all(u.startswith("MIG-") for u in uuids)
        seen |= set(uuids)
    assert seen == set(made.values())  # nothing else was made
    assert wait_for(lambda: agree(cluster, node), what="runtime and ledger agree")

    http.post(PODS, mig_pod("d-7g-more", DYNAMIC, "7g.80gb"))  # no whole GPU is free: it waits
    time.sleep(0.5)
    assert phase(http, "d-7g-more") == "Pending"
    delete(cluster, "d-7g")
    wait_for(lambda: running(http, ["d-7g-more"]), what="the waiting pod runs on the freed GPU")
    assert len([k for k in devices(node) if k[1] == "7g.80gb"]) == 1  # the old device went, a new one came
    assert wait_for(lambda: agree(cluster, node), what="runtime and ledger agree")
    delete(cluster, *[n for n in wanted if n != "d-7g"], "d-7g-more")
    wait_for(lambda: not devices(node), what="every dynamic device destroyed")
    assert wait_for(lambda: agree(cluster, node), what="ledger empty")


def test_static_mig_pods_get_the_layouts_devices_and_a_shared_gpu_stays_shared(cluster: Cluster) -> None:
    http, node = cluster.http, cluster.nodes[STATIC.name]
    layout = devices(node)
    assert sorted((k[1], k[2]) for k in layout) == [("1g.10gb", 2), ("1g.10gb", 3), ("2g.20gb", 0), ("3g.40gb", 4)]
    http.post(PODS, mig_pod("s-1g-a", STATIC, "1g.10gb"))
    http.post(PODS, mig_pod("s-1g-b", STATIC, "1g.10gb"))
    http.post(PODS, mig_pod("s-3g", STATIC, "3g.40gb"))
    http.post(PODS, pod("s-share", STATIC, {P.resources.core: "50", P.resources.memory: "10"}))
    pods = {p["metadata"]["name"]: p for p in wait_for(lambda: running(http, ["s-1g-a", "s-1g-b", "s-3g", "s-share"]))}
    for name in ("s-1g-a", "s-1g-b", "s-3g"):
        assert [layout[s] for s in slots(pods[name])] == visible(pods[name])
    assert len({visible(pods["s-1g-a"])[0], visible(pods["s-1g-b"])[0]}) == 2
    h200 = node.client.list_devices()[1]
    assert (h200.mig_mode, visible(pods["s-share"])) == (pb.MIG_MODE_OFF, [h200.uuid])
    http.post(PODS, mig_pod("s-1g-c", STATIC, "1g.10gb"))  # the layout has two 1g.10gb: it waits
    http.post(PODS, mig_pod("s-7g", STATIC, "7g.80gb"))  # not in the layout at all
    time.sleep(0.5)
    assert (phase(http, "s-1g-c"), phase(http, "s-7g")) == ("Pending", "Pending")
    assert wait_for(lambda: agree(cluster, node), what="runtime and ledger agree")
    delete(cluster, "s-1g-a")
    wait_for(lambda: running(http, ["s-1g-c"]), what="the waiting pod takes the freed device")
    assert devices(node) == layout  # static devices are never made or destroyed
    delete(cluster, "s-1g-b", "s-1g-c", "s-3g", "s-share", "s-7g")
    assert wait_for(lambda: agree(cluster, node), what="ledger empty")

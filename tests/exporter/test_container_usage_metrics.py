"""Per-container usage as the exporter publishes it, from a runtime on simulated GPUs over its gRPC
socket: the usage model driven by pod annotations, the unattributed remainder, the over-share metric
and its Event, series of a deleted pod, the per-node series limit, and an old runtime without usage."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from runtimekit.api.kubelet_dra import CLAIM_RESOURCE
from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.exporter.collector import RuntimeCollector
from runtimekit.kube.objects import Pod
from runtimekit.protocol import KitProtocol
from runtimekit.runtime.daemon import RuntimeDaemon
from runtimekit.runtime.isolation import make_isolation
from runtimekit.runtime.pods import StaticPods
from runtimekit.runtime.service import NodeRuntime
from runtimekit.runtime.simulated import DRIVER_RESERVED_MIB, SimulatedBackend, parse_gpu_spec
from runtimekit.runtime.simusage import SimulatedUsage, usage_annotations
from runtimekit.runtime.values import RuntimeSettings

MIB = 1 << 20
CORE, MEMORY = usage_annotations(KitProtocol.default().annotations.simulated_runtime)


@dataclass
class Events:
    written: list[tuple[str, str, str, str, str, str]] = field(default_factory=list)

    def record_pod_event(self, namespace: str, name: str, uid: str, kind: str, reason: str, message: str) -> None:
        self.written.append((namespace, name, uid, kind, reason, message))


def pod(name: str, notes: dict[str, str] | None = None) -> Pod:
    return {
        "metadata": {"namespace": "ml", "name": name, "uid": f"uid-{name}", "annotations": notes or {}},
        "spec": {"nodeName": "node-a"},
        "status": {"phase": "Running"},
    }


@dataclass
class Node:
    service: NodeRuntime
    client: RuntimeClient
    pods: list[Pod]
    events: Events
    uuids: list[str]

    def allocate(self, name: str, gpu: int, core: int, memory_mib: int) -> None:
        share = pb.GpuShare(uuid=self.uuids[gpu], core_milli=core, memory_mib=memory_mib)
        self.client.allocate("ml", name, f"uid-{name}", "main", [share])

    def scrape(self, collector: RuntimeCollector | None = None) -> dict[str, list[Any]]:
        registry = CollectorRegistry()
        registry.register(collector or RuntimeCollector(self.client, KitProtocol.default()))
        out: dict[str, list[Any]] = {}
        for family in text_string_to_metric_families(generate_latest(registry).decode()):
            for sample in family.samples:
                out.setdefault(sample.name, []).append(sample)
        return out


@pytest.fixture
def node() -> Iterator[Node]:
    folder = Path(tempfile.mkdtemp(prefix="rku-"))
    backend = SimulatedBackend("node-a", parse_gpu_spec("2xH200"), seed=3)
    pods = [pod("small"), pod("greedy", {CORE: "70", MEMORY: "main=30Gi"})]
    events = Events()
    service = NodeRuntime(
        RuntimeSettings("node-a", folder / "state", KitProtocol.default(), "0.1.0", 0.0),
        backend,
        make_isolation("none"),
        pods=StaticPods(pods),
        events=events,
        usage=SimulatedUsage((CORE, MEMORY)),
    )
    sock = str(folder / "runtime.sock")
    daemon = RuntimeDaemon(service, sock, reconcile_interval_s=0).start()
    client = RuntimeClient(sock, timeout_s=2.0)
    yield Node(service, client, pods, events, [d.uuid for d in backend.devices()])
    client.close()
    daemon.stop()
    shutil.rmtree(folder, ignore_errors=True)


def by_pod(samples: list[Any]) -> dict[str, float]:
    return {s.labels["pod"]: s.value for s in samples}


def test_usage_families_unattributed_and_over_share(node: Node) -> None:
    node.allocate("small", 0, 300, 10240)
    node.allocate("greedy", 0, 200, 20480)
    node.service.reconcile()  # the runtime learns the pods' annotations
    got = node.scrape()
    assert by_pod(got["runtimekit_container_gpu_memory_used_bytes"]) == {"small": 7168 * MIB, "greedy": 30720 * MIB}
    assert by_pod(got["runtimekit_container_gpu_utilization_ratio"]) == {"small": 0.18, "greedy": 0.7}
    assert by_pod(got["runtimekit_container_over_share"]) == {"small": 0.0, "greedy": 1.0}
    greedy = next(s for s in got["runtimekit_container_over_share"] if s.labels["pod"] == "greedy")
    granted = next(s for s in got["runtimekit_allocation_core_ratio"] if s.labels["pod"] == "greedy")
    assert greedy.labels == granted.labels  # the same series labels as the share granted: used/granted joins
    rest = {s.labels["gpu"]: s.value for s in got["runtimekit_gpu_unattributed_memory_bytes"]}
    assert rest["0"] == DRIVER_RESERVED_MIB * MIB  # the simulated GPU: containers plus the driver's part
    assert {s.labels["gpu"] for s in got["runtimekit_gpu_unattributed_utilization_ratio"]} == {"0", "1"}
    used = {s.labels["gpu"]: s.value for s in got["runtimekit_gpu_memory_used_bytes"]}
    assert used["0"] == (7168 + 30720 + DRIVER_RESERVED_MIB) * MIB


def test_over_share_event_once_per_excess(node: Node) -> None:
    node.allocate("greedy", 0, 200, 20480)
    node.service.reconcile()
    for _ in range(3):
        node.scrape()
    assert [(e[1], e[3], e[4]) for e in node.events.written] == [("greedy", "Warning", "GPUShareExceeded")]
    assert (
        "GPU memory above the 20480 MiB granted and SM utilisation above the 20% granted" in node.events.written[0][5]
    )
    node.pods[1]["metadata"]["annotations"] = {}  # back within its share, then over again: a new Event
    node.service.reconcile()
    node.scrape()
    node.pods[1]["metadata"]["annotations"] = {CORE: "90"}
    node.service.reconcile()
    node.scrape()
    assert len(node.events.written) == 2
    assert node.events.written[1][5].endswith(f"{node.uuids[0]}: SM utilisation above the 20% granted (node node-a)")


def test_series_of_a_deleted_pod_disappear(node: Node) -> None:
    node.allocate("small", 0, 300, 10240)
    node.allocate("greedy", 1, 200, 20480)
    assert set(by_pod(node.scrape()["runtimekit_container_gpu_memory_used_bytes"])) == {"small", "greedy"}
    del node.pods[0]  # the API server no longer lists it: the next reconcile releases its allocation
    node.service.reconcile()
    got = node.scrape()
    for name in ("runtimekit_container_gpu_memory_used_bytes", "runtimekit_container_over_share"):
        assert set(by_pod(got[name])) == {"greedy"}


def test_cardinality_limit_keeps_the_heaviest_and_counts_the_rest(node: Node) -> None:
    node.allocate("small", 0, 300, 10240)
    node.allocate("greedy", 1, 200, 20480)
    node.service.reconcile()
    collector = RuntimeCollector(node.client, KitProtocol.default(), max_container_series=1)
    node.scrape(collector)
    got = node.scrape(collector)
    assert set(by_pod(got["runtimekit_container_gpu_memory_used_bytes"])) == {"greedy"}
    assert got["runtimekit_container_series_dropped_total"][0].value == 2  # one per scrape


def test_a_runtime_without_usage_gets_no_usage_families(tmp_path: Path) -> None:
    backend = SimulatedBackend("node-a", parse_gpu_spec("1xH200"), seed=3)
    service = NodeRuntime(
        RuntimeSettings("node-a", tmp_path / "state", KitProtocol.default(), "0.1.0", 30.0),
        backend,
        make_isolation("none"),
    )
    sock = str(tmp_path / "runtime.sock")
    daemon = RuntimeDaemon(service, sock, reconcile_interval_s=0).start()
    client = RuntimeClient(sock, timeout_s=2.0)
    try:
        node = Node(service, client, [], Events(), [d.uuid for d in backend.devices()])
        node.allocate("small", 0, 300, 10240)
        got = node.scrape()
    finally:
        client.close()
        daemon.stop()
    assert "runtimekit_allocation_core_ratio" in got
    assert not [name for name in got if name.startswith(("runtimekit_container_gpu", "runtimekit_gpu_unattributed"))]


def claim_pod(name: str, claim: str, notes: dict[str, str]) -> Pod:
    """A pod whose container `main` uses the ResourceClaim `claim` (NVIDIA's gpu-test shape)."""
    made = pod(name, notes)
    made["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    made["spec"]["containers"] = [{"name": "main", "resources": {"claims": [{"name": "gpu"}]}}]
    return made


def series(samples: list[Any]) -> dict[tuple[str, str], tuple[str, float]]:
    return {(s.labels["pod"], s.labels["container"]): (s.labels["uuid"], s.value) for s in samples}


CONTAINER_FAMILIES = (
    "runtimekit_container_gpu_memory_used_bytes",
    "runtimekit_container_gpu_utilization_ratio",
    "runtimekit_container_over_share",
    "runtimekit_allocation_core_ratio",
    "runtimekit_allocation_memory_limit_bytes",
)


def test_a_claim_prepared_container_is_attributed_as_a_device_plugin_one(node: Node) -> None:
    notes = {CORE: "40", MEMORY: "main=12Gi"}
    node.pods[:] = [pod("plugin", notes), claim_pod("claimed", "claimed-gpu-x7k2p", notes)]
    node.allocate("plugin", 0, 300, 10240)
    share = pb.GpuShare(uuid=node.uuids[1], core_milli=300, memory_mib=10240)
    node.client.allocate("ml", "claimed-gpu-x7k2p", "uid-claim", "gpu", [share], CLAIM_RESOURCE)  # as the DRA plugin
    node.service.reconcile()
    got = node.scrape()
    for family in CONTAINER_FAMILIES:
        rows = series(got[family])
        assert set(rows) == {("plugin", "main"), ("claimed", "main")}, family
        assert rows[("claimed", "main")] == (node.uuids[1], rows[("plugin", "main")][1]), family
    assert by_pod(got["runtimekit_container_over_share"])["claimed"] == 1.0  # 12 GiB used of the 10 GiB granted
    assert [e[1] for e in node.events.written] == ["plugin", "claimed"]  # the Event goes to the pod, not the claim


def test_a_claim_shared_by_two_pods_is_granted_once(node: Node) -> None:
    node.pods[:] = [claim_pod("one", "shared", {}), claim_pod("two", "shared", {CORE: "10"})]
    share = pb.GpuShare(uuid=node.uuids[0], core_milli=500, memory_mib=20480)
    node.client.allocate("ml", "shared", "uid-shared", "gpu", [share], CLAIM_RESOURCE)
    node.service.reconcile()
    got = node.scrape()
    assert by_pod(got["runtimekit_container_gpu_utilization_ratio"]) == {"one": 0.3, "two": 0.1}
    assert by_pod(got["runtimekit_allocation_core_ratio"]) == {"shared": 0.5}  # counted once, under the claim
    assert got["runtimekit_node_gpu_core_allocated"][0].value == 0.5

"""Issue 33 item 1, end to end on the embedded cluster driven by the real kubectl: a pod that asks
only for `cpu: 100m`, bound to a node by its author with an unsigned assignment claiming all of the
node's GPUs, runs (no device plugin is involved), but the scheduler books no GPU for it: one-GPU pods
still fill the node, the squatter gets one Warning Event, the scheduler's
`runtimekit_scheduler_unverified_assignments_total` counts it, and `kubectl get` shows its GPU cell
`<refused>` and the node allocated by the real pods alone. A signature copied from a real pod is
refused the same way. A scheduler restarted while the squatter and the real holders run books the
holders (the squatter is listed first), so a pod created after a holder is deleted runs."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fixtures.apiserver import KUBECTL_BINARIES, KUBECTL_DISPATCHER, Kubectl
from fixtures.waiting import wait_for
from runtimekit.cli.embedded import ClusterOptions, EmbeddedCluster, start_cluster
from runtimekit.model import Assignment, GpuShare, NodeName, gpu_model, simulated_uuid
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.cache.authority import EVENT_REASON
from runtimekit.scheduler.metrics.assignments import NAME as METRIC
from runtimekit.scheduler.metrics.text import render

pytestmark = pytest.mark.e2e

P = KitProtocol.default()
NODE = "gpu-node-1"
GPUS = 4
H200_MIB = gpu_model("H200").memory_mib


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmbeddedCluster]:
    options = ClusterOptions(nodes=1, gpus_per_node=GPUS, controller=False)
    with start_cluster(options, ready_timeout_s=90) as started:
        yield started


@pytest.fixture(scope="module")
def kubectl(cluster: EmbeddedCluster, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    if KUBECTL_DISPATCHER is None and not KUBECTL_BINARIES:
        pytest.skip("kubectl is not installed")
    home: Path = tmp_path_factory.mktemp("home")
    return Kubectl(cluster.kubeconfig, home, KUBECTL_DISPATCHER or str(next(iter(KUBECTL_BINARIES.values()))))


def manifest(name: str, limits: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A pod for the kit's scheduler; with `annotations`, one its author bound to NODE instead."""
    container = {"name": "main", "image": "cuda:12", "resources": {"limits": limits, "requests": {"cpu": "100m"}}}
    spec: dict[str, Any] = {"containers": [container]}
    spec.update({"nodeName": NODE} if annotations is not None else {"schedulerName": P.scheduler_name})
    metadata = {"name": name, "annotations": annotations or {}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def create(kubectl: Kubectl, *pods: dict[str, Any]) -> None:
    kubectl("create", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(pods)}))


def pod(kubectl: Kubectl, name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(kubectl("get", "pod", name, "-o", "json").stdout)
    return found


def running(kubectl: Kubectl, *names: str) -> list[dict[str, Any]]:
    def check() -> list[dict[str, Any]] | None:
        pods = [pod(kubectl, n) for n in names]
        failed = [(p["metadata"]["name"], p["status"].get("message")) for p in pods if p["status"]["phase"] == "Failed"]
        assert not failed, failed
        return pods if all(p["status"]["phase"] == "Running" for p in pods) else None

    found: list[dict[str, Any]] = wait_for(check, timeout=60, what=f"{', '.join(names)} running")
    return found


def warnings(kubectl: Kubectl, name: str) -> list[dict[str, Any]]:
    selector = f"involvedObject.name={name},reason={EVENT_REASON}"
    items: list[dict[str, Any]] = json.loads(
        kubectl("get", "events", "--field-selector", selector, "-o", "json").stdout
    )["items"]
    return items


def ignored(cluster: EmbeddedCluster, reason: str) -> float:
    assert cluster.scheduler is not None
    for line in render(cluster.scheduler.registry).decode().splitlines():
        if line.startswith(f'{METRIC}{{reason="{reason}"}} '):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {METRIC} series for {reason}")


def gpu_of(found: dict[str, Any]) -> int:
    text = found["metadata"]["annotations"][P.annotations.assignment]
    (share,) = Assignment.from_annotation(text).containers["main"]
    return share.index


def all_gpus() -> str:
    shares = tuple(GpuShare(simulated_uuid(NODE, g), g, 1000, H200_MIB) for g in range(GPUS))
    return Assignment(NodeName(NODE), {"main": shares}).to_annotation()


def columns(kubectl: Kubectl, kind: str, name: str) -> dict[str, str]:
    """`kubectl get KIND NAME` as the server prints it: header -> cell."""
    header, row = (re.split(r"\s{2,}", line.strip()) for line in kubectl("get", kind, name).stdout.splitlines()[:2])
    return dict(zip(header, row, strict=True))


@pytest.fixture(scope="module")
def holders(cluster: EmbeddedCluster, kubectl: Kubectl) -> list[dict[str, Any]]:
    """The squatter running, then one-GPU pods on every GPU of the node, running."""
    create(kubectl, manifest("a-squatter", {}, {P.annotations.assignment: all_gpus()}))
    running(kubectl, "a-squatter")
    create(kubectl, *(manifest(f"one-{i}", {P.resources.gpu: "1"}) for i in range(GPUS)))
    return running(kubectl, *(f"one-{i}" for i in range(GPUS)))


def test_a_squatter_claiming_every_gpu_does_not_stop_one_gpu_pods(
    cluster: EmbeddedCluster, kubectl: Kubectl, holders: list[dict[str, Any]]
) -> None:
    assert sorted(gpu_of(p) for p in holders) == list(range(GPUS))
    assert {p["spec"]["nodeName"] for p in holders} == {NODE}
    (event,) = wait_for(lambda: warnings(kubectl, "a-squatter"), what="the squatter's Warning")
    assert event["type"] == "Warning"
    assert "it is not signed by the scheduler" in event["message"]
    assert ignored(cluster, "unsigned") == 1
    assert columns(kubectl, "pod", "a-squatter")["GPU"] == "<refused>"
    assert columns(kubectl, "node", NODE)["GPU ALLOCATED"] == "100%"  # the four real pods, not 200 %


def test_a_signature_copied_from_a_real_pod_is_refused(
    cluster: EmbeddedCluster, kubectl: Kubectl, holders: list[dict[str, Any]]
) -> None:
    notes = holders[0]["metadata"]["annotations"]
    copied = {k: notes[k] for k in (P.annotations.assignment, P.annotations.assignment_signature)}
    create(kubectl, manifest("b-copycat", {}, copied))
    (event,) = wait_for(lambda: warnings(kubectl, "b-copycat"), what="the copycat's Warning")
    assert "its signature is not the scheduler's: signature does not match" in event["message"]
    assert ignored(cluster, "signature") == 1
    scheduler = cluster.scheduler
    assert scheduler is not None
    with scheduler.cache.lock:
        key = scheduler.cache.uid_of["default/b-copycat"]
        booking = scheduler.cache.ledger.booking(key)
    assert booking is not None
    assert booking.slots == ()
    assert len(warnings(kubectl, "a-squatter")) == 1  # said once, though sessions ran since


def test_a_restarted_scheduler_books_the_real_holders_not_the_squatter(
    cluster: EmbeddedCluster, kubectl: Kubectl, holders: list[dict[str, Any]]
) -> None:
    scheduler = cluster.restart_scheduler()
    assert scheduler.synced(timeout=30)
    with scheduler.cache.lock:
        booked = {
            name: scheduler.cache.ledger.booking(scheduler.cache.uid_of[f"default/{name}"])
            for name in ("a-squatter", *(f"one-{i}" for i in range(GPUS)))
        }
        conflicts = dict(scheduler.cache.conflicts)
    assert conflicts == {}
    assert {name: [s.gpu for s in b.slots] if b else None for name, b in booked.items()} == {
        "a-squatter": [],
        **{p["metadata"]["name"]: [gpu_of(p)] for p in holders},
    }
    kubectl("delete", "pod", "one-1", "--wait=false")
    create(kubectl, manifest("one-new", {P.resources.gpu: "1"}))
    (new,) = running(kubectl, "one-new")
    assert gpu_of(new) == gpu_of(holders[1])  # the GPU one-1 gave back
    wait_for(lambda: ignored(cluster, "unsigned") == 1, what="the restarted scheduler counting the squatter")

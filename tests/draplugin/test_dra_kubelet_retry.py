"""A pod whose ResourceClaim cannot be prepared yet is not failed: as kubelet's pod worker retries a
failed sync, the simulated kubelet keeps it Pending (containers `ContainerCreating`), says why in a
Warning `FailedPrepareDynamicResources` Event counted up on each try, tries NodePrepareResources again
after its back-off, and runs the pod with the claim's environment once the claim is allocated; a pod
deleted while it waits gives back what it held."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from dra_helpers import NODE, DraStack, claim

from fixtures.waiting import wait_for
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.cluster.kubelet.devices import DirectDevices
from runtimekit.cluster.kubelet.dradevices import DraDevices
from runtimekit.cluster.kubelet.kubelet import ENV_ANNOTATION, KubeletOptions, SimulatedKubelet
from runtimekit.cluster.kubelet.nodestatus import NodeShape
from runtimekit.kube.http import KubeHttp
from runtimekit.model import NodeInventory, simulated_uuid
from runtimekit.protocol import KitProtocol

PODS = "/api/v1/namespaces/default/pods"
RETRY_S = 0.3
Factory = Callable[..., DraStack]


@pytest.fixture
def stack(dra_stack: Factory) -> DraStack:
    made = dra_stack()
    made.serve()
    return made


@pytest.fixture
def http(apiserver: ApiServer, stack: DraStack, tmp_path: Path) -> Iterator[KubeHttp]:
    assert stack.watcher is not None
    inner = DirectDevices(NodeInventory.simulated(NODE, "H200", 2), KitProtocol.default())
    kube = KubeHttp.connect(server=apiserver.url)
    options = KubeletOptions(NodeShape(NODE, cpu="8", memory="32Gi"), work_dir=tmp_path, prepare_retry_s=RETRY_S)
    kubelet = SimulatedKubelet(kube, DraDevices(inner, stack.watcher, stack.claims, stack.cdi_dir), options)
    apiserver.add_kubelet_hook(kubelet)
    kubelet.start()
    assert kubelet.synced(10)
    yield kube
    apiserver.remove_kubelet_hook(kubelet)
    kubelet.stop()
    kube.close()


def claim_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": NODE,
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "share"}],
            "containers": [{"name": "ctr", "image": "cuda", "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }


def prepare_events(http: KubeHttp, name: str) -> list[dict[str, Any]]:
    events = http.get("/api/v1/namespaces/default/events", {"fieldSelector": f"involvedObject.name={name}"})
    return [e for e in events["items"] if e["reason"] == "FailedPrepareDynamicResources"]


def test_a_claim_not_allocated_yet_is_retried_until_the_pod_runs(http: KubeHttp, stack: DraStack) -> None:
    http.post(PODS, claim_pod("p1"))
    retried = wait_for(
        lambda: [e for e in prepare_events(http, "p1") if e.get("count", 1) >= 2], 20, "a retried prepare"
    )
    (event,) = retried
    assert (event["type"], event["source"]["component"]) == ("Warning", "kubelet")
    assert event["message"] == (
        'Failed to prepare dynamic resources: ResourceClaim default/share: resourceclaims "share" not found'
    )
    assert "fieldPath" not in event["involvedObject"]  # about the pod, not one container
    pod = http.get(f"{PODS}/p1")
    assert pod["status"]["phase"] == "Pending"
    assert [s["state"] for s in pod["status"]["containerStatuses"]] == [{"waiting": {"reason": "ContainerCreating"}}]

    stack.claims.add(claim("share", "uid-share", [{"request": "gpu", "device": "gpu-1"}]))
    wait_for(lambda: http.get(f"{PODS}/p1")["status"].get("phase") == "Running", 20, "the pod running")
    env = http.get(f"{PODS}/p1")["metadata"]["annotations"][ENV_ANNOTATION]
    assert simulated_uuid(NODE, 1) in env
    assert [a.pod.uid for a in stack.client.list_allocations()] == ["uid-share"]


def test_a_pod_deleted_while_its_claim_is_retried_is_forgotten(http: KubeHttp, stack: DraStack) -> None:
    http.post(PODS, claim_pod("p2"))
    wait_for(lambda: prepare_events(http, "p2"), 20, "a failed prepare")
    http.delete(f"{PODS}/p2")
    wait_for(lambda: not http.list(PODS)[0], 20, "the pod gone")
    stack.claims.add(claim("share", "uid-share", [{"request": "gpu", "device": "gpu-1"}]))
    count = prepare_events(http, "p2")[0].get("count", 1)
    time.sleep(4 * RETRY_S)
    assert prepare_events(http, "p2")[0].get("count", 1) == count  # no more tries
    assert not stack.client.list_allocations()

"""The DRA plugin against the embedded API server (resource.k8s.io v1) through its real client: slices the
server's schema accepts and kubectl shows, DeviceClasses installed once, a claim allocated in its status
prepared through kubelet's gRPC calls."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx2
import pytest
from dra_helpers import DRIVER, NODE, DraStack, claim

from fixtures.apiserver import Kubectl
from runtimekit.cluster.apiserver.server import ApiServer
from runtimekit.cluster.kubelet.draplugins import ClaimKey
from runtimekit.draplugin.cdi import CdiWriter
from runtimekit.draplugin.checkpoint import Checkpoint
from runtimekit.draplugin.names import KIT_NAMES
from runtimekit.draplugin.publisher import SlicePublisher
from runtimekit.draplugin.service import DraService
from runtimekit.kube.draapi import KubeDraApi
from runtimekit.model import MigMode

Factory = Callable[..., DraStack]


@pytest.fixture
def dra_api(apiserver: ApiServer, kube_http: httpx2.Client) -> Iterator[KubeDraApi]:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}}
    assert kube_http.post("/api/v1/nodes", json=node).status_code == 201
    api = KubeDraApi.connect(apiserver.url)
    yield api
    api.close()


def test_slices_are_accepted_listed_and_kept(dra_stack: Factory, dra_api: KubeDraApi, kubectl: Kubectl) -> None:
    stack = dra_stack(gpus="2xA100-40GB", mig_modes={1: MigMode.DYNAMIC})
    publisher = SlicePublisher(dra_api, DRIVER, NODE)
    assert publisher.publish(stack.devices.current())
    assert publisher.writes == 2
    names = kubectl("get", "resourceslices", "--field-selector", f"spec.nodeName={NODE}", "-o", "name").stdout.split()
    assert names == [
        f"resourceslice.resource.k8s.io/{NODE}-{DRIVER}-counters",
        f"resourceslice.resource.k8s.io/{NODE}-{DRIVER}-devices",
    ]
    stored = {s["metadata"].get("name"): s for s in dra_api.list_slices(DRIVER, NODE)}
    devices = stored[f"{NODE}-{DRIVER}-devices"]["spec"]
    assert devices.get("pool") == {"name": NODE, "generation": 1, "resourceSliceCount": 2}
    shared = next(d for d in devices.get("devices", []) if d["name"] == "gpu-0")
    assert shared.get("capacity", {})["core"].get("requestPolicy", {}).get("default") == "100"
    owner = stored[f"{NODE}-{DRIVER}-devices"]["metadata"].get("ownerReferences", [])
    assert [(o.get("kind"), o.get("name")) for o in owner] == [("Node", NODE)]
    again = SlicePublisher(dra_api, DRIVER, NODE)
    assert again.publish(stack.devices.current())
    assert again.writes == 0


def test_device_classes_are_created_once(dra_api: KubeDraApi, kubectl: Kubectl) -> None:
    assert [dra_api.ensure_device_class(c) for c in KIT_NAMES.device_classes()] == [True, True]
    assert [dra_api.ensure_device_class(c) for c in KIT_NAMES.device_classes()] == [False, False]
    names = kubectl("get", "deviceclasses", "-o", "name").stdout.split()
    assert names == [
        "deviceclass.resource.k8s.io/gpu.runtimekit.aliyun.com",
        "deviceclass.resource.k8s.io/mig.runtimekit.aliyun.com",
    ]


def test_a_claim_allocated_on_the_server_is_prepared(
    dra_stack: Factory, dra_api: KubeDraApi, kube_http: httpx2.Client
) -> None:
    stack = dra_stack()
    body = claim(
        "shared", "", [{"request": "gpu", "device": "gpu-0", "consumedCapacity": {"core": "50", "memory": "4Gi"}}]
    )
    status = body.pop("status")
    base = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
    body["metadata"].pop("uid")
    body["spec"] = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}}
    created = kube_http.post(base, json=body).json()
    created["status"] = status
    assert kube_http.put(f"{base}/shared/status", json=created).status_code == 200
    uid = created["metadata"]["uid"]
    stack.service = DraService(
        DRIVER,
        NODE,
        stack.client,
        dra_api,
        stack.devices,
        CdiWriter(stack.cdi_dir, KIT_NAMES.cdi_kind),
        Checkpoint(stack.dir / "state" / "claims.json"),
    )
    watcher = stack.serve()
    answer = watcher.plugins[DRIVER].prepare([ClaimKey("default", uid, "shared")])[uid]
    assert answer.error == ""
    (held,) = stack.client.list_allocations()
    assert [(s.core_milli, s.memory_mib) for s in held.shares] == [(500, 4096)]

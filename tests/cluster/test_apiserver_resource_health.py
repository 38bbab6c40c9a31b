"""The pod status's device health (`allocatedResourcesStatus`, KEP-4680) through the real kubectl: a
status that names what the containers ask for is kept and read back; one that does not is refused
with kube-apiserver's causes (validateContainerStatusAllocatedResourcesStatus)."""

from __future__ import annotations

import json

import httpx2

from fixtures.apiserver import Kubectl
from runtimekit.protocol import KitProtocol

GPU = KitProtocol.default().resources.gpu
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "trainer", "namespace": "default"},
    "spec": {
        "resourceClaims": [{"name": "gpus", "resourceClaimName": "two-gpus"}],
        "containers": [
            {
                "name": "main",
                "image": "cuda:12",
                "resources": {"limits": {GPU: "1"}, "claims": [{"name": "gpus", "request": "big"}]},
            },
            {"name": "side", "image": "busybox"},
        ],
    },
}


def health(name: str, *resources: tuple[str, str]) -> dict[str, object]:
    return {"name": name, "resources": [{"resourceID": i, "health": h} for i, h in resources]}


def patch_status(kubectl: Kubectl, statuses: list[dict[str, object]]) -> tuple[int, str]:
    body = json.dumps({"status": {"containerStatuses": statuses}})
    done = kubectl("patch", "pod", "trainer", "--subresource=status", "--type=merge", "-p", body, check=False)
    return done.returncode, done.stdout + done.stderr


def test_a_status_naming_the_containers_resources_is_kept(kubectl: Kubectl, kube_http: httpx2.Client) -> None:
    assert kube_http.post("/api/v1/namespaces/default/pods", json=POD).status_code == 201
    reported = [
        health(GPU, ("GPU-1", "Unhealthy")),
        health("claim:gpus/big", ("gpu.example.com/pool/gpu-0", "Healthy"), ("gpu.example.com/pool/gpu-1", "Unknown")),
    ]
    code, out = patch_status(kubectl, [{"name": "main", "ready": True, "allocatedResourcesStatus": reported}])
    assert code == 0, out
    text = kubectl("get", "pod", "trainer", "-o", "jsonpath={.status.containerStatuses[0].allocatedResourcesStatus}")
    assert json.loads(text.stdout) == reported


def test_a_status_naming_anything_else_is_refused_with_kubes_causes(kubectl: Kubectl, kube_http: httpx2.Client) -> None:
    assert kube_http.post("/api/v1/namespaces/default/pods", json=POD).status_code == 201
    bad = [
        health("nvidia.com/gpu", ("a", "Healthy")),  # not requested by the container
        health("claim:gpus", ("b", "Healthy")),  # the container names a request of the claim
        health(GPU, ("c", "Healthy"), ("c", "Sick")),
    ]
    code, out = patch_status(kubectl, [{"name": "main", "allocatedResourcesStatus": bad}])
    assert code != 0
    assert "is invalid" in out
    base = "status.containerStatuses[0].allocatedResourcesStatus"
    requests = "must match one of the container's resource requests"
    assert f'{base}[0].name: Invalid value: "nvidia.com/gpu": {requests}' in out
    assert f'{base}[1].name: Invalid value: "claim:gpus": must match one of the container\'s resource claims' in out
    assert f'{base}[2].resources[1].health: Unsupported value: "Sick"' in out
    assert f'{base}[2].resources[1].resourceID: Duplicate value: "c"' in out
    code, out = patch_status(kubectl, [{"name": "side", "allocatedResourcesStatus": [health(GPU, ("d", "Healthy"))]}])
    assert code != 0
    assert "status.containerStatuses[0].allocatedResourcesStatus[0].name" in out
    stored = kube_http.get("/api/v1/namespaces/default/pods/trainer").json()
    assert not stored.get("status", {}).get("containerStatuses")  # nothing of the refused writes was kept

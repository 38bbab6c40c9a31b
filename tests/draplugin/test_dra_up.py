"""`runtimekit up --dra`: every node runs the DRA plugin beside the device plugin and its kubelet prepares
pods' claims through it. A pod bound to a node with a claim allocated there runs with the environment
the runtime gives the same share on the device-plugin path; the claim is unprepared when the pod goes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fixtures.apiserver import http_client
from fixtures.waiting import wait_for
from runtimekit.api.runtime_client import RuntimeClient, Share
from runtimekit.cli.embedded import ClusterOptions, start_cluster
from runtimekit.cluster.kubelet.kubelet import ENV_ANNOTATION
from runtimekit.draplugin.names import KIT_DRIVER
from runtimekit.model import simulated_uuid

NODE = "gpu-node-1"
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"


def pod(name: str, claim: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": "none",  # bound below, once its claim is allocated and reserved for it
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
            "containers": [{"name": "ctr", "image": "ubuntu:22.04", "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }


@pytest.mark.e2e
def test_a_pod_with_a_share_of_a_gpu_through_a_claim_runs() -> None:
    options = ClusterOptions(nodes=1, gpus_per_node=2, isolation="mps", dra=True, scheduler=False, controller=False)
    with start_cluster(options) as cluster, http_client(cluster.url) as http:
        slices = wait_for(lambda: http.get("/apis/resource.k8s.io/v1/resourceslices").json()["items"], 30, "slices")
        assert [d["name"] for d in slices[0]["spec"]["devices"]] == ["gpu-0", "gpu-1"]
        claim = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "share"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": KIT_DRIVER}}]}},
        }
        created = http.post(CLAIMS, json=claim).json()
        result = {
            "request": "gpu",
            "driver": KIT_DRIVER,
            "pool": NODE,
            "device": "gpu-1",
            "consumedCapacity": {"core": "25", "memory": "16Gi"},
        }
        made = http.post("/api/v1/namespaces/default/pods", json=pod("p1", "share")).json()
        consumer = {"resource": "pods", "name": "p1", "uid": made["metadata"]["uid"]}
        created["status"] = {"allocation": {"devices": {"results": [result]}}, "reservedFor": [consumer]}
        assert http.put(f"{CLAIMS}/share/status", json=created).status_code == 200  # as the scheduler does
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": "p1"},
            "target": {"kind": "Node", "name": NODE},
        }
        assert http.post("/api/v1/namespaces/default/pods/p1/binding", json=binding).status_code == 201

        def running() -> Any:
            got = http.get("/api/v1/namespaces/default/pods/p1").json()
            assert got["status"].get("phase") != "Failed", got["status"]
            return got if got["status"].get("phase") == "Running" else None

        got = wait_for(running, 30, "the pod running")
        env = json.loads(got["metadata"]["annotations"][ENV_ANNOTATION])["ctr"]
        assert env["NVIDIA_VISIBLE_DEVICES"] == simulated_uuid(NODE, 1)
        assert cluster.nodes[0].runtime_socket is not None
        with RuntimeClient(cluster.nodes[0].runtime_socket) as client:
            (held,) = client.list_allocations()
            assert held.pod.uid == created["metadata"]["uid"]
            same = client.allocate("default", "x", "x-uid", "main", [Share(simulated_uuid(NODE, 1), 250, 16384)])
            client.release("x-uid")
            assert env == dict(same.envs)

            def reported() -> list[tuple[str, str]]:
                [status] = http.get("/api/v1/namespaces/default/pods/p1").json()["status"]["containerStatuses"]
                return [
                    (r["name"], h["health"]) for r in status.get("allocatedResourcesStatus", []) for h in r["resources"]
                ]

            # KEP-4680: the plugin's health stream reaches the pod's status through the kubelet
            wait_for(lambda: reported() == [("claim:gpu", "Healthy")], 30, "the claim's device reported healthy")
            client.set_device_health(simulated_uuid(NODE, 1), False, "test: XID 79")
            wait_for(lambda: reported() == [("claim:gpu", "Unhealthy")], 30, "the claim's device reported unhealthy")
            client.set_device_health(simulated_uuid(NODE, 1), True, "test: recovered")
            wait_for(lambda: reported() == [("claim:gpu", "Healthy")], 30, "healthy again")
            assert http.delete("/api/v1/namespaces/default/pods/p1?gracePeriodSeconds=0").status_code == 200
            wait_for(lambda: not client.list_allocations(), 30, "the claim unprepared")

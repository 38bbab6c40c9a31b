"""`runtimekit up --dra` end to end, driven by the real kubectl: the kit's scheduler allocates a pod's
ResourceClaim (made from a ResourceClaimTemplate asking for a share of a GPU: consumable capacity `core`
and `memory`), the embedded kubelet prepares it through the node's DRA plugin over its gRPC socket, the
pod runs with the environment the runtime gives the same share on the device-plugin path, and
`runtimekit inspect` counts the claim on its GPU. Bad claims are refused (CEL that does not compile: 422)
or said why in `PodScheduled` and a FailedScheduling Event, while other pods keep running. A gang of
claim-using pods places whole or waits.

One cluster for the module (2 nodes of 2 H200, MPS isolation): each test cleans up what it made."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from fixtures.kubeup import UpCluster, runtimekit_up
from fixtures.waiting import wait_for
from runtimekit.draplugin.names import KIT_DRIVER
from runtimekit.protocol import KitProtocol

pytestmark = pytest.mark.e2e
NODE = "gpu-node-1"
GROUP = "scheduling.k8s.io/group-name"


@pytest.fixture(scope="module")
def up_cluster() -> Iterator[UpCluster]:
    args = ["--dra", "--nodes", "2", "--gpus-per-node", "2", "--isolation", "mps"]
    with runtimekit_up(args, KitProtocol.default()) as cluster:
        wait_for(lambda: len(cluster.json("get", "resourceslices")["items"]) == 2, 60, "both nodes' slices")
        yield cluster


@pytest.fixture
def up(up_cluster: UpCluster) -> Iterator[UpCluster]:
    """The module's cluster, emptied of what the test made."""
    yield up_cluster
    up_cluster.kubectl("delete", "pods,podgroups,resourceclaimtemplates", "--all", "--wait=true", "--timeout=60s")


def template(name: str, core: str, memory: str, device_class: str = KIT_DRIVER, **exactly: Any) -> dict[str, Any]:
    request = {"deviceClassName": device_class, "capacity": {"requests": {"core": core, "memory": memory}}, **exactly}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": request}]}}},
    }


def claim_pod(name: str, template_name: str, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, **meta},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template_name}],
            "containers": [{"name": "ctr", "image": "ubuntu:22.04", "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }


def plugin_pod(name: str, percent: int, gib: int) -> dict[str, Any]:
    """The same share through the device plugin, on the same node."""
    limits = {"aliyun.com/gpu-core.percentage": str(percent), "aliyun.com/gpu-memory": str(gib)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": NODE},
            "containers": [{"name": "ctr", "image": "ubuntu:22.04", "resources": {"limits": limits}}],
        },
    }


def apply(up: UpCluster, *docs: dict[str, Any], check: bool = True) -> subprocess.CompletedProcess[str]:
    return up.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs), check=check)


def claim_of(up: UpCluster, pod: dict[str, Any]) -> dict[str, Any]:
    (status,) = pod["status"]["resourceClaimStatuses"]
    found: dict[str, Any] = yaml.safe_load(
        up.kubectl("get", "resourceclaim", status["resourceClaimName"], "-o", "yaml").stdout
    )
    return found


def inspect(up: UpCluster) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "runtimekit.cli.main", "inspect", "--no-usage", "-o", "json"],
        capture_output=True,
        text=True,
        env={**os.environ, "KUBECONFIG": str(up.kubeconfig), "KUBERNETES_SERVICE_HOST": ""},
        timeout=60,
        check=True,
    )
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def test_a_share_through_a_claim_runs_as_the_same_share_through_the_device_plugin(up: UpCluster) -> None:
    apply(up, template("quarter", "25", "16Gi"), claim_pod("claimed", "quarter"), plugin_pod("plugin", 25, 16))
    claimed, plugin = up.running("claimed", "plugin")
    claim = claim_of(up, claimed)
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert (result["driver"], result["pool"], result["consumedCapacity"]) == (
        KIT_DRIVER,
        claimed["spec"]["nodeName"],
        {"core": "25", "memory": "16Gi"},
    )
    assert claim["status"]["reservedFor"] == [
        {"resource": "pods", "name": "claimed", "uid": claimed["metadata"]["uid"]}
    ]
    assert up.kubectl("get", "resourceclaim").stdout.split("\n")[1].split()[1] == "allocated,reserved"

    # the environment the runtime gave each: the same share, on the GPU each was given
    slices = up.json("get", "resourceslices")["items"]
    uuids = {
        (s["spec"]["pool"]["name"], d["name"]): d["attributes"]["uuid"]["string"]
        for s in slices
        for d in s["spec"]["devices"]
    }
    gpu = uuids[(result["pool"], result["device"])]
    env, other = up.env(claimed, "ctr"), up.env(plugin, "ctr")
    assert env["NVIDIA_VISIBLE_DEVICES"] == gpu
    assert other["NVIDIA_VISIBLE_DEVICES"] in uuids.values()
    assert {k: v for k, v in env.items() if k != "NVIDIA_VISIBLE_DEVICES"} == {
        k: v for k, v in other.items() if k != "NVIDIA_VISIBLE_DEVICES"
    }
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "25"

    # what is left on the GPU: the slice's capacity less what the claims (and the plugin's pods) hold
    gpus = {g["uuid"]: g for n in inspect(up)["nodes"] for g in n["gpus"]}
    held = [p for p in gpus[gpu]["pods"] if p["claim"]]
    assert [(p["pod"], p["container"], p["coreMilli"], p["memoryMiB"]) for p in held] == [
        ("claimed", "ctr", 250, 16384)
    ]
    assert held[0]["claim"] == claim["metadata"]["name"]
    assert gpus[gpu]["coreFreeMilli"] == 1000 - sum(p["coreMilli"] for p in gpus[gpu]["pods"])


def test_bad_claims_are_said_why_and_other_pods_keep_running(up: UpCluster) -> None:
    bad_cel = template("bad-cel", "10", "1Gi", selectors=[{"cel": {"expression": "device.driver =="}}])
    refused = apply(up, bad_cel, check=False)
    assert refused.returncode != 0
    assert (
        'ResourceClaimTemplate "bad-cel" is invalid: spec.spec.devices.requests[0].exactly.selectors[0].cel.expression'
        in refused.stderr
    )
    assert "compilation failed" in refused.stderr
    apply(
        up,
        template("no-class", "10", "1Gi", device_class="gpu.example.com"),
        template("too-big", "10", "200Gi"),  # an H200 has 140 GiB
        template("small", "10", "1Gi"),
        claim_pod("no-class", "no-class"),
        claim_pod("too-big", "too-big"),
        claim_pod("fine", "small"),
    )
    up.running("fine")
    unknown = up.pending_because("no-class", "device class gpu.example.com does not exist")
    assert unknown == "0/2 nodes are available: 2 request gpu: device class gpu.example.com does not exist."
    assert up.pending_because("too-big", "cannot allocate all claims").startswith("0/2 nodes are available")
    (scheduled,) = [c for c in up.pod("too-big")["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable")
    assert "cannot allocate all claims" in scheduled["message"]


def gang(name: str, size: int, cpu: str) -> list[dict[str, Any]]:
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": size},
    }
    pods = [claim_pod(f"{name}-{i}", "most", annotations={GROUP: name}) for i in range(size)]
    for pod in pods:
        if cpu:
            pod["spec"]["containers"][0]["resources"]["requests"] = {"cpu": cpu}
    return [group, *pods]


@pytest.mark.parametrize(
    "cpu",
    [
        pytest.param("100m", id="with-a-cpu-request"),
        pytest.param("", id="claims-only"),
    ],
)
def test_a_gang_of_claim_using_pods_places_whole_or_waits(up: UpCluster, cpu: str) -> None:
    apply(up, template("most", "80", "100Gi"), *gang("five", 5, cpu))  # 4 GPUs in all, at most one each
    up.pending_because("five-4", "gang")
    assert not [p["metadata"]["name"] for p in up.json("get", "pods")["items"] if p["spec"].get("nodeName")]
    up.kubectl("delete", "pods,podgroups", "--all", "--wait=true", "--timeout=60s")
    apply(up, *gang("two", 2, cpu))
    placed = up.running("two-0", "two-1")
    devices = {
        (p["spec"]["nodeName"], claim_of(up, p)["status"]["allocation"]["devices"]["results"][0]["device"])
        for p in placed
    }
    assert len(devices) == 2  # 80 % each: never two on one GPU

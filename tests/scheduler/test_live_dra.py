"""The scheduler allocates ResourceClaims (`dynamicresources`), against the embedded API server: a
share of a GPU by consumable capacity from a template binds and its claim shows the allocation and
the pod in `reservedFor`; shares are counted across pods (written and in flight); bad claims wait
with a clear reason while other pods keep scheduling; a gang of claim-using pods places whole or
not at all; the device plugin's shares of a GPU count against DRA shares of it (the shared ledger)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fixtures.waiting import wait_for
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.kube.http import KubeHttp
from runtimekit.model.gpu import NodeInventory
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.build import AssignmentKeys, SchedulerConfig, build_scheduler
from runtimekit.scheduler.framework import parse_conf
from runtimekit.scheduler.framework.conf import DEFAULT_CONF_TEXT
from runtimekit.scheduler.server import Scheduler
from scheduler.helpers import gpu_node

P = KitProtocol.default()
PODS = "/api/v1/namespaces/default/pods"
RES = "/apis/resource.k8s.io/v1"
CLAIMS = f"{RES}/namespaces/default/resourceclaims"
DRIVER = "gpu.runtimekit.aliyun.com"
CONF = DEFAULT_CONF_TEXT  # dynamicresources is in the default conf


@pytest.fixture
def http(apiserver: ApiServer) -> Iterator[KubeHttp]:
    client = KubeHttp.connect(server=apiserver.url)
    yield client
    client.close()


@pytest.fixture
def cluster(http: KubeHttp) -> Iterator[KubeHttp]:
    """One GPU node with one shareable GPU in a slice (100 core, 80Gi), the driver's DeviceClass and
    a running scheduler with `dynamicresources`."""
    http.post("/api/v1/nodes", gpu_node("n1", 1))
    http.post(
        f"{RES}/deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": DRIVER},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
    )
    device = {
        "name": "gpu-0",
        "allowMultipleAllocations": True,
        "attributes": {"uuid": {"string": "GPU-n1-0"}},
        "capacity": {"core": {"value": "100"}, "memory": {"value": "80Gi"}},
    }
    http.post(
        f"{RES}/resourceslices",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": "n1-gpu"},
            "spec": {
                "driver": DRIVER,
                "nodeName": "n1",
                "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                "devices": [device],
            },
        },
    )
    scheduler = start(http)
    try:
        yield http
    finally:
        scheduler.stop()


def start(http: KubeHttp, conf: str = CONF) -> Scheduler:
    config = SchedulerConfig(
        kube=http, conf=parse_conf(conf), protocol=P, keys=AssignmentKeys(required=False), period=0.02
    )
    scheduler = build_scheduler(config).start()
    assert scheduler.synced(10)
    return scheduler


def share_claim(name: str, core: str, klass: str = DRIVER) -> dict[str, Any]:
    request = {
        "name": "gpu",
        "exactly": {"deviceClassName": klass, "capacity": {"requests": {"core": core, "memory": "20Gi"}}},
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [request]}},
    }


def claim_pod(
    name: str, claim: str | None = None, template: str | None = None, group: str = "", cpu: str = "1"
) -> dict[str, Any]:
    entry: dict[str, str] = {"name": "gpu"}
    if claim:
        entry["resourceClaimName"] = claim
    if template:
        entry["resourceClaimTemplateName"] = template
    annotations = {"scheduling.k8s.io/group-name": group} if group else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {
            "schedulerName": P.scheduler_name,
            "resourceClaims": [entry] if claim or template else [],
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": cpu} if cpu else {}, "claims": [{"name": "gpu"}]},
                }
            ],
        },
    }


def pod(http: KubeHttp, name: str) -> dict[str, Any]:
    return http.get(f"{PODS}/{name}")


def node_of(http: KubeHttp, name: str) -> str:
    return str(pod(http, name)["spec"].get("nodeName") or "")


def scheduled_message(http: KubeHttp, name: str) -> str:
    for condition in pod(http, name).get("status", {}).get("conditions") or []:
        if condition["type"] == "PodScheduled" and condition["status"] == "False":
            return str(condition.get("message", ""))
    return ""


def claim(http: KubeHttp, name: str) -> dict[str, Any]:
    return http.get(f"{CLAIMS}/{name}")


def test_a_share_from_a_template_waits_for_its_claim_then_binds_with_allocation_and_reserved_for(
    cluster: KubeHttp,
) -> None:
    http = cluster
    http.post(PODS, claim_pod("p", template="share-30"))
    wait_for(lambda: "waiting for resource claim" in scheduled_message(http, "p"), what="the pod waits for its claim")
    # what the claim controller does: the claim, then the pod's status naming it
    http.post(CLAIMS, share_claim("p-gpu-abcde", "30"))
    status = pod(http, "p")
    status["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "p-gpu-abcde"}]
    http.put(f"{PODS}/p/status", status)
    wait_for(lambda: node_of(http, "p") == "n1", what="the pod bound once its claim exists")
    made = claim(http, "p-gpu-abcde")
    (result,) = made["status"]["allocation"]["devices"]["results"]
    assert (result["driver"], result["pool"], result["device"]) == (DRIVER, "n1", "gpu-0")
    assert result["consumedCapacity"] == {"core": "30", "memory": "20Gi"}
    assert made["status"]["reservedFor"] == [
        {"resource": "pods", "name": "p", "uid": pod(http, "p")["metadata"]["uid"]}
    ]


def test_shares_are_counted_across_pods_and_a_bad_claim_waits_while_others_schedule(cluster: KubeHttp) -> None:
    http = cluster
    for i in range(4):  # 4 x 30 core on a 100 core GPU: three fit
        http.post(CLAIMS, share_claim(f"c{i}", "30"))
    http.post(CLAIMS, share_claim("unknown", "10", klass="no-such-class"))
    http.post(CLAIMS, share_claim("huge", "200"))
    for i in range(4):
        http.post(PODS, claim_pod(f"s{i}", claim=f"c{i}"))
    http.post(PODS, claim_pod("bad-class", claim="unknown"))
    http.post(PODS, claim_pod("too-big", claim="huge"))
    http.post(PODS, claim_pod("no-claim", claim="missing"))
    http.post(PODS, claim_pod("plain"))  # no claims at all
    wait_for(lambda: node_of(http, "plain") == "n1", what="a pod without claims schedules")
    wait_for(lambda: sum(bool(node_of(http, f"s{i}")) for i in range(4)) == 3, what="three shares bound")
    wait_for(lambda: "no-such-class" in scheduled_message(http, "bad-class"), what="the unknown class reported")
    wait_for(lambda: "cannot allocate all claims" in scheduled_message(http, "too-big"), what="too big reported")
    wait_for(lambda: 'resourceclaim "missing" not found' in scheduled_message(http, "no-claim"), what="missing")
    time.sleep(0.5)
    assert sum(bool(node_of(http, f"s{i}")) for i in range(4)) == 3  # the GPU is never over-granted
    used = sorted(
        claim(http, f"c{i}")["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"]["core"]
        for i in range(4)
        if node_of(http, f"s{i}")
    )
    assert used == ["30", "30", "30"]
    assert not claim(http, "huge").get("status", {}).get("allocation")


@pytest.mark.parametrize("cpu", ["1", ""], ids=["with-a-cpu-request", "claims-only"])
def test_a_gang_of_claim_users_places_whole_or_waits(cluster: KubeHttp, cpu: str) -> None:
    """A pod asking only through claims is not best-effort: backfill (no gang checks) must not take it."""
    http = cluster
    groups = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups"
    for group, size in (("big", 3), ("small", 2)):
        http.post(
            groups,
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": group, "namespace": "default"},
                "spec": {"minMember": size},
            },
        )
        for i in range(size):  # 40 core each: two fit the GPU, three do not
            http.post(CLAIMS, share_claim(f"{group}-{i}", "40"))
            http.post(PODS, claim_pod(f"{group}-{i}", claim=f"{group}-{i}", group=group, cpu=cpu))
    wait_for(lambda: all(node_of(http, f"small-{i}") == "n1" for i in range(2)), what="the small gang bound whole")
    time.sleep(0.5)
    assert [node_of(http, f"big-{i}") for i in range(3)] == ["", "", ""]
    assert all(not claim(http, f"big-{i}").get("status", {}).get("allocation") for i in range(3))


def test_device_plugin_shares_count_against_dra_shares_of_the_same_gpu(http: KubeHttp) -> None:
    """The shared ledger, DRA side: share pods of the device plugin hold 70 % of the GPU whose UUID
    the DRA device carries, so a claim for 40 % does not fit on it, and one for 30 % does."""
    http.post("/api/v1/nodes", gpu_node("n1", 1))
    gpu = NodeInventory.simulated("n1", "H200", 1).gpus[0]
    http.post(f"{RES}/deviceclasses", {"metadata": {"name": DRIVER}, "spec": {}})
    device = {
        "name": "gpu-0",
        "allowMultipleAllocations": True,
        "attributes": {"uuid": {"string": gpu.uuid}},
        "capacity": {"core": {"value": "100"}, "memory": {"value": f"{gpu.memory_mib}Mi"}},
    }
    spec = {"driver": DRIVER, "nodeName": "n1", "pool": {"name": "n1", "generation": 1}, "devices": [device]}
    http.post(f"{RES}/resourceslices", {"metadata": {"name": "n1-gpu"}, "spec": spec})
    scheduler = start(http)
    try:
        for name, core in (("dp-40", "40"), ("dp-30", "30")):
            share = claim_pod(name)
            share["spec"]["containers"][0]["resources"] = {"limits": {P.resources.core: core}}
            http.post(PODS, share)
        wait_for(lambda: node_of(http, "dp-40") == node_of(http, "dp-30") == "n1", what="device-plugin shares bound")
        http.post(CLAIMS, share_claim("c40", "40"))
        http.post(CLAIMS, share_claim("c30", "30"))
        http.post(PODS, claim_pod("dra-40", claim="c40"))
        wait_for(lambda: "cannot allocate all claims" in scheduled_message(http, "dra-40"), what="40 % refused")
        http.post(PODS, claim_pod("dra-30", claim="c30"))
        wait_for(lambda: node_of(http, "dra-30") == "n1", what="30 % bound")
        (result,) = claim(http, "c30")["status"]["allocation"]["devices"]["results"]
        assert result["consumedCapacity"]["core"] == "30"
        assert not node_of(http, "dra-40")
        assert not claim(http, "c40").get("status", {}).get("allocation")
    finally:
        scheduler.stop()


def test_volcanos_dra_switch_allocates_claims(http: KubeHttp) -> None:
    """Volcano's guide conf turns DRA on with `predicate.DynamicResourceAllocationEnable: true` and
    names no dynamicresources plugin: a pod's claim of another driver's device is allocated all the
    same, and a second pod for the same (exclusive) device waits."""
    other = "gpu.example.com"
    http.post("/api/v1/nodes", gpu_node("n1", 1))
    selector = {"cel": {"expression": f'device.driver == "{other}"'}}
    http.post(f"{RES}/deviceclasses", {"metadata": {"name": other}, "spec": {"selectors": [selector]}})
    spec = {"driver": other, "nodeName": "n1", "pool": {"name": "n1", "generation": 1}, "devices": [{"name": "gpu-0"}]}
    http.post(f"{RES}/resourceslices", {"metadata": {"name": "n1-example"}, "spec": spec})
    conf = (Path(__file__).parent / "volcano_confs" / "guide-dra.conf").read_text()
    scheduler = start(http, conf)
    try:
        for name in ("a", "b"):
            body = {
                "metadata": {"name": name},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": other}}]}},
            }
            http.post(CLAIMS, body)
        http.post(PODS, claim_pod("first", claim="a"))
        wait_for(lambda: node_of(http, "first") == "n1", what="the pod bound")
        (result,) = claim(http, "a")["status"]["allocation"]["devices"]["results"]
        assert (result["driver"], result["device"]) == (other, "gpu-0")
        http.post(PODS, claim_pod("second", claim="b"))
        wait_for(lambda: "cannot allocate all claims" in scheduled_message(http, "second"), what="the second waits")
    finally:
        scheduler.stop()

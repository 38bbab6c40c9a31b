"""DRA claims of the kit's GPU class placed by the kit's policies and booked in the shared ledger,
against the embedded API server and a running scheduler: a claim's share keeps device-plugin shares
off its GPU until it is deallocated (and is not counted twice on the DRA side); gpushare's policy
chooses the GPU a claim gets; a share naming only `core` takes memory in proportion, as the device
plugin's rule has it; a queue's capability limits claim-using pods as it does device-plugin pods; a
template's claim deleted with its pod before the next session gives its GPU back (docs/user-guide/dra.md)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from fixtures.waiting import wait_for
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.cluster.controllers.manager import ControllerManager
from runtimekit.cluster.controllers.resourceclaims import ResourceClaimController
from runtimekit.kube.http import KubeHttp
from runtimekit.model.gpu import NodeInventory
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.build import AssignmentKeys, SchedulerConfig, build_scheduler
from runtimekit.scheduler.framework import parse_conf
from runtimekit.scheduler.framework.conf import DEFAULT_CONF_TEXT
from scheduler.helpers import gpu_node

P = KitProtocol.default()
PODS = "/api/v1/namespaces/default/pods"
RES = "/apis/resource.k8s.io/v1"
CLAIMS = f"{RES}/namespaces/default/resourceclaims"
DRIVER = "gpu.runtimekit.aliyun.com"
CLAIM = [{"name": "gpu"}]
CPU = {"cpu": "1"}
GPUS = NodeInventory.simulated("n1", "H200", 2).gpus  # what gpu_node("n1", 2) publishes


def start_cluster(http: KubeHttp, gpus: int) -> Any:
    """Node n1 with `gpus` GPUs, published both to the device plugin's ledger and as DRA devices of
    the same UUIDs, the kit's DeviceClass and a running scheduler."""
    http.post("/api/v1/nodes", gpu_node("n1", gpus))
    selector = {"cel": {"expression": f'device.driver == "{DRIVER}"'}}
    http.post(f"{RES}/deviceclasses", {"metadata": {"name": DRIVER}, "spec": {"selectors": [selector]}})
    devices = [
        {
            "name": f"gpu-{gpu.index}",
            "allowMultipleAllocations": True,
            "attributes": {"type": {"string": "gpu"}, "uuid": {"string": gpu.uuid}},
            "capacity": {"core": {"value": "100"}, "memory": {"value": f"{gpu.memory_mib}Mi"}},
        }
        for gpu in GPUS[:gpus]
    ]
    spec = {"driver": DRIVER, "nodeName": "n1", "pool": {"name": "n1", "generation": 1}, "devices": devices}
    http.post(f"{RES}/resourceslices", {"metadata": {"name": "n1-gpus"}, "spec": spec})
    config = SchedulerConfig(
        kube=http, conf=parse_conf(DEFAULT_CONF_TEXT), protocol=P, keys=AssignmentKeys(required=False), period=0.02
    )
    scheduler = build_scheduler(config).start()
    assert scheduler.synced(10)
    return scheduler


@pytest.fixture
def http(apiserver: ApiServer) -> Iterator[KubeHttp]:
    client = KubeHttp.connect(server=apiserver.url)
    yield client
    client.close()


def share_claim(name: str, requests: dict[str, str]) -> dict[str, Any]:
    request = {"name": "gpu", "exactly": {"deviceClassName": DRIVER, "capacity": {"requests": requests}}}
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"devices": {"requests": [request]}}}


def claim_pod(name: str, claim: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
        "spec": {
            "schedulerName": P.scheduler_name,
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
            "containers": [{"name": "main", "image": "busybox", "resources": {"requests": CPU, "claims": CLAIM}}],
        },
    }


def share_pod(name: str, core: int, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A device-plugin share pod (its memory in proportion to its compute)."""
    limits = {P.resources.core: str(core)}
    return {
        "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
        "spec": {
            "schedulerName": P.scheduler_name,
            "containers": [{"name": "main", "image": "busybox", "resources": {"requests": CPU, "limits": limits}}],
        },
    }


def node_of(http: KubeHttp, name: str) -> str:
    return str(http.get(f"{PODS}/{name}")["spec"].get("nodeName") or "")


def result_of(http: KubeHttp, claim: str) -> dict[str, Any]:
    (result,) = http.get(f"{CLAIMS}/{claim}")["status"]["allocation"]["devices"]["results"]
    return dict(result)


def settle() -> None:
    time.sleep(0.6)  # scheduling sessions every 0.02 s: a pod that could bind would have


def test_a_claims_share_keeps_device_plugin_shares_off_its_gpu_until_deallocated(http: KubeHttp) -> None:
    scheduler = start_cluster(http, 1)
    try:
        http.post(CLAIMS, share_claim("a", {"core": "60", "memory": "10Gi"}))
        http.post(PODS, claim_pod("a", "a"))
        wait_for(lambda: node_of(http, "a") == "n1", what="the 60 % claim bound")
        # a second claim of 10 %: the first claim is counted once on the DRA side (60 + 10 fit)
        http.post(CLAIMS, share_claim("b", {"core": "10", "memory": "10Gi"}))
        http.post(PODS, claim_pod("b", "b"))
        wait_for(lambda: node_of(http, "b") == "n1", what="the 10 % claim bound beside it")
        http.post(PODS, share_pod("forty", 40))
        http.post(PODS, share_pod("thirty", 30))
        wait_for(lambda: node_of(http, "thirty") == "n1", what="a 30 % share pod bound")
        settle()
        assert node_of(http, "forty") == ""  # 70 % held by claims: 40 % does not fit the GPU
        claim = http.get(f"{CLAIMS}/a")
        claim["status"] = {}  # deallocated (what the claim controller does when its pod is gone)
        http.put(f"{CLAIMS}/a/status", claim)
        wait_for(lambda: node_of(http, "forty") == "n1", what="the 40 % share pod bound once the claim is freed")
    finally:
        scheduler.stop()


def test_gpushare_policy_chooses_the_gpu_a_claim_gets(http: KubeHttp) -> None:
    scheduler = start_cluster(http, 2)
    try:
        http.post(PODS, share_pod("blocker", 100))
        wait_for(lambda: node_of(http, "blocker") == "n1", what="a pod holding all of one GPU")
        http.post(PODS, share_pod("held", 60))
        wait_for(lambda: node_of(http, "held") == "n1", what="a share pod on the other GPU")
        http.delete(f"{PODS}/blocker", {"gracePeriodSeconds": 0})
        assignment = http.get(f"{PODS}/held")["metadata"]["annotations"][P.annotations.assignment]
        (held_gpu,) = [gpu for gpu in GPUS if gpu.uuid in assignment]
        assert held_gpu.index == 1
        http.post(PODS, share_pod("small", 20, {P.annotations.policy: "spread"}))  # onto the emptier GPU 0
        wait_for(lambda: node_of(http, "small") == "n1", what="a share pod on GPU 0")
        # both GPUs are shared now: the packing rule of the DRA side alone (shared devices first, then pool
        # order) would take GPU 0; binpack takes the fuller GPU 1
        http.post(CLAIMS, share_claim("c", {"core": "30", "memory": "10Gi"}))
        http.post(PODS, claim_pod("c", "c", {P.annotations.policy: "binpack"}))
        wait_for(lambda: node_of(http, "c") == "n1", what="the claim pod bound")
        assert result_of(http, "c")["device"] == "gpu-1"  # packed beside the share pod, not on the first free GPU
        assert not (http.get(f"{PODS}/c")["metadata"].get("annotations") or {}).get(P.annotations.assignment)
    finally:
        scheduler.stop()


def test_a_share_naming_only_core_takes_memory_in_proportion(http: KubeHttp) -> None:
    scheduler = start_cluster(http, 1)
    try:
        http.post(CLAIMS, share_claim("c", {"core": "25"}))
        http.post(PODS, claim_pod("c", "c"))
        wait_for(lambda: node_of(http, "c") == "n1", what="the claim pod bound")
        assert result_of(http, "c")["consumedCapacity"] == {"core": "25", "memory": f"{GPUS[0].memory_mib // 4}Mi"}
        http.post(PODS, share_pod("beside", 70))  # fits beside it: the claim did not take all the memory
        wait_for(lambda: node_of(http, "beside") == "n1", what="a 70 % share pod bound beside it")
    finally:
        scheduler.stop()


def test_a_queues_capability_limits_claim_pods_as_device_plugin_pods(http: KubeHttp) -> None:
    """Capability 50 % of a GPU: a claim pod of 40 % is let in, then neither a claim pod nor a
    device-plugin pod of 20 % is (60 % > 50 %), and a device-plugin pod of 10 % is: the claim counts
    in its queue as a device-plugin share does (before, a claim counted nothing in its queue)."""
    http.post(
        "/apis/scheduling.volcano.sh/v1beta1/queues",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "q"},
            "spec": {"weight": 1, "capability": {"cpu": "8", P.resources.core: "50"}},
        },
    )
    scheduler = start_cluster(http, 2)
    try:
        queue = {"scheduling.volcano.sh/queue-name": "q"}
        http.post(CLAIMS, share_claim("c1", {"core": "40", "memory": "10Gi"}))
        http.post(PODS, claim_pod("c1", "c1", queue))
        wait_for(lambda: node_of(http, "c1") == "n1", what="the first claim pod bound")
        settle()  # its bind is finished: the queue holds it
        http.post(CLAIMS, share_claim("c2", {"core": "20", "memory": "10Gi"}))
        http.post(PODS, claim_pod("c2", "c2", queue))
        http.post(PODS, share_pod("s1", 20, queue))
        settle()
        assert (node_of(http, "c2"), node_of(http, "s1")) == ("", "")
        http.post(PODS, share_pod("s2", 10, queue))
        wait_for(lambda: node_of(http, "s2") == "n1", what="a 10 % share pod bound (40 + 10 within 50)")
    finally:
        scheduler.stop()


def test_a_gang_of_kit_claims_that_cannot_fit_gives_everything_back(http: KubeHttp) -> None:
    """A gang of three 80 % claims on two GPUs waits whole; once it is gone a gang of two binds, one per GPU."""
    groups = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups"
    group = "scheduling.k8s.io/group-name"
    scheduler = start_cluster(http, 2)
    try:
        for name, size in (("three", 3), ("two", 2)):
            http.post(groups, {"metadata": {"name": name, "namespace": "default"}, "spec": {"minMember": size}})
        for i in range(3):
            http.post(CLAIMS, share_claim(f"three-{i}", {"core": "80", "memory": "10Gi"}))
            http.post(PODS, claim_pod(f"three-{i}", f"three-{i}", {group: "three"}))
        settle()
        assert [node_of(http, f"three-{i}") for i in range(3)] == ["", "", ""]
        for i in range(3):
            http.delete(f"{PODS}/three-{i}", {"gracePeriodSeconds": 0})
        for i in range(2):
            http.post(CLAIMS, share_claim(f"two-{i}", {"core": "80", "memory": "10Gi"}))
            http.post(PODS, claim_pod(f"two-{i}", f"two-{i}", {group: "two"}))
        wait_for(lambda: all(node_of(http, f"two-{i}") == "n1" for i in range(2)), what="the gang of two bound")
        assert {result_of(http, f"two-{i}")["device"] for i in range(2)} == {"gpu-0", "gpu-1"}
    finally:
        scheduler.stop()


def test_a_claim_from_a_template_gives_its_gpu_back_when_its_pod_goes_before_the_next_session(
    apiserver: ApiServer, http: KubeHttp
) -> None:
    """The claim controller makes the claims and deletes them with their pods: a 25 % pod bound and
    deleted while no session opens (sessions open when there is work) leaves its GPU whole for an 80 %
    one (the allocation PreBind wrote stops counting once the claim is gone)."""
    templates = f"{RES}/namespaces/default/resourceclaimtemplates"
    scheduler = start_cluster(http, 1)
    manager = ControllerManager(KubeHttp.connect(server=apiserver.url), [ResourceClaimController]).start()
    try:
        for name, core in (("quarter", "25"), ("most", "80")):
            spec = share_claim(name, {"core": core, "memory": "10Gi"})["spec"]
            http.post(templates, {"metadata": {"name": name, "namespace": "default"}, "spec": {"spec": spec}})
        http.post(PODS, template_pod("q", "quarter"))
        wait_for(lambda: node_of(http, "q") == "n1", what="the 25 % pod bound")
        http.delete(f"{PODS}/q", {"gracePeriodSeconds": 0})
        wait_for(lambda: not http.get(CLAIMS)["items"], what="its claim deleted by the controller")
        http.post(PODS, template_pod("m", "most"))
        wait_for(lambda: node_of(http, "m") == "n1", what="the 80 % pod bound on the GPU the 25 % one left")
    finally:
        manager.stop()
        scheduler.stop()


def template_pod(name: str, template: str) -> dict[str, Any]:
    pod = claim_pod(name, "")
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
    return pod

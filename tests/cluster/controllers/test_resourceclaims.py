"""The ResourceClaim controller against the embedded API server, as kube's resourceclaim controller
behaves (pkg/controller/resourceclaim/controller_test.go's cases): a claim per template entry named
`<pod>-<entry>-<random>`, owned by the pod, annotated with the entry, named in the pod's
`status.resourceClaimStatuses`; a missing template is a Warning on the pod until it appears;
reservations of pods that are gone or finished are dropped, and with them the allocation; claims made
for a finished pod are deleted."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from fixtures.waiting import wait_for
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.cluster.controllers.manager import ControllerManager, default_controllers
from runtimekit.cluster.controllers.resourceclaims import ResourceClaimController, generate_name
from runtimekit.kube.http import KubeHttp
from runtimekit.kube.informers import Informers

NS = "default"
CLAIMS = f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims"
TEMPLATES = f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaimtemplates"
PODS = f"/api/v1/namespaces/{NS}/pods"
SPEC = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}


@dataclass
class Cluster:
    http: KubeHttp

    def template(self, name: str) -> None:
        body = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name},
            "spec": {"metadata": {"labels": {"team": "ml"}}, "spec": SPEC},
        }
        self.http.post(TEMPLATES, body)

    def pod(self, name: str, **claims: str) -> dict[str, Any]:
        entries = [{"name": entry, "resourceClaimTemplateName": template} for entry, template in claims.items()]
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "x"}], "resourceClaims": entries},
        }
        made: dict[str, Any] = self.http.post(PODS, body)
        return made

    def claims(self) -> list[dict[str, Any]]:
        return self.http.list(CLAIMS)[0]

    def claim_statuses(self, pod: str) -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = (self.http.get(f"{PODS}/{pod}").get("status") or {}).get(
            "resourceClaimStatuses"
        ) or []
        return got


@pytest.fixture
def cluster(apiserver: ApiServer) -> Iterator[Cluster]:
    manager = ControllerManager(KubeHttp.connect(server=apiserver.url), [ResourceClaimController]).start()
    assert manager.synced(20)
    http = KubeHttp.connect(server=apiserver.url)
    yield Cluster(http)
    manager.stop()
    http.close()


def test_generate_name_cuts_both_parts_in_proportion() -> None:
    assert generate_name("web-0", "gpu") == "web-0-gpu-"
    long_pod, long_claim = "p" * 60, "c" * 30
    cut = generate_name(long_pod, long_claim)
    assert cut == "p" * (60 * 57 // 92) + "-" + "c" * (30 * 57 // 92)
    assert len(cut) <= 57


def test_a_claim_per_template_entry_owned_by_the_pod(cluster: Cluster) -> None:
    cluster.template("one-gpu")
    pod = cluster.pod("trainer", gpu="one-gpu")
    [status] = wait_for(lambda: cluster.claim_statuses("trainer"), what="the pod's claim status")
    [claim] = cluster.claims()
    assert status == {"name": "gpu", "resourceClaimName": claim["metadata"]["name"]}
    assert re.fullmatch(r"trainer-gpu-[a-z0-9]{5}", claim["metadata"]["name"])
    assert claim["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] == "gpu"
    assert claim["metadata"]["labels"] == {"team": "ml"}
    [owner] = claim["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("Pod", pod["metadata"]["uid"], True)
    assert claim["spec"] == SPEC


def test_a_missing_template_is_a_warning_until_it_appears(cluster: Cluster) -> None:
    cluster.pod("waiting", gpu="later")

    def reasons() -> list[str]:
        events = cluster.http.list(f"/api/v1/namespaces/{NS}/events", {"fieldSelector": "involvedObject.name=waiting"})[
            0
        ]
        return [e["reason"] for e in events]

    assert "FailedResourceClaimCreation" in wait_for(reasons, what="the warning")
    assert cluster.claims() == []
    cluster.template("later")
    wait_for(lambda: cluster.claim_statuses("waiting"), what="the claim once the template exists")


def test_reservations_of_gone_pods_are_dropped_with_the_allocation(cluster: Cluster) -> None:
    cluster.template("one-gpu")
    pod = cluster.pod("job", gpu="one-gpu")
    [status] = wait_for(lambda: cluster.claim_statuses("job"), what="the claim")
    name = status["resourceClaimName"]
    allocation = {
        "devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"}]}
    }
    claim = cluster.http.get(f"{CLAIMS}/{name}")
    claim["status"] = {
        "allocation": allocation,
        "reservedFor": [{"resource": "pods", "name": "job", "uid": pod["metadata"]["uid"]}],
    }
    cluster.http.put(f"{CLAIMS}/{name}/status", claim)
    # the pod finishes: its reservation goes, then the allocation, then the claim made for it
    cluster.http.patch(f"{PODS}/job/status", {"status": {"phase": "Succeeded"}}, "merge")

    def gone() -> bool:
        return not any(c["metadata"]["name"] == name for c in cluster.claims())

    wait_for(gone, what="the finished pod's claim deleted")


def test_a_claim_shared_by_pods_keeps_its_allocation_while_one_is_left(cluster: Cluster) -> None:
    shared = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "shared"}, "spec": SPEC}
    cluster.http.post(CLAIMS, shared)
    uids = [cluster.pod(name)["metadata"]["uid"] for name in ("a", "b")]
    claim = cluster.http.get(f"{CLAIMS}/shared")
    claim["status"] = {
        "allocation": {"devices": {"results": []}},
        "reservedFor": [{"resource": "pods", "name": n, "uid": u} for n, u in zip(("a", "b"), uids, strict=True)],
    }
    cluster.http.put(f"{CLAIMS}/shared/status", claim)
    cluster.http.delete(f"{PODS}/a")

    def reserved() -> list[str] | None:
        status = cluster.http.get(f"{CLAIMS}/shared").get("status") or {}
        names = [r["name"] for r in status.get("reservedFor") or []]
        return names if names == ["b"] and "allocation" in status else None

    wait_for(reserved, what="only b reserved, still allocated")
    cluster.http.delete(f"{PODS}/b")
    wait_for(
        lambda: not cluster.http.get(f"{CLAIMS}/shared").get("status"), what="deallocated once no consumer is left"
    )
    assert cluster.http.get(f"{CLAIMS}/shared")["metadata"]["name"] == "shared"  # not made for a pod: kept


def test_runtimekit_ups_controller_manager_makes_claims(apiserver: ApiServer) -> None:
    manager = ControllerManager(KubeHttp.connect(server=apiserver.url), default_controllers("volcano")).start()
    http = KubeHttp.connect(server=apiserver.url)
    try:
        assert manager.synced(20)
        cluster = Cluster(http)
        cluster.template("one-gpu")
        cluster.pod("p", gpu="one-gpu")
        wait_for(lambda: cluster.claim_statuses("p"), what="the claim made by the default controllers")
    finally:
        manager.stop()
        http.close()


@pytest.mark.parametrize("pod_exists", [True, False])
def test_a_reserving_pod_the_informer_has_not_seen_is_looked_up(apiserver: ApiServer, pod_exists: bool) -> None:
    """A pod made just now may be reserved for and bound before the controller's pod informer hears
    of it: its reservation (and the allocation) stays when the API server has the pod, as kube's
    controller checks there before dropping one, and goes when the pod is not there either."""
    http = KubeHttp.connect(server=apiserver.url)
    cluster = Cluster(http)
    pod = cluster.pod("fresh")
    if not pod_exists:
        http.delete(f"{PODS}/fresh")
    claim = http.post(
        CLAIMS, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"}, "spec": SPEC}
    )
    claim["status"] = {
        "allocation": {"devices": {"results": []}},
        "reservedFor": [{"resource": "pods", "name": "fresh", "uid": pod["metadata"]["uid"]}],
    }
    claim = http.put(f"{CLAIMS}/c/status", claim)
    controller = ResourceClaimController(http, Informers(http))  # not started: its caches saw nothing
    controller.claims.written(claim)
    controller.sync(f"claim:{NS}/c")
    status = http.get(f"{CLAIMS}/c").get("status") or {}
    if pod_exists:
        assert [r["name"] for r in status["reservedFor"]] == ["fresh"]
        assert "allocation" in status
    else:
        assert status == {}
    http.close()


def test_an_allocated_claim_never_reserved_keeps_its_allocation(cluster: Cluster) -> None:
    """kube's controller drops an allocation only when the last reservation goes: a claim allocated
    ahead of any pod (a driver's, an admin's, scheduler_perf's allocResourceClaims) stays allocated."""
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "ahead"}, "spec": SPEC}
    claim = cluster.http.post(CLAIMS, body)
    results = [{"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"}]
    claim["status"] = {"allocation": {"devices": {"results": results}}}
    cluster.http.put(f"{CLAIMS}/ahead/status", claim)
    cluster.pod("marker")  # an event after the claim's: the controller has seen the claim once it sees this
    wait_for(lambda: cluster.http.get(f"{PODS}/marker"), what="the marker pod")
    time.sleep(0.5)
    assert cluster.http.get(f"{CLAIMS}/ahead")["status"]["allocation"]["devices"]["results"] == results

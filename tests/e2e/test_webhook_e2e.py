"""End to end: `runtimekit up` runs the kit's admission webhook, and the real kubectl sees it. A pod with
a request no node could satisfy is refused at `kubectl apply`, naming the field; a share pod that names
no scheduler gets the kit's and runs; a pod written with its own assignment annotation is refused;
under `--protocol hami` a pod asking for GPU memory alone gets HAMi's `nvidia.com/gpu: 1` and runs."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from fixtures.kubeup import UpCluster, runtimekit_up
from runtimekit.protocol import KitProtocol
from runtimekit.protocol.presets import preset_protocol

pytestmark = pytest.mark.e2e

P = KitProtocol.default()
HAMI = preset_protocol("hami")
DENIED = 'admission webhook "validate.runtimekit.aliyun.com" denied the request'


def pod(name: str, limits: dict[str, str], annotations: dict[str, str] | None = None) -> str:
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36", "resources": {"limits": limits}}]},
    }
    return json.dumps(manifest)


@pytest.fixture(scope="module")
def cluster() -> Iterator[UpCluster]:
    with runtimekit_up(["--nodes", "2", "--gpus-per-node", "2"], P, webhook=True) as up:
        yield up


def test_an_impossible_request_is_refused_at_apply_naming_the_field(cluster: UpCluster) -> None:
    done = cluster.kubectl("apply", "-f", "-", stdin=pod("greedy", {P.resources.core: "150"}), check=False)
    assert done.returncode != 0
    assert DENIED in done.stderr
    assert f"spec.containers[0].resources.limits[{P.resources.core}]: Invalid value" in done.stderr
    assert "Error from server (Forbidden)" in done.stderr
    too_big = pod("huge", {P.resources.core: "10", P.resources.memory: "1000"})  # GiB: no H200 holds it
    done = cluster.kubectl("apply", "-f", "-", stdin=too_big, check=False)
    assert f"spec.containers[0].resources.limits[{P.resources.memory}]" in done.stderr
    assert cluster.kubectl("get", "pods", "-o", "name").stdout.strip() == ""


def test_a_share_pod_without_a_scheduler_gets_the_kits_and_runs(cluster: UpCluster) -> None:
    cluster.kubectl("apply", "-f", "-", stdin=pod("share", {P.resources.core: "30", P.resources.memory: "8"}))
    (running,) = cluster.running("share")
    assert running["spec"]["schedulerName"] == P.scheduler_name
    [share] = cluster.shares(running)["main"]
    assert share["coreMilli"] == 300
    cluster.kubectl("delete", "pod", "share", "--wait=true")


def test_a_pod_with_its_own_assignment_is_refused(cluster: UpCluster) -> None:
    forged = pod("forged", {P.resources.core: "1"}, {P.annotations.assignment: '{"containers": {}}'})
    done = cluster.kubectl("apply", "-f", "-", stdin=forged, check=False)
    assert done.returncode != 0
    assert "Error from server (Forbidden)" in done.stderr
    assert (
        f"metadata.annotations[{P.annotations.assignment}]: Forbidden: only the kit's scheduler writes it"
        in done.stderr
    )
    assert "kubernetes-admin" in done.stderr


def test_the_webhook_is_registered_and_served_dry_runs_included(cluster: UpCluster) -> None:
    names = cluster.kubectl("get", "mutatingwebhookconfigurations,validatingwebhookconfigurations", "-o", "name").stdout
    assert "lj-runtimekit-webhook" in names
    done = cluster.kubectl(
        "create", "--dry-run=server", "-f", "-", "-o", "json", stdin=pod("dry", {P.resources.gpu: "1"})
    )
    assert json.loads(done.stdout)["spec"]["schedulerName"] == P.scheduler_name


def test_hami_memory_alone_gets_one_gpu_and_runs() -> None:
    with runtimekit_up(["--protocol", "hami", "--nodes", "1", "--gpus-per-node", "2"], HAMI, webhook=True) as up:
        up.kubectl("apply", "-f", "-", stdin=pod("mem", {"nvidia.com/gpumem": "3000"}))
        (running,) = up.running("mem")
        assert running["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
        [share] = up.shares(running)["main"]
        assert share["memoryMiB"] == 3000

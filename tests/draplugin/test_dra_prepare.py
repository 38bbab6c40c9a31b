"""NodePrepareResources / NodeUnprepareResources over real gRPC on unix sockets, called as kubelet calls
them after its plugin watcher registered the driver: the runtime's allocation, CDI specs, idempotence."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from dra_helpers import DRIVER, NODE, DraStack, claim

from runtimekit.api import kubelet_dra
from runtimekit.api.runtime_client import Share
from runtimekit.cluster.kubelet.draplugins import ClaimKey, DraPluginClient, cdi_ids_for
from runtimekit.draplugin.service import ClaimRef
from runtimekit.kube.objects.dra import ResourceClaim
from runtimekit.model import simulated_uuid

H200_MIB = 143771
Factory = Callable[..., DraStack]


def plugin(stack: DraStack) -> DraPluginClient:
    watcher = stack.watcher or stack.serve()
    return watcher.plugins[DRIVER]


def key(name: str, uid: str, namespace: str = "default") -> ClaimKey:
    return ClaimKey(namespace, uid, name)


def test_kubelet_registers_the_driver_with_the_newest_service_it_speaks(dra_stack: Factory) -> None:
    stack = dra_stack()
    watcher = stack.serve()
    assert list(watcher.plugins) == [DRIVER]
    assert watcher.plugins[DRIVER].service == kubelet_dra.V1_SERVICE
    assert watcher.plugins[DRIVER].endpoint == str(stack.dir / "plugins" / DRIVER / "dra.sock")
    assert stack.server is not None
    assert stack.server.registration.status is not None
    assert stack.server.registration.status.plugin_registered


def test_a_1_33_kubelet_uses_v1beta1(dra_stack: Factory) -> None:
    stack = dra_stack()
    watcher = stack.serve(services=(kubelet_dra.V1BETA1_SERVICE,))
    assert watcher.plugins[DRIVER].service == kubelet_dra.V1BETA1_SERVICE
    stack.claims.add(claim("c1", "uid-1", [{"request": "gpu", "device": "gpu-0"}]))
    answer = plugin(stack).prepare([key("c1", "uid-1")])
    assert answer["uid-1"].error == ""
    assert [d.device for d in answer["uid-1"].devices] == ["gpu-0"]
    assert plugin(stack).unprepare([key("c1", "uid-1")]) == {"uid-1": ""}


def test_a_kubelet_that_speaks_no_listed_version_refuses_it(dra_stack: Factory) -> None:
    stack = dra_stack()
    watcher = stack.serve(services=("v1alpha4.Node",))
    assert watcher.plugins == {}
    assert stack.server is not None
    assert stack.server.registration.status is not None
    assert not stack.server.registration.status.plugin_registered
    assert "none of the versions supported by the plugin" in stack.server.registration.status.error


def test_whole_gpu_claim_gets_the_runtime_environment_and_a_cdi_spec(dra_stack: Factory) -> None:
    stack = dra_stack()
    stack.claims.add(claim("single-gpu", "uid-1", [{"request": "gpu", "device": "gpu-1"}]))
    answer = plugin(stack).prepare([key("single-gpu", "uid-1")])["uid-1"]
    assert answer.error == ""
    (device,) = answer.devices
    assert (device.request_names, device.pool, device.device) == (("gpu",), NODE, "gpu-1")
    assert device.cdi_ids[0] == f"{DRIVER}/claim=uid-1-gpu"
    spec = json.loads((stack.cdi_dir / f"{DRIVER}-claim_uid-1.json").read_text())
    assert spec["kind"] == f"{DRIVER}/claim"
    assert spec["cdiVersion"] == "0.6.0"
    (cdi_device,) = spec["devices"]
    assert cdi_device["name"] == "uid-1-gpu"
    env = dict(e.split("=", 1) for e in cdi_device["containerEdits"]["env"])
    assert env["NVIDIA_VISIBLE_DEVICES"] == simulated_uuid(NODE, 1)
    (held,) = stack.client.list_allocations()
    assert (held.pod.uid, held.container) == ("uid-1", "gpu")
    assert [(s.uuid, s.memory_mib) for s in held.shares] == [(simulated_uuid(NODE, 1), H200_MIB)]


def test_a_share_gets_what_the_device_plugin_path_gets(dra_stack: Factory) -> None:
    """The same share through a claim (consumed capacity) and through the runtime's Allocate for a pod."""
    stack = dra_stack()
    share = {"request": "gpu", "device": "gpu-0", "consumedCapacity": {"core": "30", "memory": "8Gi"}}
    stack.claims.add(claim("share", "uid-1", [share]))
    answer = plugin(stack).prepare([key("share", "uid-1")])["uid-1"]
    assert answer.error == ""
    spec = json.loads((stack.cdi_dir / f"{DRIVER}-claim_uid-1.json").read_text())
    env = dict(e.split("=", 1) for e in spec["devices"][0]["containerEdits"]["env"])
    pod = stack.client.allocate("default", "pod", "pod-uid", "main", [Share(simulated_uuid(NODE, 0), 300, 8192)])
    assert env == dict(pod.envs)
    assert spec["devices"][0]["containerEdits"]["deviceNodes"] == [
        {"path": d.container_path, "hostPath": d.host_path, "permissions": d.permissions} for d in pod.devices
    ]
    assert list(answer.devices[0].cdi_ids[1:]) == list(pod.cdi_devices)


def test_two_claims_share_one_gpu_and_the_runtime_refuses_an_overcommit(dra_stack: Factory) -> None:
    stack = dra_stack()
    for i, core in enumerate((60, 40, 10)):
        part = {"request": "gpu", "device": "gpu-0", "consumedCapacity": {"core": str(core), "memory": "1Gi"}}
        stack.claims.add(claim(f"c{i}", f"uid-{i}", [part]))
    answers = plugin(stack).prepare([key("c0", "uid-0"), key("c1", "uid-1")])
    assert [answers[u].error for u in ("uid-0", "uid-1")] == ["", ""]
    third = plugin(stack).prepare([key("c2", "uid-2")])["uid-2"]
    assert "the node runtime refused request gpu" in third.error
    assert not (stack.cdi_dir / f"{DRIVER}-claim_uid-2.json").exists()
    assert sorted(a.pod.uid for a in stack.client.list_allocations()) == ["uid-0", "uid-1"]


def test_requests_of_one_claim_get_their_own_cdi_device(dra_stack: Factory) -> None:
    """NVIDIA's gpu-test5: containers name one request each of a claim with two."""
    stack = dra_stack()
    results = [{"request": "ts-gpu", "device": "gpu-0"}, {"request": "mps-gpu", "device": "gpu-1"}]
    stack.claims.add(claim("multiple-gpus", "uid-5", results))
    answer = plugin(stack).prepare([key("multiple-gpus", "uid-5")])["uid-5"]
    ts, mps = cdi_ids_for(answer, "ts-gpu"), cdi_ids_for(answer, "mps-gpu")
    assert ts[0] == f"{DRIVER}/claim=uid-5-ts-gpu"
    assert mps[0] == f"{DRIVER}/claim=uid-5-mps-gpu"
    assert not set(ts) & set(mps)
    spec = json.loads((stack.cdi_dir / f"{DRIVER}-claim_uid-5.json").read_text())
    visible = {
        d["name"]: dict(e.split("=", 1) for e in d["containerEdits"]["env"])["NVIDIA_VISIBLE_DEVICES"]
        for d in spec["devices"]
    }
    assert visible == {"uid-5-mps-gpu": simulated_uuid(NODE, 1), "uid-5-ts-gpu": simulated_uuid(NODE, 0)}


def test_prepare_is_idempotent_across_a_plugin_restart(dra_stack: Factory) -> None:
    stack = dra_stack()
    stack.claims.add(claim("c1", "uid-1", [{"request": "gpu", "device": "gpu-0"}]))
    first = plugin(stack).prepare([key("c1", "uid-1")])["uid-1"]
    reads = stack.claims.reads
    again = stack.new_service().prepare([ClaimRef("default", "uid-1", "c1")])["uid-1"]
    assert stack.claims.reads == reads  # answered from the checkpoint
    assert [(d.device, d.cdi_ids) for d in again.devices] == [(d.device, d.cdi_ids) for d in first.devices]
    assert len(stack.client.list_allocations()) == 1


def test_unprepare_releases_the_runtime_allocation_and_the_cdi_spec(dra_stack: Factory) -> None:
    stack = dra_stack()
    stack.claims.add(claim("c1", "uid-1", [{"request": "gpu", "device": "gpu-0"}]))
    assert plugin(stack).prepare([key("c1", "uid-1")])["uid-1"].error == ""
    assert plugin(stack).unprepare([key("c1", "uid-1"), key("never", "uid-9")]) == {"uid-1": "", "uid-9": ""}
    assert stack.client.list_allocations() == []
    assert list(stack.cdi_dir.glob("*.json")) == []
    restarted = stack.new_service()
    stack.claims.add(claim("c1", "uid-1", [{"request": "gpu", "device": "gpu-1"}]))
    assert restarted.prepare([ClaimRef("default", "uid-1", "c1")])["uid-1"].devices[0].device == "gpu-1"


@pytest.mark.parametrize(
    ("stored", "wanted"),
    [
        (None, "ResourceClaim default/c1 not found"),
        (
            claim("c1", "other-uid", [{"request": "gpu", "device": "gpu-0"}]),
            "has uid other-uid, kubelet asked for uid-1",
        ),
        (
            claim("c1", "uid-1", [{"request": "gpu", "device": "gpu-7"}]),
            "device gpu-7 is not (or no longer) on this node",
        ),
        (claim("c1", "uid-1", [{"request": "gpu", "device": "gpu-0", "pool": "node-b"}]), "pool(s) node-b are not on"),
        (
            claim(
                "c1",
                "uid-1",
                [{"request": "gpu", "device": "gpu-0"}],
                [
                    {
                        "source": "FromClaim",
                        "opaque": {"driver": DRIVER, "parameters": {"apiVersion": "x/v1", "kind": "Y"}},
                    }
                ],
            ),
            "unsupported opaque config x/v1/Y: this driver accepts resource.nvidia.com/v1beta1 GpuConfig",
        ),
    ],
    ids=["missing", "replaced", "unknown-device", "other-pool", "unknown-config"],
)
def test_a_claim_that_cannot_be_prepared_says_why_and_holds_nothing(
    dra_stack: Factory, stored: ResourceClaim | None, wanted: str
) -> None:
    stack = dra_stack()
    if stored is not None:
        stack.claims.add(stored)
    answer = plugin(stack).prepare([key("c1", "uid-1")])["uid-1"]
    assert wanted in answer.error
    assert answer.devices == ()
    assert stack.client.list_allocations() == []


def test_an_unallocated_claim_is_refused(dra_stack: Factory) -> None:
    stack = dra_stack()
    body = claim("c1", "uid-1", [])
    del body["status"]
    stack.claims.add(body)
    assert "is not allocated" in plugin(stack).prepare([key("c1", "uid-1")])["uid-1"].error


def test_mps_config_caps_the_share_as_nvidia_driver_reads_it(dra_stack: Factory) -> None:
    stack = dra_stack()
    mps = {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "GpuConfig",
        "sharing": {
            "strategy": "MPS",
            "mpsConfig": {"defaultActiveThreadPercentage": 50, "defaultPinnedDeviceMemoryLimit": "10Gi"},
        },
    }
    config = [{"source": "FromClaim", "requests": ["mps-gpu"], "opaque": {"driver": DRIVER, "parameters": mps}}]
    stack.claims.add(claim("c1", "uid-1", [{"request": "mps-gpu", "device": "gpu-0"}], config))
    assert plugin(stack).prepare([key("c1", "uid-1")])["uid-1"].error == ""
    (held,) = stack.client.list_allocations()
    assert [(s.core_milli, s.memory_mib) for s in held.shares] == [(500, 10240)]

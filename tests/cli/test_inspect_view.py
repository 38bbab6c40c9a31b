"""`runtimekit inspect`'s view counts a pod's GPUs only from an assignment the scheduler would book
(readable, for the node, signed when keys are given, exactly what the containers ask), per GPU and
per MIG instance, and says why it ignores the others."""

from __future__ import annotations

from typing import Any, cast

import pytest

from runtimekit.base.keyring import KeyRing
from runtimekit.cli.inspect_view import PodShare, build_view
from runtimekit.kube.objects import Node, Pod
from runtimekit.model import Assignment, GpuShare, NodeInventory
from runtimekit.model.authority import sign_assignment
from runtimekit.model.gpu import Gpu, GpuUUID, MigInstance, MigMode, NodeName
from runtimekit.protocol import KitProtocol

PROTOCOL = KitProtocol.default()
KEYS = KeyRing.from_secrets(b"k" * 32)
OTHER_KEYS = KeyRing.from_secrets(b"o" * 32)
INVENTORY = NodeInventory.simulated("n1", "H100", 2)
GPU0, GPU1 = INVENTORY.gpus[0].uuid, INVENTORY.gpus[1].uuid


def node(name: str = "n1", inventory: NodeInventory = INVENTORY) -> Node:
    return cast(
        Node,
        {
            "metadata": {"name": name, "annotations": {PROTOCOL.annotations.node_devices: inventory.to_annotation()}},
            "status": {
                "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
                "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
            },
        },
    )


def pod(
    name: str,
    shares: list[GpuShare],
    limits: dict[str, Any],
    *,
    on: str = "n1",
    signer: KeyRing | None = KEYS,
    phase: str = "Running",
    started: bool = True,
) -> Pod:
    uid = f"uid-{name}"
    text = Assignment(NodeName(on), {"main": tuple(shares)}).to_annotation()
    annotations = {PROTOCOL.annotations.assignment: text}
    if signer is not None:
        annotations[PROTOCOL.annotations.assignment_signature] = sign_assignment(signer, uid, text)
    return cast(
        Pod,
        {
            "metadata": {"name": name, "namespace": "default", "uid": uid, "annotations": annotations},
            "spec": {"nodeName": "n1", "containers": [{"name": "main", "resources": {"limits": limits}}]},
            "status": {"phase": phase, **({"startTime": "2026-01-01T00:00:00Z"} if started else {})},
        },
    )


def share_pod(name: str, gpu: str, percent: int, gib: int, **kw: Any) -> Pod:
    limits = {PROTOCOL.resources.core: str(percent), PROTOCOL.resources.memory: str(gib)}
    return pod(name, [GpuShare(GpuUUID(gpu), 0, percent * 10, gib * 1024)], limits, **kw)


def test_granted_shares_free_room_and_pods_per_gpu() -> None:
    pods = [share_pod("a", GPU0, 30, 20), share_pod("b", GPU0, 50, 10), share_pod("c", GPU1, 10, 1)]
    view = build_view([node()], pods, PROTOCOL, KEYS)
    (n1,) = view.nodes
    assert (n1.name, n1.address, n1.ready, n1.ignored) == ("n1", "10.0.0.1", True, ())
    g0, g1 = n1.gpus
    assert [(s.pod, s.core_milli, s.memory_mib) for s in g0.shares] == [("a", 300, 20480), ("b", 500, 10240)]
    assert (g0.core_granted_milli, g0.core_free_milli) == (800, 200)
    assert g0.memory_free_mib == g0.memory_mib - 30 * 1024
    assert (g1.core_granted_milli, g1.memory_granted_mib) == (100, 1024)
    assert view.core_granted_milli == 900
    assert view.signatures_checked


@pytest.mark.parametrize(
    ("made", "keys", "reason"),
    [
        pytest.param({"signer": None}, KEYS, "unsigned", id="unsigned-with-keys"),
        pytest.param({"signer": OTHER_KEYS, "started": False}, KEYS, "signature", id="another-key"),
        # kubelet admitted it under a key rotated out since: the scheduler keeps booking it
        pytest.param({"signer": OTHER_KEYS}, KEYS, "", id="another-key-admitted-counted"),
        pytest.param({"on": "n2"}, KEYS, "other_node", id="for-another-node"),
        pytest.param({"signer": None}, None, "", id="unsigned-without-keys-counted"),
    ],
)
def test_an_assignment_the_scheduler_would_not_book_is_listed_not_counted(
    made: dict[str, Any], keys: KeyRing | None, reason: str
) -> None:
    view = build_view([node()], [share_pod("p", GPU0, 30, 20, **made)], PROTOCOL, keys)
    (n1,) = view.nodes
    assert [i.reason for i in n1.ignored] == ([reason] if reason else [])
    assert n1.gpus[0].core_granted_milli == (0 if reason else 300)
    assert view.signatures_checked is (keys is not None)


def test_an_assignment_that_grants_more_than_asked_is_ignored() -> None:
    limits = {PROTOCOL.resources.core: "30", PROTOCOL.resources.memory: "20"}
    greedy = pod("greedy", [GpuShare(GpuUUID(GPU0), 0, 900, 20 * 1024)], limits)
    (n1,) = build_view([node()], [greedy], PROTOCOL, KEYS).nodes
    assert [(i.pod, i.reason) for i in n1.ignored] == [("greedy", "requests")]
    assert n1.gpus[0].shares == ()


def test_terminated_pods_and_nodes_without_gpus_are_left_out_unless_named() -> None:
    done = share_pod("done", GPU0, 30, 20, phase="Succeeded")
    bare = node("cpu-only", NodeInventory(NodeName("cpu-only")))
    view = build_view([node(), bare], [done], PROTOCOL, KEYS)
    assert [n.name for n in view.nodes] == ["n1"]
    assert view.nodes[0].gpus[0].shares == ()
    assert [n.name for n in build_view([node(), bare], [], PROTOCOL, only="cpu-only").nodes] == ["cpu-only"]


def test_mig_instances_show_their_holder_and_the_free_ones() -> None:
    mig = (MigInstance("MIG-a", "1g.10gb", 0), MigInstance("MIG-b", "1g.10gb", 1))
    gpu = Gpu(0, GpuUUID("GPU-m"), "A100-80GB", 81920, mig_mode=MigMode.STATIC, mig_devices=mig)
    inventory = NodeInventory(NodeName("n1"), (gpu,))
    share = GpuShare(GpuUUID("MIG-b"), 0, 0, 9728, "1g.10gb", GpuUUID("GPU-m"), 1)
    holder = pod("m", [share], {f"{PROTOCOL.resources.mig_prefix}1g.10gb": "1"})
    (n1,) = build_view([node(inventory=inventory)], [holder], PROTOCOL, KEYS).nodes
    assert n1.ignored == ()
    (g,) = n1.gpus
    assert [(m.uuid, m.pod) for m in g.mig] == [("MIG-a", ""), ("MIG-b", "default/m")]
    assert [(s.pod, s.mig_profile, s.mig_uuid, s.core_milli) for s in g.shares] == [("m", "1g.10gb", "MIG-b", 0)]


def test_claims_count_beside_pods_in_a_gpus_free_room() -> None:
    claimed = {GPU0: [PodShare("ml", "user", "main", 250, 16384, claim="quarter")]}
    (n1,) = build_view([node()], [share_pod("a", GPU0, 30, 20)], PROTOCOL, KEYS, claimed=claimed).nodes
    g0 = n1.gpus[0]
    assert [(s.pod, s.claim) for s in g0.shares] == [("a", ""), ("user", "quarter")]
    assert (g0.core_free_milli, g0.memory_granted_mib) == (450, 20480 + 16384)

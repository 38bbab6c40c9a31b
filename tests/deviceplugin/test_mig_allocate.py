"""The device plugin's Allocate for MIG pods against a real runtime on simulated A100s, in both MIG modes,
as a service and through the simulated kubelet: the pod is found by its assigned slots, the runtime
finds (static) or makes (dynamic) the MIG device, and the container gets its MIG UUID."""

from __future__ import annotations

import json

import pytest
from dp_helpers import NODE, PROTOCOL, RES, StackFactory, mig_pod

from runtimekit.base.rpcerrors import Code, ServiceError
from runtimekit.model import MigMode, NodeInventory

MIXED = {"gpus": "2xA100-80GB,1xH200", "mig_modes": {0: MigMode.STATIC, 1: MigMode.DYNAMIC}}
LAYOUT = {0: ["3g.40gb", "3g.40gb"]}
ONE, THREE = RES.mig_prefix + "1g.10gb", RES.mig_prefix + "3g.40gb"


def test_dynamic_allocate_makes_the_device_on_the_assigned_slot(make_stack: StackFactory) -> None:
    stack = make_stack(**MIXED, mig_layouts=LAYOUT)
    dynamic = stack.gpus[1]
    stack.kube.add(mig_pod("m", "1g.10gb", [(dynamic, 1, 3, "")]))
    available = [d.id for d in stack.service.devices(stack.service.spec(ONE), stack.service.state.snapshot()[1])]
    (chosen,) = stack.service.preferred(ONE, available, [], 1)
    assert chosen.startswith(f"{dynamic}::1g.10gb::")
    answer = stack.service.allocate(ONE, [chosen])
    (granted,) = answer.allocation.shares
    assert (granted.parent_uuid, granted.mig_profile, granted.mig_start, granted.mig_dynamic) == (
        dynamic,
        "1g.10gb",
        3,
        True,
    )
    assert answer.envs["NVIDIA_VISIBLE_DEVICES"] == granted.uuid
    assert list(answer.cdi_devices) == [f"nvidia.com/gpu={granted.uuid}"]
    made = stack.client.list_devices()[1].mig_devices
    assert [(m.uuid, m.profile, m.start) for m in made] == [(granted.uuid, "1g.10gb", 3)]
    record = json.loads(stack.kube.annotations("default", "m")[PROTOCOL.annotations.allocated])
    assert record["containers"] == {"main": [ONE]}


def test_static_allocate_hands_over_the_existing_device(make_stack: StackFactory) -> None:
    stack = make_stack(**MIXED, mig_layouts=LAYOUT)
    upper = stack.client.list_devices()[0].mig_devices[1]
    stack.kube.add(mig_pod("s", "3g.40gb", [(stack.gpus[0], 0, upper.start, upper.uuid)]))
    answer = stack.service.allocate(THREE, [upper.uuid])
    assert answer.envs["NVIDIA_VISIBLE_DEVICES"] == upper.uuid
    assert answer.allocation.shares[0].mig_dynamic is False


def test_the_runtimes_refusal_reaches_kubelet(make_stack: StackFactory) -> None:
    stack = make_stack(**MIXED, mig_layouts=LAYOUT)
    dynamic = stack.gpus[1]
    stack.kube.add(mig_pod("a", "3g.40gb", [(dynamic, 1, 0, "")], assume=1))
    stack.kube.add(mig_pod("b", "4g.40gb", [(dynamic, 1, 0, "")], assume=2))  # a scheduler gone wrong
    stack.service.allocate(THREE, [f"{dynamic}::3g.40gb::0"])
    with pytest.raises(ServiceError) as refused:
        stack.service.allocate(RES.mig_prefix + "4g.40gb", [f"{dynamic}::4g.40gb::0"])
    assert refused.value.code is Code.FAILED_PRECONDITION
    assert "overlap 3g.40gb" in refused.value.message
    assert PROTOCOL.annotations.allocated not in stack.kube.annotations("default", "b")


def test_kubelet_admits_mig_pods_of_both_modes_and_the_inventory_has_the_layout(make_stack: StackFactory) -> None:
    stack = make_stack(**MIXED, mig_layouts=LAYOUT)
    stack.start_plugin()
    kl = stack.kubelet
    assert kl is not None
    wanted = {ONE: 7, THREE: 4, RES.mig_prefix + "7g.80gb": 1, RES.gpu: 1}  # 3g.40gb: 2 static devices + 2 slots
    assert kl.wait_for(lambda k: all(k.capacity().get(r) == n for r, n in wanted.items())), kl.capacity()
    assert stack.kube.wait_node(lambda api: PROTOCOL.annotations.node_devices in api.node_annotations.get(NODE, {}))
    published = NodeInventory.from_annotation(
        NODE, stack.kube.node_annotations[NODE][PROTOCOL.annotations.node_devices]
    )
    assert [(m.profile, m.start) for m in published.gpus[0].mig_devices] == [("3g.40gb", 0), ("3g.40gb", 4)]
    assert [g.mig_mode for g in published.gpus] == [MigMode.STATIC, MigMode.DYNAMIC, MigMode.OFF]

    lower = published.gpus[0].mig_devices[0]
    static = stack.kube.add(mig_pod("s", "3g.40gb", [(stack.gpus[0], 0, 0, lower.uuid)], assume=1))
    dynamic = stack.kube.add(mig_pod("d", "1g.10gb", [(stack.gpus[1], 1, 5, ""), (stack.gpus[1], 1, 6, "")], assume=2))
    static_env = kl.admit_pod(static)["main"].envs
    dynamic_env = kl.admit_pod(dynamic)["main"].envs
    assert static_env["NVIDIA_VISIBLE_DEVICES"] == lower.uuid
    made = stack.client.list_devices()[1].mig_devices
    assert [m.start for m in made] == [5, 6]
    assert dynamic_env["NVIDIA_VISIBLE_DEVICES"] == ",".join(m.uuid for m in made)
    held = {a.resource: a.device_ids for a in kl.allocations()}
    assert held[THREE] == (lower.uuid,)
    assert {i.rpartition("::")[0] for i in held[ONE]} == {f"{stack.gpus[1]}::1g.10gb"}
    kl.remove_pod(dynamic["metadata"]["uid"])
    stack.runtime.release(dynamic["metadata"]["uid"])
    assert not stack.client.list_devices()[1].mig_devices

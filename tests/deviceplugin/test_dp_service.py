"""The plugin's Allocate against a real runtime (gRPC) and a fake API server: matching, forwarding, marking."""

from __future__ import annotations

import pytest
from dp_helpers import PROTOCOL, RES, StackFactory, gpu_pod, mig_pod

from runtimekit.base.rpcerrors import Code, ServiceError
from runtimekit.deviceplugin.matching import parse_allocated

H200 = 143771
ALLOCATED = PROTOCOL.annotations.allocated


def core_ids(gpu: str, n: int) -> list[str]:
    return [f"{gpu}::{i}" for i in range(n)]


def test_share_pod_allocates_once_per_resource_and_is_marked(make_stack: StackFactory) -> None:
    stack = make_stack()
    gpu1 = stack.gpus[1]
    stack.kube.add(gpu_pod("p", [("main", {RES.core: 30, RES.memory: 8}, [(gpu1, 1, 300, 8192)])]))
    answer = stack.service.allocate(RES.core, core_ids(gpu1, 30))
    assert answer.envs["NVIDIA_VISIBLE_DEVICES"] == gpu1
    assert answer.envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "30"
    assert answer.envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=8192M"
    assert parse_allocated(stack.kube.annotations("default", "p")[ALLOCATED]) == {"main": (RES.core,)}
    again = stack.service.allocate(RES.memory, core_ids(gpu1, 8))
    assert dict(again.envs) == dict(answer.envs)
    assert parse_allocated(stack.kube.annotations("default", "p")[ALLOCATED]) == {"main": (RES.core, RES.memory)}
    (allocation,) = stack.client.list_allocations()
    assert (allocation.pod.uid, allocation.container, list(allocation.resource_names)) == (
        "uid-p",
        "main",
        [RES.core, RES.memory],
    )
    with pytest.raises(ServiceError) as exc:
        stack.service.allocate(RES.core, core_ids(gpu1, 30))  # nothing left waiting
    assert exc.value.code is Code.FAILED_PRECONDITION


def test_whole_and_multi_gpu_pods(make_stack: StackFactory) -> None:
    stack = make_stack("4xH200")
    g = stack.gpus
    stack.kube.add(gpu_pod("one", [("main", {RES.gpu: 1}, [(g[2], 2, 1000, H200)])], assume=1))
    stack.kube.add(gpu_pod("two", [("main", {RES.gpu: 2}, [(g[0], 0, 1000, H200), (g[3], 3, 1000, H200)])], assume=2))
    two = stack.service.allocate(RES.gpu, [g[0], g[3]])
    assert two.envs["NVIDIA_VISIBLE_DEVICES"] == f"{g[0]},{g[3]}"
    assert two.envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == f"0={H200}M,1={H200}M"
    assert list(two.cdi_devices) == [f"nvidia.com/gpu={g[0]}", f"nvidia.com/gpu={g[3]}"]
    one = stack.service.allocate(RES.gpu, [g[1]])  # kubelet's pick does not decide; the assignment does
    assert one.envs["NVIDIA_VISIBLE_DEVICES"] == g[2]


def test_two_identical_pods_each_get_their_own_assigned_gpu(make_stack: StackFactory) -> None:
    stack = make_stack()
    g0, g1 = stack.gpus
    limits = {RES.core: 50, RES.memory: 10}
    stack.kube.add(gpu_pod("late", [("main", limits, [(g0, 0, 500, 10240)])], assume=7))
    stack.kube.add(gpu_pod("early", [("main", limits, [(g1, 1, 500, 10240)])], assume=3))
    preferred = stack.service.preferred(RES.core, core_ids(g0, 100) + core_ids(g1, 100), [], 50)
    assert preferred == core_ids(g1, 50)  # the older pod comes first
    first = stack.service.allocate(RES.core, preferred)
    assert first.allocation.pod.name == "early"
    assert first.envs["NVIDIA_VISIBLE_DEVICES"] == g1
    second = stack.service.allocate(RES.core, core_ids(g0, 50))
    assert (second.allocation.pod.name, second.envs["NVIDIA_VISIBLE_DEVICES"]) == ("late", g0)
    assert stack.service.allocate(RES.memory, core_ids(g1, 10)).allocation.pod.name == "early"
    assert stack.service.allocate(RES.memory, core_ids(g0, 10)).allocation.pod.name == "late"


def test_conflicting_patch_is_retried_on_the_fresh_pod(make_stack: StackFactory) -> None:
    stack = make_stack()
    gpu = stack.gpus[0]
    stack.kube.add(gpu_pod("p", [("main", {RES.core: 10}, [(gpu, 0, 100, H200 // 10)])]))
    stack.kube.changes_before_patch = 2
    stack.service.allocate(RES.core, core_ids(gpu, 10))
    assert parse_allocated(stack.kube.annotations("default", "p")[ALLOCATED]) == {"main": (RES.core,)}


def test_pod_deleted_during_allocation_is_refused_and_released(make_stack: StackFactory) -> None:
    stack = make_stack()
    gpu = stack.gpus[0]
    stack.kube.add(gpu_pod("p", [("main", {RES.core: 10}, [(gpu, 0, 100, H200 // 10)])]))
    stack.kube.changes_before_patch = 1
    original = stack.kube.get_pod

    def deleted(namespace: str, name: str) -> dict[str, object]:
        stack.kube.pods.clear()
        return original(namespace, name)

    stack.kube.get_pod = deleted  # type: ignore[method-assign]
    with pytest.raises(ServiceError) as exc:
        stack.service.allocate(RES.core, core_ids(gpu, 10))
    assert exc.value.code is Code.FAILED_PRECONDITION
    assert "deleted while it was being allocated" in exc.value.message
    assert stack.client.list_allocations() == []


def test_refusals_say_why(make_stack: StackFactory) -> None:
    stack = make_stack()
    gpu = stack.gpus[0]
    stack.kube.add(gpu_pod("p", [("main", {RES.core: 10}, [(gpu, 0, 100, H200 // 10)])]))
    with pytest.raises(ServiceError) as no_match:
        stack.service.allocate(RES.core, core_ids(gpu, 20))
    assert "default/p container main asks 10" in no_match.value.message
    with pytest.raises(ServiceError) as unknown:
        stack.service.allocate("example.com/other", ["x"])
    assert unknown.value.code is Code.NOT_FOUND
    stack.kube.down = True
    with pytest.raises(ServiceError) as down:
        stack.service.allocate(RES.core, core_ids(gpu, 10))
    assert down.value.code is Code.UNAVAILABLE
    stack.kube.down = False
    stack.client.disable("draining")
    with pytest.raises(ServiceError) as disabled:
        stack.service.allocate(RES.core, core_ids(gpu, 10))
    assert disabled.value.code is Code.FAILED_PRECONDITION
    assert disabled.value.message.startswith(f"the node runtime refused {RES.core} for default/p container main:")
    assert "disabled (draining)" in disabled.value.message
    assert ALLOCATED not in stack.kube.annotations("default", "p")
    stack.client.enable("")
    stack.service.allocate(RES.core, core_ids(gpu, 10))


def test_runtime_over_commit_refusal_is_passed_on(make_stack: StackFactory) -> None:
    stack = make_stack()
    gpu = stack.gpus[0]
    stack.kube.add(gpu_pod("a", [("main", {RES.core: 80}, [(gpu, 0, 800, H200 * 8 // 10)])], assume=1))
    stack.kube.add(
        gpu_pod("b", [("main", {RES.core: 30}, [(gpu, 0, 300, H200 * 3 // 10)])], assume=2)
    )  # a bad scheduler
    stack.service.allocate(RES.core, core_ids(gpu, 80))
    with pytest.raises(ServiceError) as exc:
        stack.service.allocate(RES.core, core_ids(gpu, 30))
    assert exc.value.code is Code.RESOURCE_EXHAUSTED
    assert "would over-commit" in exc.value.message


def test_mig_resource(make_stack: StackFactory) -> None:
    stack = make_stack("1xA100-80GB", mig_layouts={0: ["3g.40gb", "3g.40gb"]})
    migs = [m.uuid for m in stack.client.list_devices()[0].mig_devices]
    resource = RES.mig_prefix + "3g.40gb"
    assert [s.name for s in stack.service.specs()] == [RES.gpu, RES.core, RES.memory, resource]
    stack.kube.add(mig_pod("m", "3g.40gb", [(stack.gpus[0], 0, 4, migs[1])]))
    assert stack.service.preferred(resource, migs, [], 1) == [migs[1]]
    answer = stack.service.allocate(resource, [migs[1]])
    assert answer.envs["NVIDIA_VISIBLE_DEVICES"] == migs[1]

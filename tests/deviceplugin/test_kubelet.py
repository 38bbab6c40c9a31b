"""The device plugin against the simulated kubelet, over real gRPC on unix sockets in a temp folder:
registration, ListAndWatch, health, kubelet restarts, admission, PodResources and the node inventory."""

from __future__ import annotations

import json

import grpc
import pytest
from dp_helpers import NODE, PROTOCOL, RES, FakeNodeApi, Stack, StackFactory, gpu_pod

from fixtures.waiting import wait_for
from runtimekit.api import kubelet
from runtimekit.api.podresources.v1 import podresources_pb2 as pr
from runtimekit.api.podresources.v1 import podresources_pb2_grpc as pr_grpc
from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.cluster.kubelet.devicemanager import AdmissionError, DeviceManager
from runtimekit.cluster.kubelet.podresources import serve_pod_resources

H200 = 143771
UNITS = H200 // 1024
RESOURCES = [RES.gpu, RES.core, RES.memory]


def listed(stack: Stack) -> bool:
    kl = stack.kubelet
    assert kl is not None
    return kl.resources() == sorted(RESOURCES) and all(kl.updates(r) > 0 for r in RESOURCES)


def test_registers_every_resource_and_lists_its_devices(make_stack: StackFactory) -> None:
    stack = make_stack()
    stack.start_plugin()
    kl = stack.kubelet
    assert kl is not None
    assert kl.wait_for(lambda _: listed(stack))
    assert kl.capacity() == {RES.gpu: 2, RES.core: 200, RES.memory: 2 * UNITS}
    assert kl.allocatable() == kl.capacity()
    assert sorted(kl.devices(RES.gpu)) == sorted(stack.gpus)
    assert f"{stack.gpus[1]}::99" in kl.devices(RES.core)


def test_health_change_reaches_listandwatch_of_every_resource(make_stack: StackFactory) -> None:
    """How fast: benchmarks/bench_deviceplugin.py (target 1 s); a timed assertion here would be flaky."""
    stack = make_stack()
    stack.start_plugin()
    kl = stack.kubelet
    assert kl is not None
    assert kl.wait_for(lambda _: listed(stack))
    stack.client.inject_fault(pb.FAULT_KIND_XID, 1, xid=79)
    degraded = {RES.gpu: 1, RES.core: 100, RES.memory: UNITS}
    assert kl.wait_for(lambda k: k.allocatable() == degraded)  # every resource's stream
    assert kl.devices(RES.gpu)[stack.gpus[1]] == kubelet.UNHEALTHY
    assert kl.capacity() == {RES.gpu: 2, RES.core: 200, RES.memory: 2 * UNITS}
    stack.client.inject_fault(pb.FAULT_KIND_GPU_BACK, 1)
    assert kl.wait_for(lambda k: k.allocatable() == k.capacity())


def test_node_inventory_and_labels_follow_health(make_stack: StackFactory) -> None:
    stack = make_stack()
    stack.start_plugin()

    def inventory(api: FakeNodeApi) -> list[dict[str, object]]:
        text = api.node_annotations.get(NODE, {}).get(PROTOCOL.annotations.node_devices)
        return json.loads(text)["gpus"] if text else []

    assert stack.kube.wait_node(lambda api: len(inventory(api)) == 2)
    assert stack.kube.node_labels[NODE] == {
        PROTOCOL.labels.gpu_model: "H200",
        PROTOCOL.labels.gpu_count: "2",
        PROTOCOL.labels.memory_unit: "1Gi",  # the protocol's memoryUnit: the plugin has no --memory-unit
    }
    assert [(g["uuid"], g["memoryMiB"], g["health"]) for g in inventory(stack.kube)] == [
        (stack.gpus[0], H200, "Healthy"),
        (stack.gpus[1], H200, "Healthy"),
    ]
    stack.client.set_device_health(stack.gpus[0], False, "too hot", "exporter")
    assert stack.kube.wait_node(lambda api: inventory(api)[0]["health"] == "Unhealthy")


@pytest.mark.parametrize(("unit", "label"), [(512, "512Mi"), (2048, "2Gi")], ids=["512Mi", "2Gi"])
def test_a_plugin_with_its_own_memory_unit_advertises_and_publishes_it(
    make_stack: StackFactory, unit: int, label: str
) -> None:
    """`--memory-unit` other than the protocol's: memory devices of that size, and the node says so."""
    stack = make_stack(memory_unit=unit)
    stack.start_plugin()
    kl = stack.kubelet
    assert kl is not None
    assert kl.wait_for(lambda k: k.capacity() == {RES.gpu: 2, RES.core: 200, RES.memory: 2 * (H200 // unit)})
    assert stack.kube.wait_node(lambda api: api.node_labels.get(NODE, {}).get(PROTOCOL.labels.memory_unit) == label)


def test_kubelet_restart_makes_the_plugin_register_again(make_stack: StackFactory) -> None:
    stack = make_stack()
    manager = stack.start_plugin()
    kl = stack.kubelet
    assert kl is not None
    assert kl.wait_for(lambda _: listed(stack))
    assert len(kl.registrations) == 3
    kl.restart()  # removes every socket in the folder, then serves a new kubelet.sock
    assert kl.wait_for(lambda k: len(k.registrations) == 6 and listed(stack), timeout_s=30.0)
    assert kl.capacity() == {RES.gpu: 2, RES.core: 200, RES.memory: 2 * UNITS}
    # the kubelet records a registration before the plugin's Register call has returned
    wait_for(lambda: manager.registrations == 6, timeout=10.0, what="the plugin to count its registrations")
    assert manager.registrations == 6
    sockets = sorted(p.name for p in (stack.dir / "plugins").iterdir() if p.suffix == ".sock")
    assert len(sockets) == 4  # kubelet.sock and one per resource


def test_plugin_started_before_kubelet_registers_when_it_appears(make_stack: StackFactory) -> None:
    stack = make_stack()
    from runtimekit.deviceplugin.manager import DevicePluginManager

    manager = DevicePluginManager(stack.service, stack.client.watch_devices, stack.dir / "plugins", poll_s=0.05)
    manager.start(first_devices_timeout_s=5.0)
    stack.closers.append(manager.stop)
    assert manager.registrations == 0
    stack.kubelet = DeviceManager(stack.dir / "plugins").start()
    stack.closers.append(stack.kubelet.stop)
    assert stack.kubelet.wait_for(lambda _: listed(stack))


def test_pods_are_admitted_through_kubelet_with_their_assigned_gpus(make_stack: StackFactory) -> None:
    stack = make_stack("4xH200")
    stack.start_plugin()
    kl = stack.kubelet
    assert kl is not None
    assert kl.wait_for(lambda _: listed(stack))
    g = stack.gpus
    share = stack.kube.add(gpu_pod("share", [("main", {RES.core: 25, RES.memory: 4}, [(g[2], 2, 250, 4096)])], 1))
    whole = stack.kube.add(
        gpu_pod("whole", [("main", {RES.gpu: 2}, [(g[1], 1, 1000, H200), (g[3], 3, 1000, H200)])], 2)
    )
    options = kl.admit_pod(share)["main"]
    assert options.envs["NVIDIA_VISIBLE_DEVICES"] == g[2]
    assert options.envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "25"
    # each mount once although two resources returned it: the pipe folder and the daemon's shared memory
    assert list(options.mounts) == ["/run/lj-runtimekit/mps/pipe", "/dev/shm"]
    assert options.cdi_devices == [f"nvidia.com/gpu={g[2]}"]
    options = kl.admit_pod(whole)["main"]
    assert options.envs["NVIDIA_VISIBLE_DEVICES"] == f"{g[1]},{g[3]}"
    held = {(a.pod.name, a.resource): a.device_ids for a in kl.allocations()}
    assert {i.split("::")[0] for i in held[("share", RES.core)]} == {g[2]}  # GetPreferredAllocation steered kubelet
    assert len(held[("share", RES.memory)]) == 4
    assert sorted(held[("whole", RES.gpu)]) == sorted([g[1], g[3]])
    assert {a.pod.name for a in stack.client.list_allocations()} == {"share", "whole"}

    socket = stack.dir / "pod-resources.sock"
    server = serve_pod_resources(kl, socket)
    try:
        with grpc.insecure_channel(kubelet.unix_target(str(socket))) as channel:
            stub = pr_grpc.PodResourcesListerStub(channel)
            pods = stub.List(pr.ListPodResourcesRequest(), timeout=5).pod_resources
            allocatable = stub.GetAllocatableResources(pr.AllocatableResourcesRequest(), timeout=5).devices
    finally:
        server.stop(0).wait()
    devices = {(p.name, d.resource_name): list(d.device_ids) for p in pods for c in p.containers for d in c.devices}
    assert devices[("whole", RES.gpu)] == list(held[("whole", RES.gpu)])
    assert {d.resource_name: len(d.device_ids) for d in allocatable} == {
        RES.gpu: 4,
        RES.core: 400,
        RES.memory: 4 * UNITS,
    }


def test_an_allocate_the_plugin_cannot_match_fails_admission_with_the_reason(make_stack: StackFactory) -> None:
    stack = make_stack()
    stack.start_plugin()
    kl = stack.kubelet
    assert kl is not None
    assert kl.wait_for(lambda _: listed(stack))
    stray = stack.kube.add(gpu_pod("stray", [("main", {RES.gpu: 1}, [])], assigned=False))
    with pytest.raises(AdmissionError) as exc:
        kl.admit_pod(stray)
    assert exc.value.message.startswith("Allocate failed due to rpc error: code = FAILED_PRECONDITION desc = no pod")
    assert "default/stray: not assigned by the scheduler" in exc.value.message
    assert exc.value.message.endswith(", which is unexpected")
    assert kl.allocations() == []
    good = stack.kube.add(gpu_pod("good", [("main", {RES.gpu: 1}, [(stack.gpus[0], 0, 1000, H200)])]))
    assert kl.admit_pod(good)["main"].envs["NVIDIA_VISIBLE_DEVICES"] == stack.gpus[0]


def test_losing_the_runtime_marks_every_device_unhealthy(make_stack: StackFactory) -> None:
    stack = make_stack()
    stack.start_plugin(runtime_grace_s=0.1)
    kl = stack.kubelet
    assert kl is not None
    assert kl.wait_for(lambda _: listed(stack))
    stack.daemon.stop()
    assert kl.wait_for(lambda k: k.allocatable() == {RES.gpu: 0, RES.core: 0, RES.memory: 0}, timeout_s=30.0)

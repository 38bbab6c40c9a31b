"""The simulated kubelet's device manager and PodResources API against a small fake device plugin."""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from fixtures.waiting import wait_for
from runtimekit.api import kubelet
from runtimekit.api.podresources.v1 import podresources_pb2 as pr
from runtimekit.api.podresources.v1 import podresources_pb2_grpc as pr_grpc
from runtimekit.api.v1beta1 import deviceplugin_pb2 as dp
from runtimekit.api.v1beta1 import deviceplugin_pb2_grpc as dp_grpc
from runtimekit.cluster.kubelet.devicemanager import AdmissionError, DeviceManager, PodIdentity, _resource_amounts
from runtimekit.cluster.kubelet.podresources import serve_pod_resources

RESOURCE = "example.com/gpu"


class FakePlugin(dp_grpc.DevicePluginServicer):
    """Devices `d0..dN`; answers Allocate with an env naming the IDs; records what kubelet asked."""

    def __init__(self, count: int, preferred: bool = True) -> None:
        self.options = dp.DevicePluginOptions(get_preferred_allocation_available=preferred)
        self.devices = {f"d{i}": kubelet.HEALTHY for i in range(count)}
        self.preferred_answer: list[str] = []
        self.preferred_calls: list[tuple[list[str], int]] = []
        self.allocate_calls: list[list[str]] = []
        self.fail_allocate = ""
        self._cond = threading.Condition()
        self._generation = 0
        self._ended = False

    def set_health(self, device_id: str, health: str) -> None:
        with self._cond:
            self.devices[device_id] = health
            self._generation += 1
            self._cond.notify_all()

    def end_streams(self) -> None:
        with self._cond:
            self._ended = True
            self._cond.notify_all()

    def GetDevicePluginOptions(self, request: dp.Empty, context: grpc.ServicerContext) -> dp.DevicePluginOptions:
        return self.options

    def ListAndWatch(self, request: dp.Empty, context: grpc.ServicerContext) -> Iterator[dp.ListAndWatchResponse]:
        sent = [-1]
        while context.is_active():
            with self._cond:
                self._cond.wait_for(lambda: self._generation != sent[0] or self._ended, timeout=0.2)
                if self._ended:
                    return
                if self._generation == sent[0]:
                    continue
                sent[0] = self._generation
                devices = [dp.Device(ID=i, health=h) for i, h in self.devices.items()]
            yield dp.ListAndWatchResponse(devices=devices)

    def GetPreferredAllocation(
        self, request: dp.PreferredAllocationRequest, context: grpc.ServicerContext
    ) -> dp.PreferredAllocationResponse:
        r = request.container_requests[0]
        self.preferred_calls.append((list(r.available_deviceIDs), r.allocation_size))
        return dp.PreferredAllocationResponse(
            container_responses=[dp.ContainerPreferredAllocationResponse(deviceIDs=self.preferred_answer)]
        )

    def Allocate(self, request: dp.AllocateRequest, context: grpc.ServicerContext) -> dp.AllocateResponse:
        ids = list(request.container_requests[0].devices_ids)
        self.allocate_calls.append(ids)
        if self.fail_allocate:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, self.fail_allocate)
        response = dp.ContainerAllocateResponse(
            envs={"VISIBLE": ",".join(ids)}, cdi_devices=[dp.CDIDevice(name=f"example.com/gpu={i}") for i in ids]
        )
        return dp.AllocateResponse(container_responses=[response])


class Rig:
    def __init__(self, root: Path, plugin: FakePlugin) -> None:
        self.root = root
        self.plugin_dir = root / "plugins"
        self.plugin = plugin
        self.kubelet = DeviceManager(self.plugin_dir, dial_timeout_s=0.5).start()
        self.server: grpc.Server | None = None
        self.serve()

    def serve(self) -> None:
        if self.server is not None:
            self.server.stop(0).wait()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        dp_grpc.add_DevicePluginServicer_to_server(self.plugin, self.server)
        self.server.add_insecure_port(kubelet.unix_target(str(self.plugin_dir / "fake.sock")))
        self.server.start()

    def register(self, version: str = kubelet.VERSION, resource: str = RESOURCE, endpoint: str = "fake.sock") -> None:
        with grpc.insecure_channel(kubelet.unix_target(str(self.kubelet.socket))) as channel:
            stub = dp_grpc.RegistrationStub(channel)
            stub.Register(dp.RegisterRequest(version=version, endpoint=endpoint, resource_name=resource), timeout=5)

    def listed(self, count: int) -> bool:
        return self.kubelet.wait_for(lambda k: len(k.devices(RESOURCE)) == count and k.updates(RESOURCE) > 0)

    def close(self) -> None:
        self.kubelet.stop()
        if self.server is not None:
            self.server.stop(0).wait()


@pytest.fixture
def rig() -> Iterator[Rig]:
    root = Path(tempfile.mkdtemp(prefix="dm-"))
    made = Rig(root, FakePlugin(4))
    yield made
    made.close()
    shutil.rmtree(root, ignore_errors=True)


def pod(name: str, count: int, uid: str | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": uid or f"uid-{name}"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {RESOURCE: str(count), "cpu": "1"}}}]},
    }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"version": "v1alpha"}, "unsupported device plugin API version 'v1alpha'"),
        ({"resource": "gpu"}, "invalid resource name 'gpu'"),
        ({"resource": "kubernetes.io/gpu"}, "kubernetes.io domain is reserved"),
        ({"endpoint": "nobody.sock"}, "cannot reach the plugin"),
    ],
)
def test_register_refuses(rig: Rig, kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(grpc.RpcError) as exc:
        rig.register(**kwargs)
    assert exc.value.code() is grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
    assert message in exc.value.details()  # type: ignore[attr-defined]
    assert rig.kubelet.resources() == []


def test_registration_list_and_watch_and_health(rig: Rig) -> None:
    rig.register()
    assert rig.listed(4)
    assert rig.kubelet.capacity() == {RESOURCE: 4}
    rig.plugin.set_health("d2", kubelet.UNHEALTHY)
    assert rig.kubelet.wait_for(lambda k: k.allocatable() == {RESOURCE: 3})
    assert rig.kubelet.capacity() == {RESOURCE: 4}
    rig.plugin.end_streams()  # the plugin went away: every device turns unhealthy
    assert rig.kubelet.wait_for(lambda k: k.allocatable() == {RESOURCE: 0})


def test_preferred_allocation_is_asked_only_when_there_is_a_choice(rig: Rig) -> None:
    rig.register()
    assert rig.listed(4)
    rig.plugin.preferred_answer = ["d3", "bogus"]
    options = rig.kubelet.admit_pod(pod("a", 2))
    assert rig.plugin.preferred_calls == [(["d0", "d1", "d2", "d3"], 2)]
    assert rig.plugin.allocate_calls == [["d3", "d0"]]  # the answer, intersected with the candidates, then filled
    assert options["c"].envs == {"VISIBLE": "d3,d0"}
    assert options["c"].cdi_devices == ["example.com/gpu=d3", "example.com/gpu=d0"]
    rig.kubelet.admit_pod(pod("b", 2))  # exactly two left: no question
    assert len(rig.plugin.preferred_calls) == 1
    assert rig.plugin.allocate_calls[-1] == ["d1", "d2"]
    with pytest.raises(AdmissionError, match="Requested: 1, Available: 0"):
        rig.kubelet.admit_pod(pod("c", 1))
    rig.kubelet.remove_pod("uid-a")
    rig.kubelet.admit_pod(pod("c", 1))


def test_no_preference_without_the_option() -> None:
    root = Path(tempfile.mkdtemp(prefix="dm-"))
    rig = Rig(root, FakePlugin(3, preferred=False))
    try:
        rig.register()
        assert rig.listed(3)
        rig.kubelet.admit_pod(pod("a", 1))
        assert rig.plugin.preferred_calls == []
        assert rig.plugin.allocate_calls == [["d0"]]
    finally:
        rig.close()
        shutil.rmtree(root, ignore_errors=True)


def test_failed_allocate_fails_admission_and_frees_the_devices(rig: Rig) -> None:
    rig.register()
    assert rig.listed(4)
    rig.plugin.fail_allocate = "no pod waits for this"
    with pytest.raises(AdmissionError) as exc:
        rig.kubelet.admit_pod(pod("a", 1))
    assert exc.value.reason == "UnexpectedAdmissionError"
    assert exc.value.message == (
        "Allocate failed due to rpc error: code = FAILED_PRECONDITION desc = no pod waits for this, which is unexpected"
    )
    assert rig.kubelet.allocations() == []


def test_a_resource_no_plugin_serves_is_not_the_device_managers(rig: Rig) -> None:
    """kubelet's isDevicePluginResource: such a resource (a scheduler extender's) allocates nothing."""
    rig.register()
    assert rig.listed(4)
    options = rig.kubelet.admit_pod(
        {
            "metadata": {"name": "x", "uid": "x"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"example.com/other": "1"}}}]},
        }
    )
    assert not options["c"].envs
    assert rig.kubelet.allocations() == []
    assert not rig.plugin.allocate_calls


def test_restart_removes_sockets_keeps_checkpoint_and_needs_re_registration(rig: Rig) -> None:
    rig.register()
    assert rig.listed(4)
    rig.kubelet.admit_pod(pod("a", 1))
    (rig.plugin_dir / "notes.txt").write_text("kept")
    (rig.plugin_dir / "folder").mkdir()
    rig.kubelet.restart()
    names = sorted(p.name for p in rig.plugin_dir.iterdir())
    assert names == ["folder", "kubelet.sock", kubelet.CHECKPOINT_NAME, "notes.txt"]  # fake.sock was removed
    assert rig.kubelet.resources() == []
    assert [(a.pod.name, a.device_ids) for a in rig.kubelet.allocations()] == [("a", ("d0",))]
    rig.serve()  # the plugin notices and serves again on a fresh socket, then registers
    rig.register()
    assert rig.listed(4)
    rig.kubelet.admit_pod(pod("b", 1))
    assert rig.plugin.allocate_calls[-1] == ["d1"]  # d0 is still held by the checkpointed pod


def test_pod_resources_api(rig: Rig) -> None:
    rig.register()
    assert rig.listed(4)
    rig.kubelet.admit_pod(pod("a", 2))
    rig.plugin.set_health("d3", kubelet.UNHEALTHY)
    assert rig.kubelet.wait_for(lambda k: k.allocatable() == {RESOURCE: 3})
    socket = rig.root / "pr.sock"
    running = [(PodIdentity("ns", "a", "uid-a"), ["c"]), (PodIdentity("ns", "idle", "uid-i"), ["main"])]
    server = serve_pod_resources(rig.kubelet, socket, lambda: running)
    try:
        with grpc.insecure_channel(kubelet.unix_target(str(socket))) as channel:
            stub = pr_grpc.PodResourcesListerStub(channel)
            listed = stub.List(pr.ListPodResourcesRequest(), timeout=5).pod_resources
            allocatable = stub.GetAllocatableResources(pr.AllocatableResourcesRequest(), timeout=5).devices
            one = stub.Get(pr.GetPodResourcesRequest(pod_name="a", pod_namespace="ns"), timeout=5).pod_resources
            with pytest.raises(grpc.RpcError) as missing:
                stub.Get(pr.GetPodResourcesRequest(pod_name="zz", pod_namespace="ns"), timeout=5)
    finally:
        server.stop(0).wait()
    summary = [
        (p.name, [(c.name, [(d.resource_name, list(d.device_ids)) for d in c.devices]) for c in p.containers])
        for p in listed
    ]
    assert summary == [("a", [("c", [(RESOURCE, ["d0", "d1"])])]), ("idle", [("main", [])])]
    assert [(d.resource_name, list(d.device_ids)) for d in allocatable] == [(RESOURCE, ["d0", "d1", "d2"])]
    assert one.name == "a"
    assert missing.value.code() is grpc.StatusCode.NOT_FOUND  # type: ignore[attr-defined]


def test_device_counts_are_read_as_quantities() -> None:
    """The API server stores quantities in canonical form (a count of 3000 reads back as 3k), and
    kubelet reads them as quantities: such a count is whole, a fraction is refused."""
    container = {"resources": {"limits": {"example.com/mem": "3k", "example.com/gpu": "2", "cpu": "500m"}}}
    assert _resource_amounts(container) == {"example.com/mem": 3000, "example.com/gpu": 2}
    with pytest.raises(AdmissionError, match="not a whole number"):
        _resource_amounts({"resources": {"limits": {"example.com/gpu": "1500m"}}})


def test_the_health_of_held_devices_and_who_is_told_when_it_changes(rig: Rig) -> None:
    """KEP-4680's device plugin half: a pod's held IDs with their latest health; a change to a held device
    tells the listeners which pods hold it, a change to a free one tells nobody; a stream that ends
    makes every held device unhealthy."""
    told: list[set[str]] = []
    rig.kubelet.on_health.append(told.append)
    rig.register()
    assert rig.listed(4)
    rig.plugin.preferred_answer = ["d1", "d2"]
    rig.kubelet.admit_pod(pod("a", 2))
    rig.plugin.preferred_answer = ["d0"]
    rig.kubelet.admit_pod(pod("b", 1))
    assert rig.kubelet.container_health("uid-a") == {"c": {RESOURCE: {"d1": "Healthy", "d2": "Healthy"}}}
    assert rig.kubelet.container_health("nobody") == {}
    rig.plugin.set_health("d3", kubelet.UNHEALTHY)  # nobody holds d3
    assert rig.kubelet.wait_for(lambda k: k.devices(RESOURCE)["d3"] == kubelet.UNHEALTHY)
    rig.plugin.set_health("d2", kubelet.UNHEALTHY)
    assert rig.kubelet.wait_for(lambda k: k.container_health("uid-a")["c"][RESOURCE]["d2"] == kubelet.UNHEALTHY)
    wait_for(lambda: told == [{"uid-a"}], what="the holder of d2 told")  # listeners run after the lock
    assert rig.kubelet.container_health("uid-b") == {"c": {RESOURCE: {"d0": "Healthy"}}}
    rig.plugin.end_streams()
    assert rig.kubelet.wait_for(lambda k: k.container_health("uid-b")["c"][RESOURCE]["d0"] == kubelet.UNHEALTHY)
    wait_for(lambda: told[-1] == {"uid-a", "uid-b"}, what="both holders told")  # d1 and d0 went with the stream

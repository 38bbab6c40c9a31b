"""The runtime over real gRPC on a unix socket: status codes, streams, the client helper's feature checks."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from runtime_helpers import NODE, RuntimeFactory

from runtimekit.api.runtime_client import FeatureUnavailable, RuntimeCallError, RuntimeClient, Share
from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.api.runtimekit.v1 import runtime_pb2_grpc as pb_grpc
from runtimekit.model import simulated_uuid
from runtimekit.runtime.daemon import RuntimeDaemon
from runtimekit.runtime.service import NodeRuntime

GPU0 = simulated_uuid(NODE, 0)
GPU1 = simulated_uuid(NODE, 1)
Serve = Callable[[NodeRuntime], tuple[RuntimeDaemon, RuntimeClient]]


@pytest.fixture
def client(make_runtime: RuntimeFactory, serve_runtime: Serve) -> RuntimeClient:
    return serve_runtime(make_runtime(start=False))[1]


def code_of(call: Callable[[], object]) -> grpc.StatusCode:
    with pytest.raises(RuntimeCallError) as exc:
        call()
    return exc.value.code


def test_version_and_devices(client: RuntimeClient) -> None:
    version = client.version()
    assert (version.runtime_version, version.api_level, version.backend, version.node_name) == (
        "0.1.0",
        1,
        "simulated",
        NODE,
    )
    assert {"allocate", "watch-devices", "fault-injection"} <= version.features
    devices = client.list_devices()
    assert [(d.index, d.uuid, d.model, d.health) for d in devices] == [
        (0, GPU0, "H200", pb.HEALTH_HEALTHY),
        (1, GPU1, "H200", pb.HEALTH_HEALTHY),
    ]


def test_bad_requests_get_status_codes_and_the_server_keeps_serving(client: RuntimeClient) -> None:
    def alloc(uid: str, *shares: Share, name: str = "p") -> pb.AllocateResponse:
        return client.allocate("default", name, uid, "main", shares)

    assert code_of(lambda: alloc("u1", Share(GPU0, -5, 10))) is grpc.StatusCode.INVALID_ARGUMENT
    assert code_of(lambda: alloc("u1", Share("GPU-x", 5, 10))) is grpc.StatusCode.NOT_FOUND
    assert code_of(lambda: alloc("", Share(GPU0, 5, 10))) is grpc.StatusCode.INVALID_ARGUMENT
    assert code_of(lambda: alloc("u1")) is grpc.StatusCode.INVALID_ARGUMENT
    alloc("u1", Share(GPU0, 800, 10))
    assert code_of(lambda: alloc("u2", Share(GPU0, 300, 10))) is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert code_of(lambda: alloc("u1", Share(GPU0, 700, 10))) is grpc.StatusCode.FAILED_PRECONDITION
    client.disable("test")
    with pytest.raises(RuntimeCallError) as exc:
        alloc("u3", Share(GPU1, 100, 10))
    assert exc.value.code is grpc.StatusCode.FAILED_PRECONDITION
    assert "disabled (test)" in exc.value.details
    client.enable("")
    assert alloc("u3", Share(GPU1, 100, 10)).allocation.pod.uid == "u3"
    assert code_of(lambda: client.set_device_health("GPU-x", False, "r")) is grpc.StatusCode.NOT_FOUND
    assert code_of(lambda: client.inject_fault(pb.FAULT_KIND_XID, 9, xid=79)) is grpc.StatusCode.INVALID_ARGUMENT
    assert len(client.list_allocations()) == 2


@pytest.mark.parametrize(
    ("field", "namespace", "name", "container", "resource"),
    [
        pytest.param("container name", "default", "p", "c" * 2**20, "", id="1MB-container"),
        pytest.param("container name", "default", "p", "Main_1", "", id="container-not-a-label"),
        pytest.param("pod name", "default", "p" * 2**20, "main", "", id="1MB-pod-name"),
        pytest.param("pod namespace", "a.b", "p", "main", "", id="namespace-not-a-label"),
        pytest.param("resource name", "default", "p", "main", "example.com/" + "r" * 2**20, id="1MB-resource"),
        pytest.param("resource name", "default", "p", "main", "gpu", id="resource-without-domain"),
    ],
)
def test_names_kubelet_could_not_send_are_refused_by_name_and_the_server_keeps_serving(
    client: RuntimeClient, field: str, namespace: str, name: str, container: str, resource: str
) -> None:
    with pytest.raises(RuntimeCallError) as exc:
        client.allocate(namespace, name, "u1", container, [Share(GPU0, 100, 10)], resource_name=resource)
    assert exc.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert f"Allocate: {field} " in exc.value.details
    assert len(exc.value.details) < 300, "the message quotes the start of a long name, not all of it"
    assert client.list_allocations() == []
    answer = client.allocate("default", "p", "u1", "main", [Share(GPU0, 100, 10)], resource_name="aliyun.com/gpu")
    assert answer.allocation.container == "main"
    with pytest.raises(RuntimeCallError) as exc:
        client.release("u1", "c" * 2**20)
    assert exc.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert len(client.list_allocations()) == 1


def test_unexpected_errors_are_internal_and_not_fatal(
    make_runtime: RuntimeFactory, serve_runtime: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = make_runtime(start=False)
    _, client = serve_runtime(runtime)

    def broken() -> object:
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(runtime, "allocations", broken)
    with pytest.raises(RuntimeCallError, match="ZeroDivisionError: boom") as exc:
        client.list_allocations()
    assert exc.value.code is grpc.StatusCode.INTERNAL
    assert len(client.list_devices()) == 2


def test_allocate_answer_and_release(client: RuntimeClient) -> None:
    answer = client.allocate("ns", "p", "u1", "main", [Share(GPU1, 250, 4096)], "aliyun.com/gpu-core.percentage")
    assert answer.envs["NVIDIA_VISIBLE_DEVICES"] == GPU1
    assert list(answer.cdi_devices) == [f"nvidia.com/gpu={GPU1}"]
    assert answer.devices[0].host_path == "/dev/nvidia1"
    shares = [(s.uuid, s.index, s.core_milli, s.memory_mib) for s in answer.allocation.shares]
    assert shares == [(GPU1, 1, 250, 4096)]
    assert list(answer.allocation.resource_names) == ["aliyun.com/gpu-core.percentage"]
    again = client.allocate("ns", "p", "u1", "main", [Share(GPU1, 250, 4096)], "aliyun.com/gpu-memory")
    assert dict(again.envs) == dict(answer.envs)
    assert list(client.list_allocations()[0].resource_names) == [
        "aliyun.com/gpu-core.percentage",
        "aliyun.com/gpu-memory",
    ]
    assert client.release("u1") == 1
    assert client.release("u1") == 0
    assert client.list_allocations() == []


def test_watch_devices_streams_health_changes(client: RuntimeClient) -> None:
    """Each change is the next message of the stream (how fast: benchmarks/bench_deviceplugin.py)."""
    watch = client.watch_devices()
    stream = iter(watch)
    first = next(stream)
    assert [d.health for d in first.devices] == [pb.HEALTH_HEALTHY, pb.HEALTH_HEALTHY]
    client.inject_fault(pb.FAULT_KIND_XID, 1, xid=79)
    second = next(stream)
    assert second.generation > first.generation
    assert (second.devices[1].health, second.devices[1].health_reason) == (pb.HEALTH_UNHEALTHY, "XID 79")
    client.set_device_health(GPU1, True, "reset done", "exporter")
    third = next(stream)
    assert (third.devices[1].health, third.devices[1].health_reason) == (pb.HEALTH_HEALTHY, "reset done (by exporter)")
    watch.cancel()
    assert list(stream) == []


def test_exporter_data_and_status(client: RuntimeClient) -> None:
    client.allocate("ns", "p", "u1", "c", [Share(GPU0, 500, 1000)])
    client.inject_fault(pb.FAULT_KIND_XID, 0, xid=31)
    data = client.exporter_data()
    assert data.node_name == NODE
    assert [(g.index, g.xid_event_count, [x.xid for x in g.xid_events]) for g in data.gpus] == [
        (0, 1, [31]),
        (1, 0, []),
    ]
    assert [(a.namespace, a.pod, a.container, a.gpu_uuid, a.core_milli, a.memory_mib) for a in data.allocations] == [
        ("ns", "p", "c", GPU0, 500, 1000)
    ]
    status = client.status()
    assert (status.enabled, status.checkpoint, status.allocation_count) == (True, pb.CHECKPOINT_STATE_OK, 1)
    assert status.mps_daemon == pb.MPS_DAEMON_STATE_NOT_USED
    assert status.protocol_fingerprint == client.version().protocol_fingerprint


def test_restart_over_grpc_keeps_allocations(make_runtime: RuntimeFactory, serve_runtime: Serve) -> None:
    daemon, client = serve_runtime(make_runtime(start=False))
    client.allocate("ns", "p", "u1", "main", [Share(GPU0, 1000, 143771)])
    before = client.list_allocations()
    daemon.stop()
    _, again = serve_runtime(make_runtime(start=False))
    assert again.list_allocations() == before
    assert again.status().checkpoint == pb.CHECKPOINT_STATE_OK
    with pytest.raises(RuntimeCallError) as exc:
        again.allocate("ns", "q", "u2", "main", [Share(GPU0, 10, 10)])
    assert exc.value.code is grpc.StatusCode.RESOURCE_EXHAUSTED


def test_client_refuses_a_feature_the_runtime_lacks(make_runtime: RuntimeFactory, serve_runtime: Serve) -> None:
    _, client = serve_runtime(make_runtime(start=False, injector=False))
    with pytest.raises(FeatureUnavailable) as exc:
        client.inject_fault(pb.FAULT_KIND_GPU_LOST, 0)
    assert exc.value.feature == "fault-injection"
    assert "runtime version 0.1.0 is running" in str(exc.value)
    assert "'fault-injection' needs runtime 0.1.0 or newer" in str(exc.value)


class OldRuntime(pb_grpc.RuntimeServiceServicer):
    """A runtime from before the allocation API: it knows GetVersion and ListDevices only."""

    def GetVersion(self, request: pb.GetVersionRequest, context: grpc.ServicerContext) -> pb.GetVersionResponse:
        return pb.GetVersionResponse(runtime_version="0.0.9", api_level=1, features=["devices"])

    def ListDevices(self, request: pb.ListDevicesRequest, context: grpc.ServicerContext) -> pb.ListDevicesResponse:
        return pb.ListDevicesResponse(devices=[pb.Device(index=0, uuid="GPU-old")])


@pytest.fixture
def old_runtime(short_dir: Path) -> Iterator[str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_RuntimeServiceServicer_to_server(OldRuntime(), server)
    socket = str(short_dir / "old.sock")
    server.add_insecure_port(f"unix://{socket}")
    server.start()
    yield socket
    server.stop(0).wait()


def test_client_names_the_feature_and_both_versions_against_an_old_runtime(old_runtime: str) -> None:
    with RuntimeClient(old_runtime) as client:
        assert [d.uuid for d in client.list_devices()] == ["GPU-old"]
        with pytest.raises(FeatureUnavailable) as exc:
            client.allocate("ns", "p", "u", "c", [Share("GPU-old", 1, 1)])
        assert str(exc.value) == (
            "the runtime does not offer feature 'allocate': runtime version 0.0.9 is running, "
            "'allocate' needs runtime 0.1.0 or newer"
        )
        with pytest.raises(FeatureUnavailable, match="'watch-devices'"):
            client.watch_devices()


def test_unreachable_runtime_is_a_call_error(short_dir: Path) -> None:
    with RuntimeClient(str(short_dir / "nobody.sock"), timeout_s=0.5) as client:
        assert not client.wait_ready(0.1)
        with pytest.raises(RuntimeCallError) as exc:
            client.version()
        assert exc.value.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)

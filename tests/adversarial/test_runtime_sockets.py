"""The node runtime's sockets under abuse: open WatchDevices streams do not starve the calls that
start pods, and the exporter socket refuses everything but reads and health marks.

The runtime runs as `runtimekit runtime` builds it (simulated GPUs), served on real unix sockets and
called through real gRPC stubs."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from runtimekit.api.kubelet import unix_target
from runtimekit.api.runtime_client import RuntimeCallError, RuntimeClient, Share
from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.api.runtimekit.v1 import runtime_pb2_grpc as pb_grpc
from runtimekit.model import simulated_uuid
from runtimekit.runtime.daemon import RuntimeDaemon, RuntimeOptions, build_runtime

NODE = "node-a"
GPU0 = simulated_uuid(NODE, 0)
STREAMS = 200
DEADLINE_S = 120.0  # only so that a starved call fails instead of hanging the suite


@pytest.fixture
def folder() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="rk-"))  # short: unix socket paths stay under 108 bytes
    yield path
    shutil.rmtree(path, ignore_errors=True)


def start(folder: Path, group: int | None = None) -> RuntimeDaemon:
    options = RuntimeOptions("simulated", str(folder / "runtime.sock"), folder / "state", NODE, simulate_gpus="2xH200")
    return RuntimeDaemon(build_runtime(options), options.socket_path, 0, exporter_group=group).start()


@pytest.fixture
def daemon(folder: Path) -> Iterator[RuntimeDaemon]:
    started = start(folder)
    yield started
    started.stop()


def test_200_open_watch_streams_leave_allocate_answering(daemon: RuntimeDaemon) -> None:
    channel = grpc.insecure_channel(unix_target(daemon.socket_path))
    stub = pb_grpc.RuntimeServiceStub(channel)
    calls, streams = [], []
    try:
        for _ in range(STREAMS):
            call = stub.WatchDevices(pb.WatchDevicesRequest(), timeout=DEADLINE_S)
            stream = iter(call)
            first = next(stream)  # the stream is open and being served
            calls.append(call)
            streams.append((stream, first.generation))
        with RuntimeClient(daemon.socket_path, timeout_s=DEADLINE_S) as client:
            answer = client.allocate("ns", "p", "uid-1", "main", [Share(GPU0, 250, 1024)])
            assert [g.uuid for g in answer.allocation.shares] == [GPU0]
            assert client.status().allocation_count == 1
            client.inject_fault(pb.FAULT_KIND_XID, 0, xid=79)
            # every one of the streams still gets the change
            for stream, generation in streams:
                change = next(stream)
                assert change.generation > generation
                assert change.devices[0].health == pb.HEALTH_UNHEALTHY
            assert client.release("uid-1") == 1
    finally:
        for call in calls:
            call.cancel()
        channel.close()


EXPORTER_ALLOWED: list[tuple[str, Callable[[RuntimeClient], object]]] = [
    ("GetVersion", lambda c: c.version(refresh=True)),
    ("ListDevices", lambda c: c.list_devices()),
    ("ListAllocations", lambda c: c.list_allocations()),
    ("ExporterGetDataList", lambda c: c.exporter_data()),
    ("GetStatus", lambda c: c.status()),
    ("SetDeviceHealth", lambda c: c.set_device_health(GPU0, False, "too hot", "exporter")),
]
EXPORTER_REFUSED: list[tuple[str, Callable[[RuntimeClient], object]]] = [
    ("Allocate", lambda c: c.allocate("ns", "q", "uid-2", "main", [Share(GPU0, 500, 1024)])),
    ("Release", lambda c: c.release("uid-1")),
    ("Disable", lambda c: c.disable("taken over")),
    ("Enable", lambda c: c.enable("taken over")),
    ("InjectFault", lambda c: c.inject_fault(pb.FAULT_KIND_GPU_LOST, 0)),
]


@pytest.mark.parametrize(("method", "call"), EXPORTER_ALLOWED, ids=[m for m, _ in EXPORTER_ALLOWED])
def test_the_exporter_socket_serves_reads_and_health_marks(
    daemon: RuntimeDaemon, method: str, call: Callable[[RuntimeClient], object]
) -> None:
    assert daemon.exporter_socket_path == str(Path(daemon.socket_path).parent / "exporter" / "runtime.sock")
    with RuntimeClient(daemon.exporter_socket_path, timeout_s=10.0) as exporter:
        call(exporter)


@pytest.mark.parametrize(("method", "call"), EXPORTER_REFUSED, ids=[m for m, _ in EXPORTER_REFUSED])
def test_the_exporter_socket_refuses_what_changes_allocations_or_the_runtime(
    daemon: RuntimeDaemon, method: str, call: Callable[[RuntimeClient], object]
) -> None:
    with RuntimeClient(daemon.socket_path, timeout_s=10.0) as main:
        main.allocate("ns", "p", "uid-1", "main", [Share(GPU0, 250, 1024)])
        before = (main.list_allocations(), main.status().enabled, [d.health for d in main.list_devices()])
        with (
            RuntimeClient(daemon.exporter_socket_path, timeout_s=10.0) as exporter,
            pytest.raises(RuntimeCallError) as refused,
        ):
            call(exporter)
        assert refused.value.code == grpc.StatusCode.PERMISSION_DENIED
        assert f"{method} is not served on the runtime's exporter socket" in refused.value.details
        assert (main.list_allocations(), main.status().enabled, [d.health for d in main.list_devices()]) == before
        call(main)  # the main socket serves it


def test_socket_modes(folder: Path) -> None:
    daemon = start(folder, group=os.getgid())
    try:
        main, exporter = Path(daemon.socket_path).stat(), Path(daemon.exporter_socket_path).stat()
        assert stat.S_IMODE(main.st_mode) == 0o660
        assert (stat.S_IMODE(exporter.st_mode), exporter.st_gid) == (0o660, os.getgid())
    finally:
        daemon.stop()
    assert not Path(daemon.socket_path).exists()
    assert not Path(daemon.exporter_socket_path).exists()


def test_without_a_group_the_exporter_socket_is_the_runtimes_own_group_not_world_writable(folder: Path) -> None:
    daemon = start(folder)
    try:
        exporter = Path(daemon.exporter_socket_path).stat()
        assert (stat.S_IMODE(exporter.st_mode), exporter.st_gid) == (0o660, os.getegid())
        with RuntimeClient(daemon.exporter_socket_path, timeout_s=10.0) as client:  # its own user still reaches it
            assert client.list_devices()
    finally:
        daemon.stop()

"""The typed client of the node runtime's gRPC API (`runtimekit.v1`), over its unix socket.

Used by the device plugin, the exporter, the controller's job-agent and `runtimekit runtime-admin`.
Every call checks, once per client, that the runtime offers the feature the call needs
(`runtime_features.FEATURES`) and raises `FeatureUnavailable` naming the feature and both versions
when it does not. A failed RPC raises `RuntimeCallError` carrying the gRPC status code and the
runtime's message. The client is thread-safe (a gRPC channel is).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol, TypeVar

import grpc

from runtimekit.api.kubelet import unix_target
from runtimekit.api.runtime_features import FEATURES
from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.api.runtimekit.v1 import runtime_pb2_grpc as pb_grpc

T = TypeVar("T")


class RuntimeCallError(Exception):
    """An RPC to the runtime failed; `code` is the gRPC status, `details` the runtime's message."""

    def __init__(self, method: str, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"runtime {method}: {code.name}: {details}")
        self.method = method
        self.code = code
        self.details = details


class FeatureUnavailable(Exception):
    """The runtime does not offer a feature this client needs."""

    def __init__(self, feature: str, runtime_version: str, minimum: str) -> None:
        super().__init__(
            f"the runtime does not offer feature {feature!r}: runtime version {runtime_version} is running, "
            f"{feature!r} needs runtime {minimum} or newer"
        )
        self.feature = feature
        self.runtime_version = runtime_version
        self.minimum = minimum


@dataclass(frozen=True)
class RuntimeVersion:
    """What GetVersion reports."""

    runtime_version: str
    api_level: int
    features: frozenset[str]
    backend: str
    isolation: str
    node_name: str
    protocol_fingerprint: str

    @classmethod
    def from_message(cls, msg: pb.GetVersionResponse) -> RuntimeVersion:
        return cls(
            msg.runtime_version,
            msg.api_level,
            frozenset(msg.features),
            msg.backend,
            msg.isolation,
            msg.node_name,
            msg.protocol_fingerprint,
        )

    def require(self, *features: str) -> None:
        """Raise FeatureUnavailable for the first of `features` the runtime lacks.

        A feature missing from the client's own table is a bug in the caller (KeyError).
        """
        for feature in features:
            minimum = FEATURES[feature]
            if feature not in self.features:
                raise FeatureUnavailable(feature, self.runtime_version, minimum)


@dataclass(frozen=True)
class Share:
    """A share to allocate: a GPU (or MIG device) UUID with core milli and memory MiB. A MIG slot also
    names its GPU, profile and start slice (the UUID is empty on a GPU in dynamic MIG mode)."""

    uuid: str
    core_milli: int
    memory_mib: int
    parent_uuid: str = ""
    mig_profile: str = ""
    mig_start: int = -1

    @property
    def is_mig(self) -> bool:
        return bool(self.parent_uuid or self.mig_profile)


def share_message(share: Share | pb.GpuShare) -> pb.GpuShare:
    """The wire form of a share (a `pb.GpuShare` passes through); `mig_start` is sent only with a profile."""
    if isinstance(share, pb.GpuShare):
        return share
    return pb.GpuShare(
        uuid=share.uuid,
        core_milli=share.core_milli,
        memory_mib=share.memory_mib,
        parent_uuid=share.parent_uuid,
        mig_profile=share.mig_profile,
        mig_start=share.mig_start if share.mig_profile else 0,
    )


class RuntimeApi(Protocol):
    """The runtime calls the device plugin and the DRA plugin make (`RuntimeClient` has them; tests give fakes)."""

    def allocate(
        self,
        namespace: str,
        name: str,
        uid: str,
        container: str,
        shares: Sequence[Share],
        resource_name: str = "",
        device_ids: Sequence[str] = (),
    ) -> pb.AllocateResponse: ...

    def release(self, uid: str, container: str = "", namespace: str = "", name: str = "") -> int: ...


class RuntimeClient:
    """A connection to one runtime socket. Close it (or use it as a context manager) when done."""

    def __init__(self, socket_path: str, timeout_s: float = 5.0, check_features: bool = True) -> None:
        self.socket_path = socket_path
        self.timeout_s = timeout_s
        self._check = check_features
        self._channel = grpc.insecure_channel(unix_target(socket_path))
        self._runtime = pb_grpc.RuntimeServiceStub(self._channel)
        self._exporter = pb_grpc.ExporterServiceStub(self._channel)
        self._config = pb_grpc.ConfigServiceStub(self._channel)
        self._admin = pb_grpc.AdminServiceStub(self._channel)
        self._version: RuntimeVersion | None = None
        self._lock = threading.Lock()

    def __enter__(self) -> RuntimeClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def wait_ready(self, timeout_s: float) -> bool:
        """Wait until the socket accepts a connection; False after `timeout_s`."""
        try:
            grpc.channel_ready_future(self._channel).result(timeout=timeout_s)
        except grpc.FutureTimeoutError:
            return False
        return True

    # -- versions and features ---------------------------------------------------------------
    def version(self, refresh: bool = False) -> RuntimeVersion:
        """GetVersion, cached after the first call unless `refresh`."""
        with self._lock:
            if self._version is None or refresh:
                msg: pb.GetVersionResponse = self._call("GetVersion", self._runtime.GetVersion, pb.GetVersionRequest())
                self._version = RuntimeVersion.from_message(msg)
            return self._version

    def require(self, *features: str) -> RuntimeVersion:
        """The runtime's version, after checking it offers every one of `features`."""
        version = self.version()
        version.require(*features)
        return version

    def _need(self, feature: str) -> None:
        if self._check:
            self.require(feature)

    def _call(self, method: str, fn: Any, request: Any, timeout_s: float | None = None) -> Any:
        try:
            return fn(request, timeout=timeout_s or self.timeout_s)
        except grpc.RpcError as exc:
            raise _call_error(method, exc) from None

    # -- RuntimeService ------------------------------------------------------------------------
    def list_devices(self) -> list[pb.Device]:
        self._need("devices")
        msg: pb.ListDevicesResponse = self._call("ListDevices", self._runtime.ListDevices, pb.ListDevicesRequest())
        return list(msg.devices)

    def watch_devices(self) -> DeviceWatch:
        """Open the WatchDevices stream. Iterate it; `cancel()` it from any thread to end it."""
        self._need("watch-devices")
        return DeviceWatch(self._runtime.WatchDevices(pb.WatchDevicesRequest()))

    def allocate(
        self,
        namespace: str,
        name: str,
        uid: str,
        container: str,
        shares: Iterable[Share | pb.GpuShare],
        resource_name: str = "",
        device_ids: Sequence[str] = (),
    ) -> pb.AllocateResponse:
        self._need("allocate")
        messages = [share_message(s) for s in shares]
        if any(m.parent_uuid or m.mig_profile for m in messages):
            self._need("mig-shares")  # an older runtime would drop the MIG fields without a word
        request = pb.AllocateRequest(
            pod=pb.PodIdentity(namespace=namespace, name=name, uid=uid),
            container=container,
            shares=messages,
            resource_name=resource_name,
            device_ids=list(device_ids),
        )
        msg: pb.AllocateResponse = self._call("Allocate", self._runtime.Allocate, request)
        return msg

    def release(self, uid: str, container: str = "", namespace: str = "", name: str = "") -> int:
        """Release a container's allocation (or, with no container, the whole pod's); returns how many."""
        self._need("allocate")
        request = pb.ReleaseRequest(pod=pb.PodIdentity(namespace=namespace, name=name, uid=uid), container=container)
        msg: pb.ReleaseResponse = self._call("Release", self._runtime.Release, request)
        return msg.released

    def list_allocations(self) -> list[pb.Allocation]:
        self._need("allocate")
        request = pb.ListAllocationsRequest()
        msg: pb.ListAllocationsResponse = self._call("ListAllocations", self._runtime.ListAllocations, request)
        return list(msg.allocations)

    def set_device_health(self, uuid: str, healthy: bool, reason: str, source: str = "") -> pb.Device:
        self._need("device-health")
        request = pb.SetDeviceHealthRequest(uuid=uuid, healthy=healthy, reason=reason, source=source)
        msg: pb.SetDeviceHealthResponse = self._call("SetDeviceHealth", self._runtime.SetDeviceHealth, request)
        return msg.device

    # -- ExporterService -----------------------------------------------------------------------
    def exporter_data(self) -> pb.ExporterGetDataListResponse:
        self._need("exporter-data")
        request = pb.ExporterGetDataListRequest()
        msg: pb.ExporterGetDataListResponse = self._call(
            "ExporterGetDataList", self._exporter.ExporterGetDataList, request
        )
        return msg

    # -- ConfigService -------------------------------------------------------------------------
    def enable(self, reason: str = "") -> pb.GetStatusResponse:
        self._need("config")
        msg: pb.GetStatusResponse = self._call("Enable", self._config.Enable, pb.EnableRequest(reason=reason))
        return msg

    def disable(self, reason: str = "") -> pb.GetStatusResponse:
        self._need("config")
        msg: pb.GetStatusResponse = self._call("Disable", self._config.Disable, pb.DisableRequest(reason=reason))
        return msg

    def status(self) -> pb.GetStatusResponse:
        self._need("config")
        msg: pb.GetStatusResponse = self._call("GetStatus", self._config.GetStatus, pb.GetStatusRequest())
        return msg

    # -- AdminService --------------------------------------------------------------------------
    def inject_fault(
        self, kind: pb.FaultKind.ValueType, gpu_index: int, xid: int = 0, uncorrectable: bool = False, count: int = 1
    ) -> pb.Device:
        self._need("fault-injection")
        request = pb.InjectFaultRequest(
            kind=kind, gpu_index=gpu_index, xid=xid, uncorrectable=uncorrectable, count=count
        )
        msg: pb.InjectFaultResponse = self._call("InjectFault", self._admin.InjectFault, request)
        return msg.device


class DeviceWatch:
    """An open WatchDevices stream: iterate for device lists; `cancel()` ends the iteration."""

    def __init__(self, call: Any) -> None:
        self._call = call

    def __iter__(self) -> Iterator[pb.WatchDevicesResponse]:
        try:
            yield from self._call
        except grpc.RpcError as exc:
            if exc.code() is not grpc.StatusCode.CANCELLED:
                raise _call_error("WatchDevices", exc) from None

    def cancel(self) -> None:
        self._call.cancel()


def _call_error(method: str, exc: grpc.RpcError) -> RuntimeCallError:
    code = exc.code() if isinstance(exc, grpc.Call) else grpc.StatusCode.UNKNOWN
    details = exc.details() if isinstance(exc, grpc.Call) else str(exc)
    return RuntimeCallError(method, code, details or "")

"""gRPC adapters of the runtime: translate `runtimekit.v1` messages to `NodeRuntime` calls and back.

No logic lives here. A `ServiceError` becomes the gRPC status of its code with its message; any
other exception is logged and answered INTERNAL, so a bad request never stops the server.
`grpc_server.serve()` serves these servicers (WatchDevices there is an asyncio stream of its own).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TypeVar

import grpc

from runtimekit.api.runtime_client import Share
from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.api.runtimekit.v1 import runtime_pb2_grpc as pb_grpc
from runtimekit.base.rpcerrors import Code, ServiceError, grpc_method
from runtimekit.model import MigMode
from runtimekit.runtime.allocations import Allocation, PodRef
from runtimekit.runtime.backend import DeviceInfo, EventKind, Fault
from runtimekit.runtime.devices import DeviceView
from runtimekit.runtime.mig import max_instances
from runtimekit.runtime.mps import MpsState
from runtimekit.runtime.service import NodeRuntime
from runtimekit.runtime.usage import ContainerUsage
from runtimekit.runtime.values import AllocateInput, AllocationState, CheckpointStatus, RuntimeStatus

log = logging.getLogger(__name__)

Msg = TypeVar("Msg")
WATCH_POLL_S = 0.5  # how often an idle WatchDevices stream checks that its client is still there

_MIG = {MigMode.OFF: pb.MIG_MODE_OFF, MigMode.STATIC: pb.MIG_MODE_STATIC, MigMode.DYNAMIC: pb.MIG_MODE_DYNAMIC}
_MPS = {
    MpsState.NOT_USED: pb.MPS_DAEMON_STATE_NOT_USED,
    MpsState.RUNNING: pb.MPS_DAEMON_STATE_RUNNING,
    MpsState.STOPPED: pb.MPS_DAEMON_STATE_STOPPED,
    MpsState.BINARY_MISSING: pb.MPS_DAEMON_STATE_BINARY_MISSING,
    MpsState.FAILED: pb.MPS_DAEMON_STATE_FAILED,
}
_CHECKPOINT = {
    CheckpointStatus.OK: pb.CHECKPOINT_STATE_OK,
    CheckpointStatus.RECOVERED: pb.CHECKPOINT_STATE_RECOVERED,
    CheckpointStatus.UNRECOVERED: pb.CHECKPOINT_STATE_UNRECOVERED,
    CheckpointStatus.INCOMPLETE: pb.CHECKPOINT_STATE_INCOMPLETE,
    CheckpointStatus.UNVERIFIED: pb.CHECKPOINT_STATE_UNVERIFIED,
}
_FAULTS = {
    pb.FAULT_KIND_XID: EventKind.XID,
    pb.FAULT_KIND_ECC: EventKind.ECC,
    pb.FAULT_KIND_GPU_LOST: EventKind.LOST,
    pb.FAULT_KIND_GPU_BACK: EventKind.BACK,
}


rpc = grpc_method("runtime")


# -- message builders ----------------------------------------------------------------------------
def health_message(healthy: bool) -> pb.Health.ValueType:
    return pb.HEALTH_HEALTHY if healthy else pb.HEALTH_UNHEALTHY


def device_message(view: DeviceView) -> pb.Device:
    info = view.info
    health = health_message(view.healthy)
    return pb.Device(
        index=info.index,
        uuid=info.uuid,
        model=info.model,
        product=info.product,
        memory_mib=info.memory_mib,
        health=health,
        health_reason=view.reason,
        mig_mode=_MIG[info.mig_mode],
        mig_devices=[
            pb.MigDevice(
                uuid=m.uuid,
                profile=m.profile,
                gpu_instance_id=m.gpu_instance_id,
                compute_instance_id=m.compute_instance_id,
                memory_mib=m.memory_mib,
                start=m.start,
                health=health,
                dynamic=m.dynamic,
            )
            for m in info.mig_devices
        ],
        minor=info.minor,
        numa_node=info.numa_node,
        mig_profiles=mig_profiles_message(info),
    )


def mig_profiles_message(info: DeviceInfo) -> list[pb.MigProfile]:
    geo = info.mig_geometry
    if geo is None:
        return []
    return [
        pb.MigProfile(
            name=p.name,
            compute_slices=p.compute_slices,
            memory_mib=p.memory_mib,
            size=p.size,
            starts=list(p.starts),
            max_instances=max_instances(geo, p),
        )
        for p in geo.profiles
    ]


def allocation_message(a: Allocation) -> pb.Allocation:
    return pb.Allocation(
        pod=pb.PodIdentity(namespace=a.pod.namespace, name=a.pod.name, uid=a.pod.uid),
        container=a.container,
        shares=[
            pb.GrantedShare(
                uuid=g.uuid,
                index=g.index,
                core_milli=g.core_milli,
                memory_mib=g.memory_mib,
                parent_uuid=g.parent_uuid,
                mig_profile=g.mig_profile,
                mig_start=g.mig_start if g.mig_profile else 0,
                mig_dynamic=g.mig_dynamic,
            )
            for g in a.grants
        ],
        created_unix_ms=a.created_unix_ms,
        device_ids=list(a.device_ids),
        resource_names=list(a.resource_names),
    )


def requested(share: pb.GpuShare) -> Share:
    """A requested share; `mig_start` counts only with a profile (proto3 cannot tell 0 from unset)."""
    start = share.mig_start if share.mig_profile else -1
    return Share(share.uuid, share.core_milli, share.memory_mib, share.parent_uuid, share.mig_profile, start)


def status_message(s: RuntimeStatus) -> pb.GetStatusResponse:
    return pb.GetStatusResponse(
        enabled=s.enabled,
        reason=s.reason,
        isolation=s.isolation,
        mps_daemon=_MPS[s.mps_state],
        mps_message=s.mps_message,
        checkpoint=_CHECKPOINT[s.checkpoint],
        checkpoint_message=s.checkpoint_message,
        allocation_count=s.allocation_count,
        runtime_version=s.version.runtime_version,
        node_name=s.version.node_name,
        protocol_fingerprint=s.version.protocol_fingerprint,
        changed_unix_ms=s.changed_unix_ms,
        last_reconcile_unix_ms=s.last_reconcile_unix_ms,
        last_reconcile_message=s.last_reconcile_message,
        allocations_rebuilt_total=s.state.rebuilt_total,
        journal_torn_lines_total=s.state.torn_total,
        unaccounted=list(s.state.unaccounted),
    )


def state_message(s: AllocationState) -> pb.AllocationState:
    return pb.AllocationState(
        checkpoint=_CHECKPOINT[s.checkpoint],
        allocations_rebuilt_total=s.rebuilt_total,
        journal_torn_lines_total=s.torn_total,
        unaccounted_containers=len(s.unaccounted),
    )


# -- servicers -----------------------------------------------------------------------------------
class RuntimeServicer(pb_grpc.RuntimeServiceServicer):
    def __init__(self, runtime: NodeRuntime) -> None:
        self._rt = runtime

    @rpc
    def GetVersion(self, request: pb.GetVersionRequest, context: grpc.ServicerContext) -> pb.GetVersionResponse:
        v = self._rt.version()
        return pb.GetVersionResponse(
            runtime_version=v.runtime_version,
            api_level=v.api_level,
            features=list(v.features),
            backend=v.backend,
            isolation=v.isolation,
            node_name=v.node_name,
            protocol_fingerprint=v.protocol_fingerprint,
        )

    @rpc
    def ListDevices(self, request: pb.ListDevicesRequest, context: grpc.ServicerContext) -> pb.ListDevicesResponse:
        return pb.ListDevicesResponse(devices=[device_message(d) for d in self._rt.device_snapshot().devices])

    def WatchDevices(
        self, request: pb.WatchDevicesRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.WatchDevicesResponse]:
        table = self._rt.devices
        context.add_callback(table.wake)
        snapshot = table.snapshot()
        while True:
            yield pb.WatchDevicesResponse(
                devices=[device_message(d) for d in snapshot.devices], generation=snapshot.generation
            )
            while True:
                if not context.is_active() or table.closed:
                    return
                changed = table.wait_change(snapshot.generation, WATCH_POLL_S)
                if changed is not None:
                    snapshot = changed
                    break

    @rpc
    def Allocate(self, request: pb.AllocateRequest, context: grpc.ServicerContext) -> pb.AllocateResponse:
        result = self._rt.allocate(
            AllocateInput(
                pod=PodRef(request.pod.namespace, request.pod.name, request.pod.uid),
                container=request.container,
                shares=tuple(requested(s) for s in request.shares),
                resource_name=request.resource_name,
                device_ids=tuple(request.device_ids),
            )
        )
        edits = result.edits
        return pb.AllocateResponse(
            envs=dict(edits.envs),
            mounts=[
                pb.Mount(container_path=m.container_path, host_path=m.host_path, read_only=m.read_only)
                for m in edits.mounts
            ],
            devices=[
                pb.DeviceNode(container_path=d.container_path, host_path=d.host_path, permissions=d.permissions)
                for d in edits.devices
            ],
            cdi_devices=list(edits.cdi_devices),
            annotations=dict(edits.annotations),
            allocation=allocation_message(result.allocation),
        )

    @rpc
    def Release(self, request: pb.ReleaseRequest, context: grpc.ServicerContext) -> pb.ReleaseResponse:
        return pb.ReleaseResponse(released=len(self._rt.release(request.pod.uid, request.container)))

    @rpc
    def ListAllocations(
        self, request: pb.ListAllocationsRequest, context: grpc.ServicerContext
    ) -> pb.ListAllocationsResponse:
        return pb.ListAllocationsResponse(allocations=[allocation_message(a) for a in self._rt.allocations()])

    @rpc
    def SetDeviceHealth(
        self, request: pb.SetDeviceHealthRequest, context: grpc.ServicerContext
    ) -> pb.SetDeviceHealthResponse:
        view = self._rt.set_device_health(request.uuid, request.healthy, request.reason, request.source)
        return pb.SetDeviceHealthResponse(device=device_message(view))


def usage_message(u: ContainerUsage) -> pb.ContainerUsage:
    return pb.ContainerUsage(
        namespace=u.namespace,
        pod=u.pod,
        pod_uid=u.pod_uid,
        container=u.container,
        gpu_uuid=u.gpu_uuid,
        device_uuid=u.device_uuid,
        memory_used_mib=u.memory_used_mib,
        sm_percent=u.sm_percent or 0.0,
        sm_known=u.sm_percent is not None,
        core_milli=u.core_milli,
        memory_mib=u.memory_mib,
        over_share=u.over_share,
        pids=list(u.pids),
    )


class ExporterServicer(pb_grpc.ExporterServiceServicer):
    def __init__(self, runtime: NodeRuntime) -> None:
        self._rt = runtime

    @rpc
    def ExporterGetDataList(
        self, request: pb.ExporterGetDataListRequest, context: grpc.ServicerContext
    ) -> pb.ExporterGetDataListResponse:
        data = self._rt.exporter_data()
        gpus = []
        for g in data.gpus:
            s, info = g.sample, g.view.info
            gpus.append(
                pb.GpuSample(
                    index=info.index,
                    uuid=info.uuid,
                    model=info.model,
                    utilization_percent=s.utilization_percent,
                    memory_used_mib=s.memory_used_mib,
                    memory_total_mib=s.memory_total_mib,
                    temperature_celsius=s.temperature_celsius,
                    power_watts=s.power_watts,
                    ecc_corrected=s.ecc_corrected,
                    ecc_uncorrected=s.ecc_uncorrected,
                    xid_events=[pb.XidEvent(xid=x.xid, unix_ms=x.unix_ms) for x in g.xids],
                    xid_event_count=g.xid_count,
                    health=health_message(g.view.healthy),
                    health_reason=g.view.reason,
                    mig_mode=_MIG[s.mig_mode],
                    memory_utilization_percent=s.memory_utilization_percent,
                    power_limit_watts=s.power_limit_watts,
                    # None leaves an optional field unset: the exporter omits what has no source
                    sm_clock_mhz=s.sm_clock_mhz,
                    memory_clock_mhz=s.memory_clock_mhz,
                    energy_millijoules=s.energy_millijoules,
                    pcie_replays=s.pcie_replays,
                    encoder_utilization_percent=s.encoder_utilization_percent,
                    decoder_utilization_percent=s.decoder_utilization_percent,
                    product=info.product,
                    driver_version=info.driver_version,
                    memory_reserved_mib=s.memory_reserved_mib,
                )
            )
        instances = {m.uuid: m.gpu_instance_id for g in data.gpus for m in g.view.info.mig_devices}
        allocations = [
            pb.AllocationSample(
                namespace=a.pod.namespace,
                pod=a.pod.name,
                container=a.container,
                gpu_uuid=grant.uuid,
                gpu_index=grant.index,
                core_milli=grant.core_milli,
                memory_mib=grant.memory_mib,
                pod_uid=a.pod.uid,
                parent_uuid=grant.parent_uuid,
                mig_profile=grant.mig_profile,
                gpu_instance_id=instances.get(grant.uuid),  # None leaves it unset
            )
            for a in data.allocations
            for grant in a.grants
        ]
        return pb.ExporterGetDataListResponse(
            node_name=data.node_name,
            sampled_unix_ms=data.unix_ms,
            gpus=gpus,
            allocations=allocations,
            state=state_message(data.state),
            container_usage=[usage_message(u) for u in data.usage.containers],
            unattributed=[
                pb.GpuRemainder(
                    gpu_uuid=r.gpu_uuid,
                    memory_mib=r.memory_mib,
                    sm_percent=r.sm_percent or 0.0,
                    sm_known=r.sm_percent is not None,
                )
                for r in data.usage.unattributed
            ],
            usage_source="" if data.usage.source == "none" else data.usage.source,
        )


class ConfigServicer(pb_grpc.ConfigServiceServicer):
    def __init__(self, runtime: NodeRuntime) -> None:
        self._rt = runtime

    @rpc
    def Enable(self, request: pb.EnableRequest, context: grpc.ServicerContext) -> pb.GetStatusResponse:
        return status_message(self._rt.enable(request.reason))

    @rpc
    def Disable(self, request: pb.DisableRequest, context: grpc.ServicerContext) -> pb.GetStatusResponse:
        return status_message(self._rt.disable(request.reason))

    @rpc
    def GetStatus(self, request: pb.GetStatusRequest, context: grpc.ServicerContext) -> pb.GetStatusResponse:
        return status_message(self._rt.status())


class AdminServicer(pb_grpc.AdminServiceServicer):
    def __init__(self, runtime: NodeRuntime) -> None:
        self._rt = runtime

    @rpc
    def InjectFault(self, request: pb.InjectFaultRequest, context: grpc.ServicerContext) -> pb.InjectFaultResponse:
        kind = _FAULTS.get(request.kind)
        if kind is None:
            raise ServiceError(Code.INVALID_ARGUMENT, "InjectFault needs a kind: XID, ECC, GPU_LOST or GPU_BACK")
        fault = Fault(kind, request.gpu_index, request.xid, request.uncorrectable, request.count or 1)
        return pb.InjectFaultResponse(device=device_message(self._rt.inject_fault(fault)))

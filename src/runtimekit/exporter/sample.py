"""One reading of the runtime (`ExporterGetDataList`), cleaned into plain values.

The runtime's data is not trusted to be well formed: NaN or negative readings become "unknown"
(the metric is left out), missing fields take their zero value, allocations on a GPU the node does
not list are kept but labelled with the UUID only. `read_sample` never raises for bad data; it
raises `SampleError` only when the runtime cannot be reached in time.
Callers: the metrics collector and the health detector.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from runtimekit.api.runtime_client import FeatureUnavailable, RuntimeCallError, RuntimeClient
from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb

_MIB = 1024.0 * 1024.0
HEALTH_NAMES = {0: "unknown", 1: "healthy", 2: "unhealthy"}
CHECKPOINT_NAMES = {0: "unknown", 1: "ok", 2: "recovered", 3: "unrecovered", 4: "incomplete", 5: "unverified"}
MIG_NAMES = {0: "unknown", 1: "off", 2: "static", 3: "dynamic"}


class SampleError(Exception):
    """The runtime did not answer (or refused); the message says why."""


def _number(value: float) -> float | None:
    return None if value is None or math.isnan(value) or math.isinf(value) or value < 0 else float(value)


@dataclass(frozen=True)
class Xid:
    xid: int
    unix_ms: int


@dataclass(frozen=True)
class GpuReading:
    index: int
    uuid: str
    model: str
    utilization: float | None  # ratio 0..1
    memory_utilization: float | None
    memory_used_bytes: float | None
    memory_total_bytes: float | None
    temperature_celsius: float | None
    power_watts: float | None
    power_limit_watts: float | None
    ecc_corrected: int
    ecc_uncorrected: int
    xid_count: int
    xids: tuple[Xid, ...]
    healthy: bool | None
    health_reason: str
    mig_mode: str
    # Readings only some GPUs give (None: the runtime sent none, so the metric is left out)
    sm_clock_mhz: float | None = None
    memory_clock_mhz: float | None = None
    energy_millijoules: float | None = None
    pcie_replays: float | None = None
    encoder_utilization: float | None = None  # ratio 0..1
    decoder_utilization: float | None = None
    product: str = ""  # NVML's product name; "" from a runtime too old to send it
    driver_version: str = ""
    memory_reserved_bytes: float | None = None  # the driver's reservation (not in memory_used_bytes)


@dataclass(frozen=True)
class AllocationReading:
    namespace: str
    pod: str
    container: str
    gpu_uuid: str
    gpu_index: str  # "" when the GPU is unknown to the node
    core_ratio: float
    memory_bytes: float
    mig_parent_uuid: str = ""  # a MIG device's physical GPU; "" for a GPU share
    mig_profile: str = ""
    gpu_instance_id: int | None = None

    @property
    def physical_uuid(self) -> str:
        """The physical GPU the grant is on."""
        return self.mig_parent_uuid or self.gpu_uuid


@dataclass(frozen=True)
class ContainerReading:
    """One container's use of one grant (`runtime.usage.ContainerUsage` as the runtime sent it)."""

    namespace: str
    pod: str
    container: str
    gpu_uuid: str
    gpu_index: str  # "" when the GPU is unknown to the node
    device_uuid: str  # the MIG device, else the GPU's UUID
    memory_used_bytes: float
    sm_ratio: float | None  # 0..1 of the GPU; None: unknown
    core_ratio: float  # granted, 0..1
    memory_bytes: float  # granted
    over_share: bool


@dataclass(frozen=True)
class RemainderReading:
    """What no container accounts for on one GPU."""

    gpu_uuid: str
    memory_bytes: float
    sm_ratio: float | None


@dataclass(frozen=True)
class StateReading:
    """How far the runtime trusts its allocations (a runtime too old to say reads as unknown)."""

    checkpoint: str = "unknown"
    rebuilt_total: int = 0
    torn_total: int = 0
    unaccounted: int = 0


@dataclass(frozen=True)
class Sample:
    node: str
    gpus: tuple[GpuReading, ...] = ()
    allocations: tuple[AllocationReading, ...] = ()
    seconds: float = 0.0
    dropped: int = 0  # readings left out as malformed
    extra: dict[str, str] = field(default_factory=dict)
    state: StateReading = StateReading()
    containers: tuple[ContainerReading, ...] = ()
    unattributed: tuple[RemainderReading, ...] = ()
    usage_source: str = ""  # "": the runtime reads no per-container usage (or is too old to)


def _ratio(percent: float) -> float | None:
    value = _number(percent)
    return None if value is None else min(value, 100.0) / 100.0


def read_sample(client: RuntimeClient, node_name: str = "") -> Sample:
    started = time.perf_counter()
    try:
        msg = client.exporter_data()
    except (RuntimeCallError, FeatureUnavailable) as exc:
        raise SampleError(str(exc)) from exc
    mib = 1024.0 * 1024.0
    gpus = []
    dropped = 0
    seen: dict[str, int] = {}
    for g in msg.gpus:
        if not g.uuid or g.uuid in seen:
            dropped += 1
            continue
        seen[g.uuid] = g.index
        used, total = _number(float(g.memory_used_mib)), _number(float(g.memory_total_mib))
        gpus.append(
            GpuReading(
                index=int(g.index),
                uuid=g.uuid,
                model=g.model or "unknown",
                utilization=_ratio(g.utilization_percent),
                memory_utilization=_ratio(g.memory_utilization_percent),
                memory_used_bytes=None if used is None else used * mib,
                memory_total_bytes=None if not total else total * mib,
                temperature_celsius=_number(g.temperature_celsius),
                power_watts=_number(g.power_watts),
                power_limit_watts=_number(g.power_limit_watts) or None,
                ecc_corrected=int(g.ecc_corrected),
                ecc_uncorrected=int(g.ecc_uncorrected),
                xid_count=int(g.xid_event_count),
                xids=tuple(Xid(int(x.xid), int(x.unix_ms)) for x in g.xid_events),
                healthy={1: True, 2: False}.get(int(g.health)),
                health_reason=g.health_reason,
                mig_mode=MIG_NAMES.get(int(g.mig_mode), "unknown"),
                sm_clock_mhz=_number(g.sm_clock_mhz) if g.HasField("sm_clock_mhz") else None,
                memory_clock_mhz=_number(g.memory_clock_mhz) if g.HasField("memory_clock_mhz") else None,
                energy_millijoules=float(g.energy_millijoules) if g.HasField("energy_millijoules") else None,
                pcie_replays=float(g.pcie_replays) if g.HasField("pcie_replays") else None,
                encoder_utilization=(
                    _ratio(g.encoder_utilization_percent) if g.HasField("encoder_utilization_percent") else None
                ),
                decoder_utilization=(
                    _ratio(g.decoder_utilization_percent) if g.HasField("decoder_utilization_percent") else None
                ),
                product=g.product,
                driver_version=g.driver_version,
                memory_reserved_bytes=(
                    float(g.memory_reserved_mib) * mib if g.HasField("memory_reserved_mib") else None
                ),
            )
        )
    allocations = []
    for a in msg.allocations:
        if not a.pod or not a.gpu_uuid or a.core_milli < 0 or a.memory_mib < 0:
            dropped += 1
            continue
        index = str(seen[a.gpu_uuid]) if a.gpu_uuid in seen else ""
        allocations.append(
            AllocationReading(
                a.namespace,
                a.pod,
                a.container,
                a.gpu_uuid,
                index,
                min(a.core_milli, 1000) / 1000.0,
                float(a.memory_mib) * mib,
                a.parent_uuid,
                a.mig_profile,
                int(a.gpu_instance_id) if a.HasField("gpu_instance_id") else None,
            )
        )
    node = node_name or msg.node_name or "unknown"
    s = msg.state
    state = StateReading(
        CHECKPOINT_NAMES.get(int(s.checkpoint), "unknown"),
        int(s.allocations_rebuilt_total),
        int(s.journal_torn_lines_total),
        int(s.unaccounted_containers),
    )
    containers, bad = _containers(msg, seen)
    unattributed = tuple(
        RemainderReading(r.gpu_uuid, float(max(r.memory_mib, 0)) * _MIB, _ratio(r.sm_percent) if r.sm_known else None)
        for r in msg.unattributed
        if r.gpu_uuid in seen
    )
    return Sample(
        node,
        tuple(gpus),
        tuple(allocations),
        time.perf_counter() - started,
        dropped + bad,
        state=state,
        containers=containers,
        unattributed=unattributed,
        usage_source=msg.usage_source,
    )


def _containers(msg: pb.ExporterGetDataListResponse, seen: dict[str, int]) -> tuple[tuple[ContainerReading, ...], int]:
    """The per-container usage readings, and how many were malformed (no pod, negative amounts)."""
    out = []
    bad = 0
    for u in msg.container_usage:
        if not u.pod or not u.gpu_uuid or u.memory_used_mib < 0 or u.core_milli < 0 or u.memory_mib < 0:
            bad += 1
            continue
        out.append(
            ContainerReading(
                u.namespace,
                u.pod,
                u.container,
                u.gpu_uuid,
                str(seen[u.gpu_uuid]) if u.gpu_uuid in seen else "",
                u.device_uuid or u.gpu_uuid,
                float(u.memory_used_mib) * _MIB,
                _ratio(u.sm_percent) if u.sm_known else None,
                min(u.core_milli, 1000) / 1000.0,
                float(u.memory_mib) * _MIB,
                bool(u.over_share),
            )
        )
    return tuple(out), bad

"""The values the node runtime service (`service.NodeRuntime`) is built with, takes and returns:
plain frozen records, so the gRPC adapters, the daemon and tests share them without the logic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from runtimekit import __version__
from runtimekit.api.runtime_client import Share
from runtimekit.protocol import KitProtocol
from runtimekit.runtime.allocations import Allocation, PodRef
from runtimekit.runtime.backend import GpuSample
from runtimekit.runtime.devices import DeviceView, XidRecord
from runtimekit.runtime.isolation import ContainerEdits
from runtimekit.runtime.mps import MpsState
from runtimekit.runtime.usage import UsageReading


class CheckpointStatus(StrEnum):
    OK = "ok"  # loaded (or none yet) and, where the node's pods could be asked, matching them
    RECOVERED = "recovered"  # was damaged or missed containers; rebuilt from the node's pods
    UNRECOVERED = "unrecovered"  # corrupt and not rebuilt yet: new allocations refused
    INCOMPLETE = "incomplete"  # containers hold devices no allocation covers, and none could be rebuilt
    UNVERIFIED = "unverified"  # not compared with the node's pods yet: no source answered since start

    @property
    def trusted(self) -> bool:
        """Whether the runtime's allocations cover what runs on the node (health and readiness say ok)."""
        return self in (CheckpointStatus.OK, CheckpointStatus.RECOVERED)


@dataclass(frozen=True)
class AllocationState:
    """How far the allocations can be trusted: the state, and the counters the exporter shows."""

    checkpoint: CheckpointStatus = CheckpointStatus.OK
    rebuilt_total: int = 0  # allocations rebuilt from the node's pods since the runtime started
    torn_total: int = 0  # torn last journal lines found at start
    unaccounted: tuple[str, ...] = ()  # containers holding devices without an allocation, with why


@dataclass(frozen=True)
class RuntimeSettings:
    node_name: str
    state_dir: Path
    protocol: KitProtocol
    runtime_version: str = __version__
    reconcile_grace_s: float = 30.0


@dataclass(frozen=True)
class VersionInfo:
    runtime_version: str
    api_level: int
    features: tuple[str, ...]
    backend: str
    isolation: str
    node_name: str
    protocol_fingerprint: str


@dataclass(frozen=True)
class AllocateInput:
    pod: PodRef
    container: str
    shares: tuple[Share, ...]
    resource_name: str = ""
    device_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class AllocateResult:
    allocation: Allocation
    edits: ContainerEdits


@dataclass(frozen=True)
class RuntimeStatus:
    enabled: bool
    reason: str
    changed_unix_ms: int
    isolation: str
    mps_state: MpsState
    mps_message: str
    checkpoint: CheckpointStatus
    checkpoint_message: str
    allocation_count: int
    version: VersionInfo
    last_reconcile_unix_ms: int
    last_reconcile_message: str
    state: AllocationState = AllocationState()


@dataclass(frozen=True)
class GpuData:
    view: DeviceView
    sample: GpuSample
    xids: tuple[XidRecord, ...]
    xid_count: int


@dataclass(frozen=True)
class ExporterData:
    node_name: str
    unix_ms: int
    gpus: tuple[GpuData, ...]
    allocations: tuple[Allocation, ...]
    state: AllocationState = AllocationState()
    usage: UsageReading = field(default_factory=UsageReading)

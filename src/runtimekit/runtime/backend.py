"""What a GPU backend is: the runtime's one interface to the GPUs of its node.

Two implementations: `nvml.NvmlBackend` (real GPUs through `pynvml`) and
`simulated.SimulatedBackend` (built-in models, plausible metrics, fault injection). The runtime
service calls `devices()` once at start (and after a MIG change), `sample()` when the exporter asks,
and `start_events()` once; a backend reports XID/ECC/lost/back events through the listener from
any thread. Both also implement `MigControl`: making and destroying MIG devices on GPUs in dynamic
MIG mode. Values here are plain frozen dataclasses; nothing here talks gRPC.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from runtimekit.model import GpuUUID, MigMode
from runtimekit.model.mig import MigGeometry


class BackendError(Exception):
    """A backend cannot start or answer (no driver, no library, no permission)."""


@dataclass(frozen=True)
class MigDeviceInfo:
    """One MIG device (GPU instance + compute instance) of a GPU in MIG mode."""

    uuid: str
    profile: str
    gpu_instance_id: int
    compute_instance_id: int
    memory_mib: int
    start: int = -1
    dynamic: bool = False  # made by the runtime (dynamic MIG mode), not by an operator
    cap_paths: tuple[str, ...] = ()  # /dev/nvidia-caps/nvidia-cap<N> of its GPU and compute instance


@dataclass(frozen=True)
class DeviceInfo:
    """A physical GPU as the backend sees it: identity and fixed properties, no health."""

    index: int
    uuid: GpuUUID
    model: str  # short name as the scheduler knows it (GPU_MODELS), else a label-safe product name
    product: str
    memory_mib: int
    minor: int
    numa_node: int = -1
    mig_mode: MigMode = MigMode.OFF
    mig_devices: tuple[MigDeviceInfo, ...] = ()
    mig_geometry: MigGeometry | None = None  # profiles and placements, for a MIG-capable GPU
    driver_version: str = ""  # the NVIDIA driver's (NVML), "" where there is none (simulated)


class MigFailure(StrEnum):
    """Why a MIG device could not be made or destroyed."""

    INVALID = "invalid"  # unknown profile for the GPU, or a start the profile cannot have
    CONFLICT = "conflict"  # overlapping slices, GPU not in dynamic MIG mode, no such device
    IN_USE = "in-use"  # processes still run on it (NVML_ERROR_IN_USE)
    FAILED = "failed"  # anything else the driver says


class MigError(Exception):
    """A MIG create or destroy the backend refused; `failure` says which kind, the message why."""

    def __init__(self, failure: MigFailure, message: str) -> None:
        super().__init__(message)
        self.failure = failure
        self.message = message


@dataclass(frozen=True)
class GpuLoad:
    """What the runtime has granted on one GPU, and what its containers use there (None: not known);
    the simulated backend shapes its metrics after it."""

    core_milli: int
    memory_mib: int
    used_sm_percent: float | None = None
    used_memory_mib: int | None = None


@dataclass(frozen=True)
class GpuSample:
    """Raw readings of one GPU. Counters are since the driver (or simulation) started."""

    uuid: GpuUUID
    utilization_percent: float
    memory_utilization_percent: float
    memory_used_mib: int
    memory_total_mib: int
    temperature_celsius: float
    power_watts: float
    power_limit_watts: float
    ecc_corrected: int
    ecc_uncorrected: int
    mig_mode: MigMode
    lost: bool = False
    # Readings not every GPU or backend gives (None: no source, so the exporter leaves the metric out).
    sm_clock_mhz: float | None = None
    memory_clock_mhz: float | None = None
    energy_millijoules: int | None = None
    pcie_replays: int | None = None
    encoder_utilization_percent: float | None = None
    decoder_utilization_percent: float | None = None
    memory_reserved_mib: int | None = None  # the driver's reservation, left out of memory_used_mib


class EventKind(StrEnum):
    XID = "xid"
    ECC = "ecc"
    LOST = "lost"
    BACK = "back"
    ERROR = "error"  # the event source itself failed: every GPU is suspect


@dataclass(frozen=True)
class HealthEvent:
    """Something happened to a GPU (or to all of them when `uuid` is None)."""

    kind: EventKind
    uuid: GpuUUID | None
    unix_ms: int
    xid: int = 0
    uncorrectable: bool = False
    detail: str = ""


HealthListener = Callable[[HealthEvent], None]


@dataclass(frozen=True)
class Fault:
    """A fault to inject on the simulated backend."""

    kind: EventKind
    gpu_index: int
    xid: int = 0
    uncorrectable: bool = False
    count: int = 1


class GpuBackend(Protocol):
    """A source of GPUs, their metrics and their health events."""

    @property
    def name(self) -> str:
        """`nvml` or `simulated`."""
        ...

    def devices(self) -> Sequence[DeviceInfo]:
        """The node's GPUs in index order. Raises BackendError when the GPUs cannot be read."""
        ...

    def sample(self, load: Mapping[GpuUUID, GpuLoad]) -> Sequence[GpuSample]:
        """A fresh reading of every GPU, in index order. A GPU that cannot be read is `lost`."""
        ...

    def start_events(self, listener: HealthListener) -> None:
        """Start reporting health events to `listener` (from any thread). Called once."""
        ...

    def close(self) -> None:
        """Stop event reporting and release the driver. Idempotent."""
        ...


class MigControl(Protocol):
    """A backend that makes and destroys MIG devices (GPU instance + one full compute instance).

    Both calls act only on GPUs in dynamic MIG mode, follow the GPU's MIG geometry (a profile it has,
    a valid start, no overlap with an instance that exists) and leave `devices()` showing the change.
    """

    def create_mig_device(self, gpu: GpuUUID, profile: str, start: int) -> MigDeviceInfo:
        """Make an instance of `profile` at memory slice `start`; raises MigError with the reason."""
        ...

    def destroy_mig_device(self, gpu: GpuUUID, mig_uuid: str) -> None:
        """Destroy the compute instance, then the GPU instance; raises MigError (IN_USE while processes run)."""
        ...


class FaultInjector(Protocol):
    """A backend that can be told to fail (the simulated one)."""

    def inject(self, fault: Fault) -> HealthEvent:
        """Apply the fault and report its event to the listener; returns the event.

        Raises ValueError for a GPU index the node lacks or a malformed fault.
        """
        ...


def label_safe_model(product: str) -> str:
    """A product name usable as a label value: `NVIDIA H200 NVL` -> `NVIDIA-H200-NVL` (at most 63)."""
    cleaned = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in product.strip())
    return cleaned.strip("-_.")[:63].strip("-_.") or "unknown"

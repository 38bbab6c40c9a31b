"""The simulated GPU backend: built-in GPU models, plausible changing metrics, fault injection.

`runtimekit runtime --backend simulated --simulate-gpus 8xH200` builds one from a spec of groups
(`4xA100-80GB,4xT4`); memory sizes come from `runtimekit.model.GPU_MODELS`, UUIDs from
`simulated_uuid(node, index)` so they are stable across restarts. Metrics follow what the runtime has
granted on each GPU (utilisation near the granted compute share, memory below the granted memory)
with a seeded random walk on top. Faults (XID, ECC, lost, back) are injected through `inject`, which
reports the event to the listener synchronously, so tests need no waiting.
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from runtimekit.model import GpuUUID, MigMode, gpu_model, simulated_uuid
from runtimekit.runtime.backend import (
    DeviceInfo,
    EventKind,
    Fault,
    GpuLoad,
    GpuSample,
    HealthEvent,
    HealthListener,
    MigDeviceInfo,
)

_GROUP_RE = re.compile(r"^\s*(\d+)\s*[xX]\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*$")
_MIG_PROFILE_RE = re.compile(r"^(?:\d+c\.)?(\d+)g\.(\d+)gb$")
_IDLE_WATTS = 0.12  # idle power as a share of the power limit
_TDP_WATTS = {"H200": 700.0, "H100-80GB": 700.0, "A100-80GB": 400.0, "A100-40GB": 400.0, "T4": 70.0, "L4": 72.0}


def parse_gpu_spec(text: str) -> list[tuple[str, int]]:
    """`8xH200` or `4xA100-80GB,4xT4` -> [(model, count), ...]. Raises ValueError naming the bad part."""
    groups: list[tuple[str, int]] = []
    for part in text.split(","):
        match = _GROUP_RE.match(part)
        if not match:
            raise ValueError(f"bad GPU group {part.strip()!r}: expected COUNTxMODEL, e.g. 8xH200")
        count, name = int(match.group(1)), match.group(2)
        if count < 1:
            raise ValueError(f"bad GPU group {part.strip()!r}: the count must be at least 1")
        try:
            spec = gpu_model(name)
        except KeyError as exc:
            raise ValueError(str(exc.args[0])) from None
        groups.append((spec.name, count))
    return groups


def mig_profile_memory_mib(profile: str) -> int:
    """The memory of a MIG profile named `<g>g.<mem>gb` (or `<c>c.<g>g.<mem>gb`), in MiB."""
    match = _MIG_PROFILE_RE.match(profile)
    if not match:
        raise ValueError(f"bad MIG profile {profile!r}: expected e.g. 1g.18gb")
    return int(match.group(2)) * 1024


@dataclass
class _GpuState:
    info: DeviceInfo
    power_limit: float
    activity: float
    utilization: float = 0.0
    temperature: float = 32.0
    ecc_corrected: int = 0
    ecc_uncorrected: int = 0
    lost: bool = False


class SimulatedBackend:
    """Simulated GPUs of one node; see the module docstring. Thread-safe."""

    def __init__(
        self,
        node: str,
        groups: Sequence[tuple[str, int]],
        seed: int = 0,
        mig_layouts: Mapping[int, Sequence[str]] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._clock = clock
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._listener: HealthListener | None = None
        self._gpus: list[_GpuState] = []
        layouts = mig_layouts or {}
        for model_name, count in groups:
            spec = gpu_model(model_name)
            for _ in range(count):
                index = len(self._gpus)
                uuid = simulated_uuid(node, index)
                migs = tuple(_mig_devices(uuid, layouts.get(index, ())))
                info = DeviceInfo(
                    index=index,
                    uuid=uuid,
                    model=spec.name,
                    product=spec.product,
                    memory_mib=spec.memory_mib,
                    minor=index,
                    numa_node=0,
                    mig_mode=MigMode.STATIC if migs else MigMode.OFF,
                    mig_devices=migs,
                )
                limit = _TDP_WATTS.get(spec.name, 300.0)
                self._gpus.append(_GpuState(info, limit, self._rng.uniform(0.6, 0.95)))
        unknown = sorted(set(layouts) - set(range(len(self._gpus))))
        if unknown:
            raise ValueError(f"MIG layout for GPU index {unknown[0]}, but the node has {len(self._gpus)} GPUs")

    @property
    def name(self) -> str:
        return "simulated"

    def devices(self) -> Sequence[DeviceInfo]:
        return [gpu.info for gpu in self._gpus]

    def sample(self, load: Mapping[GpuUUID, GpuLoad]) -> Sequence[GpuSample]:
        with self._lock:
            return [self._sample_one(gpu, load.get(gpu.info.uuid)) for gpu in self._gpus]

    def _sample_one(self, gpu: _GpuState, load: GpuLoad | None) -> GpuSample:
        info = gpu.info
        if gpu.lost:
            return GpuSample(
                info.uuid, 0.0, 0.0, 0, info.memory_mib, 0.0, 0.0, gpu.power_limit, 0, 0, info.mig_mode, True
            )
        gpu.activity = min(1.0, max(0.3, gpu.activity + self._rng.uniform(-0.08, 0.08)))
        granted = (load.core_milli / 10.0) if load else 0.0
        target = min(100.0, granted * gpu.activity)
        gpu.utilization = max(0.0, min(100.0, 0.6 * gpu.utilization + 0.4 * target + self._rng.uniform(-2.0, 2.0)))
        ambient = 30.0 + 0.45 * gpu.utilization
        gpu.temperature = 0.7 * gpu.temperature + 0.3 * ambient + self._rng.uniform(-0.5, 0.5)
        power = gpu.power_limit * (_IDLE_WATTS + (1.0 - _IDLE_WATTS) * gpu.utilization / 100.0)
        granted_mem = min(load.memory_mib if load else 0, info.memory_mib)
        used = int(granted_mem * min(0.95, 0.5 + 0.45 * gpu.activity)) + (300 if granted_mem else 0)
        used = min(used, info.memory_mib)
        return GpuSample(
            uuid=info.uuid,
            utilization_percent=round(gpu.utilization, 1),
            memory_utilization_percent=round(min(100.0, gpu.utilization * 0.7), 1),
            memory_used_mib=used,
            memory_total_mib=info.memory_mib,
            temperature_celsius=round(gpu.temperature, 1),
            power_watts=round(power + self._rng.uniform(-3.0, 3.0), 1),
            power_limit_watts=gpu.power_limit,
            ecc_corrected=gpu.ecc_corrected,
            ecc_uncorrected=gpu.ecc_uncorrected,
            mig_mode=info.mig_mode,
        )

    def start_events(self, listener: HealthListener) -> None:
        self._listener = listener

    def close(self) -> None:
        self._listener = None

    def inject(self, fault: Fault) -> HealthEvent:
        if not 0 <= fault.gpu_index < len(self._gpus):
            raise ValueError(f"no GPU with index {fault.gpu_index}; this node has {len(self._gpus)} GPUs")
        if fault.kind is EventKind.XID and fault.xid <= 0:
            raise ValueError("an XID fault needs an XID number above 0")
        if fault.kind is EventKind.ECC and fault.count < 1:
            raise ValueError("an ECC fault needs a count of at least 1")
        if fault.kind is EventKind.ERROR:
            raise ValueError("the event-source error cannot be injected on one GPU")
        gpu = self._gpus[fault.gpu_index]
        with self._lock:
            if fault.kind is EventKind.ECC:
                if fault.uncorrectable:
                    gpu.ecc_uncorrected += fault.count
                else:
                    gpu.ecc_corrected += fault.count
            elif fault.kind is EventKind.LOST:
                gpu.lost = True
            elif fault.kind is EventKind.BACK:
                gpu.lost = False
        event = HealthEvent(
            kind=fault.kind,
            uuid=gpu.info.uuid,
            unix_ms=int(self._clock() * 1000),
            xid=fault.xid if fault.kind is EventKind.XID else 0,
            uncorrectable=fault.uncorrectable,
            detail="injected",
        )
        listener = self._listener
        if listener is not None:
            listener(event)
        return event


def _mig_devices(parent: GpuUUID, profiles: Sequence[str]) -> list[MigDeviceInfo]:
    out = []
    for i, profile in enumerate(profiles):
        digest = parent.removeprefix("GPU-")
        out.append(
            MigDeviceInfo(
                uuid=f"MIG-{digest[:-4]}{i:04x}",
                profile=profile,
                gpu_instance_id=i + 1,
                compute_instance_id=0,
                memory_mib=mig_profile_memory_mib(profile),
                start=i,
            )
        )
    return out

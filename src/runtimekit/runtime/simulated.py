"""The simulated GPU backend: built-in GPU models, plausible changing metrics, fault injection, MIG.

`runtimekit runtime --backend simulated --simulate-gpus 8xH200` builds one from a spec of groups
(`4xA100-80GB,4xT4`); memory sizes come from `runtimekit.model.GPU_MODELS`, UUIDs from
`simulated_uuid(node, index)` so they are stable across restarts. Metrics follow what the runtime has
granted on each GPU (utilisation near the granted compute share, memory below the granted memory)
with a seeded random walk on top; where the runtime passes what its containers use (`simusage`), a GPU
reads as exactly that plus `DRIVER_RESERVED_MIB`. SM clocks follow utilisation, energy integrates the
power drawn. Faults (XID, ECC, lost, back) are injected through `inject`, which reports the event to
the listener synchronously, so tests need no waiting.

MIG: each GPU of a MIG-capable model is `off`, `static` (its layout placed with
`runtimekit.model.mig.layout_from_names`, fixed for the backend's life) or `dynamic` (instances made
and destroyed through `MigControl` under the rules of `runtimekit.runtime.mig.placement_problem`).
Like a real GPU, dynamic instances outlive the runtime process: with a `state_file` they are kept
there and found again by the next backend on the same node. `set_busy` makes a MIG device refuse
destruction as NVML does while processes run on it (tests).
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from runtimekit.base.files import write_atomic
from runtimekit.model import GpuUUID, MigMode, gpu_model, simulated_uuid
from runtimekit.model.mig import MigGeometry, geometry, layout_from_names
from runtimekit.runtime.backend import (
    DeviceInfo,
    EventKind,
    Fault,
    GpuLoad,
    GpuSample,
    HealthEvent,
    HealthListener,
    MigDeviceInfo,
    MigError,
    MigFailure,
)
from runtimekit.runtime.mig import cap_paths, placement_problem

log = logging.getLogger(__name__)

_GROUP_RE = re.compile(r"^\s*(\d+)\s*[xX]\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*$")
_IDLE_WATTS = 0.12  # idle power as a share of the power limit
_TDP_WATTS = {
    "H200": 700.0,
    "H200-NVL": 600.0,
    "H100-80GB": 700.0,
    "H100-PCIe": 350.0,
    "A100-80GB": 400.0,
    "A100-80GB-PCIe": 300.0,
    "A100-40GB": 400.0,
    "A100-PCIE-40GB": 250.0,
    "T4": 70.0,
    "L4": 72.0,
}
# Maximum SM clock and memory clock (MHz) of each model, as NVML reports them on the real card; the
# simulated SM clock runs from _IDLE_SM_MHZ up to the maximum with utilisation.
_CLOCKS_MHZ = {
    "H200": (1980.0, 3201.0),
    "H100-80GB": (1980.0, 2619.0),
    "A100-80GB": (1410.0, 1593.0),
    "A100-40GB": (1410.0, 1215.0),
    "T4": (1590.0, 5001.0),
    "L4": (2040.0, 6251.0),
}
_IDLE_SM_MHZ = 210.0
_STATE_VERSION = 1
DRIVER_RESERVED_MIB = 300  # memory a GPU with any container on it reads as used beyond the containers'


def _power_limit(model: str) -> float:
    return _TDP_WATTS.get(model, 300.0)


def _clocks(model: str) -> tuple[float, float]:
    """(maximum SM clock, memory clock) of a model, in MHz."""
    return _CLOCKS_MHZ.get(model, (1500.0, 1500.0))


def assumptions(model: str) -> dict[str, float]:
    """What this backend assumes of a real GPU of `model` (a built-in name or alias), to hold against one:
    memory, power limit and idle draw, maximum and idle SM clock, memory clock, and the memory a GPU
    with containers reads as used beyond theirs. Raises KeyError for an unknown model."""
    spec = gpu_model(model)
    limit = _power_limit(spec.name)
    max_sm, memory_clock = _clocks(spec.name)
    return {
        "memory_total_mib": float(spec.memory_mib),
        "power_limit_watts": limit,
        "idle_power_watts": limit * _IDLE_WATTS,
        "max_sm_clock_mhz": max_sm,
        "idle_sm_clock_mhz": _IDLE_SM_MHZ,
        "memory_clock_mhz": memory_clock,
        "used_beyond_containers_mib": float(DRIVER_RESERVED_MIB),
    }


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


def gpu_count(groups: Sequence[tuple[str, int]]) -> int:
    return sum(count for _, count in groups)


def mig_uuid(parent: str, start: int, profile: str, serial: int = 0) -> str:
    """A stable, UUID-shaped MIG device UUID for an instance of `profile` at `start` of GPU `parent`."""
    digest = hashlib.sha1(f"{parent}/{start}/{profile}/{serial}".encode()).hexdigest()
    return f"MIG-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


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
    energy_millijoules: float = 0.0  # the power drawn, integrated over the clock between samples
    sampled_at: float | None = None


class SimulatedBackend:
    """Simulated GPUs of one node; see the module docstring. Thread-safe.

    `mig_modes` gives a GPU index its MIG mode (unlisted: static when `mig_layouts` has a layout for
    it, else off); `mig_layouts` the profiles of each static GPU. Raises ValueError for an index the
    node lacks, MIG on a model without MIG, a layout on a GPU that is not static (or none on one that
    is), or a layout that does not fit.
    """

    def __init__(
        self,
        node: str,
        groups: Sequence[tuple[str, int]],
        seed: int = 0,
        mig_layouts: Mapping[int, Sequence[str]] | None = None,
        clock: Callable[[], float] = time.time,
        mig_modes: Mapping[int, MigMode] | None = None,
        state_file: Path | None = None,
    ) -> None:
        self._clock = clock
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._listener: HealthListener | None = None
        self._gpus: list[_GpuState] = []
        self._state_file = state_file
        self._serial = 0
        self._busy: set[str] = set()
        layouts = dict(mig_layouts or {})
        modes = dict(mig_modes or {})
        count = gpu_count(groups)
        for what, indexes in (("MIG layout", layouts), ("MIG mode", modes)):
            beyond = sorted(set(indexes) - set(range(count)))
            if beyond:
                raise ValueError(f"{what} for GPU index {beyond[0]}, but the node has {count} GPUs")
        for model_name, n in groups:
            spec = gpu_model(model_name)
            for _ in range(n):
                index = len(self._gpus)
                mode = modes.get(index, MigMode.STATIC if index in layouts else MigMode.OFF)
                info = self._device(node, index, spec.name, mode, layouts.get(index, ()))
                limit = _power_limit(spec.name)
                self._gpus.append(_GpuState(info, limit, self._rng.uniform(0.6, 0.95)))
        self._load_dynamic()

    def _device(self, node: str, index: int, model: str, mode: MigMode, layout: Sequence[str]) -> DeviceInfo:
        spec = gpu_model(model)
        geo = geometry(model) if spec.mig_capable else None
        if mode is not MigMode.OFF and geo is None:
            raise ValueError(f"GPU {index} is a {model}, which has no MIG; its MIG mode must be off")
        if layout and mode is not MigMode.STATIC:
            raise ValueError(f"GPU {index} has a MIG layout, but its MIG mode is {mode.value}")
        if mode is MigMode.STATIC and not layout:
            raise ValueError(f"GPU {index} is in static MIG mode but has no MIG layout")
        uuid = simulated_uuid(node, index)
        migs: tuple[MigDeviceInfo, ...] = ()
        if mode is MigMode.STATIC:
            assert geo is not None
            try:
                placed = layout_from_names(geo, layout)
            except ValueError as exc:
                raise ValueError(f"GPU {index}: {exc}") from None
            migs = tuple(
                _instance(geo, uuid, index, name, start, gi + 1, False) for gi, (name, start) in enumerate(placed)
            )
        return DeviceInfo(
            index=index,
            uuid=uuid,
            model=spec.name,
            product=spec.product,
            memory_mib=spec.memory_mib,
            minor=index,
            numa_node=0,
            mig_mode=mode,
            mig_devices=migs,
            mig_geometry=geo,
        )

    @property
    def name(self) -> str:
        return "simulated"

    def devices(self) -> Sequence[DeviceInfo]:
        with self._lock:
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
        granted_mem = min(load.memory_mib if load else 0, info.memory_mib)
        used = int(granted_mem * min(0.95, 0.5 + 0.45 * gpu.activity)) + (DRIVER_RESERVED_MIB if granted_mem else 0)
        if load is not None and load.used_sm_percent is not None and load.used_memory_mib is not None:
            # the usage model says what the containers use: the GPU reads as their sum plus the driver's part
            gpu.utilization = min(100.0, load.used_sm_percent)
            used = load.used_memory_mib + DRIVER_RESERVED_MIB
        used = min(used, info.memory_mib)
        ambient = 30.0 + 0.45 * gpu.utilization
        gpu.temperature = 0.7 * gpu.temperature + 0.3 * ambient + self._rng.uniform(-0.5, 0.5)
        power = gpu.power_limit * (_IDLE_WATTS + (1.0 - _IDLE_WATTS) * gpu.utilization / 100.0)
        drawn = round(power + self._rng.uniform(-3.0, 3.0), 1)
        now = self._clock()
        if gpu.sampled_at is not None and now > gpu.sampled_at:
            gpu.energy_millijoules += drawn * (now - gpu.sampled_at) * 1000.0
        gpu.sampled_at = now
        max_sm, memory_clock = _clocks(info.model)
        return GpuSample(
            uuid=info.uuid,
            utilization_percent=round(gpu.utilization, 1),
            memory_utilization_percent=round(min(100.0, gpu.utilization * 0.7), 1),
            memory_used_mib=used,
            memory_total_mib=info.memory_mib,
            temperature_celsius=round(gpu.temperature, 1),
            power_watts=drawn,
            power_limit_watts=gpu.power_limit,
            ecc_corrected=gpu.ecc_corrected,
            ecc_uncorrected=gpu.ecc_uncorrected,
            mig_mode=info.mig_mode,
            sm_clock_mhz=round(_IDLE_SM_MHZ + (max_sm - _IDLE_SM_MHZ) * gpu.utilization / 100.0),
            memory_clock_mhz=memory_clock,
            energy_millijoules=int(gpu.energy_millijoules),
            pcie_replays=0,  # a simulated bus never retries; encoder and decoder are not simulated (None)
        )

    def start_events(self, listener: HealthListener) -> None:
        self._listener = listener

    def close(self) -> None:
        self._listener = None

    # -- MIG ---------------------------------------------------------------------------------------
    def create_mig_device(self, gpu: GpuUUID, profile: str, start: int) -> MigDeviceInfo:
        with self._lock:
            state = self._gpu_state(gpu)
            info = state.info
            problem = placement_problem(info, profile, start)
            if problem is not None:
                raise problem
            assert info.mig_geometry is not None
            used = {m.gpu_instance_id for m in info.mig_devices}
            gi = next(i for i in range(1, len(used) + 2) if i not in used)
            self._serial += 1
            made = _instance(info.mig_geometry, info.uuid, info.minor, profile, start, gi, True, self._serial)
            state.info = replace(info, mig_devices=tuple(sorted((*info.mig_devices, made), key=lambda m: m.start)))
            self._save_dynamic()
            return made

    def destroy_mig_device(self, gpu: GpuUUID, mig_uuid: str) -> None:
        with self._lock:
            state = self._gpu_state(gpu)
            info = state.info
            if info.mig_mode is not MigMode.DYNAMIC:
                raise MigError(
                    MigFailure.CONFLICT, f"GPU {info.index} is not in dynamic MIG mode: its MIG devices stay"
                )
            if not any(m.uuid == mig_uuid for m in info.mig_devices):
                raise MigError(MigFailure.CONFLICT, f"GPU {info.index} has no MIG device {mig_uuid}")
            if mig_uuid in self._busy:
                raise MigError(MigFailure.IN_USE, f"MIG device {mig_uuid} is in use (processes run on it)")
            state.info = replace(info, mig_devices=tuple(m for m in info.mig_devices if m.uuid != mig_uuid))
            self._save_dynamic()

    def set_busy(self, mig_uuid: str, busy: bool = True) -> None:
        """Make a MIG device refuse (or accept again) being destroyed, as while processes run on it."""
        with self._lock:
            if busy:
                self._busy.add(mig_uuid)
            else:
                self._busy.discard(mig_uuid)

    def _gpu_state(self, gpu: str) -> _GpuState:
        found = next((g for g in self._gpus if g.info.uuid == gpu), None)
        if found is None:
            raise MigError(MigFailure.CONFLICT, f"this node has no GPU {gpu}")
        return found

    def _save_dynamic(self) -> None:
        """Keep the dynamic instances where the next backend of this node finds them (as a GPU would)."""
        if self._state_file is None:
            return
        gpus = {
            g.info.uuid: [
                {"uuid": m.uuid, "profile": m.profile, "start": m.start, "gi": m.gpu_instance_id} for m in migs
            ]
            for g in self._gpus
            if (migs := [m for m in g.info.mig_devices if m.dynamic])
        }
        doc = {"version": _STATE_VERSION, "serial": self._serial, "gpus": gpus}
        write_atomic(self._state_file, json.dumps(doc, sort_keys=True).encode())

    def _load_dynamic(self) -> None:
        if self._state_file is None or not self._state_file.exists():
            return
        try:
            doc = json.loads(self._state_file.read_text())
            self._serial = int(doc.get("serial", 0))
            saved = dict(doc.get("gpus") or {})
        except (ValueError, TypeError, AttributeError) as exc:
            log.warning(
                "simulated MIG state %s is unreadable, starting without dynamic instances: %s", self._state_file, exc
            )
            return
        for state in self._gpus:
            info = state.info
            for item in saved.get(info.uuid, []) if info.mig_mode is MigMode.DYNAMIC else []:
                problem = placement_problem(state.info, str(item["profile"]), int(item["start"]))
                if problem is not None:
                    log.warning("simulated MIG device %s not restored: %s", item.get("uuid"), problem.message)
                    continue
                assert info.mig_geometry is not None
                made = replace(
                    _instance(
                        info.mig_geometry,
                        info.uuid,
                        info.minor,
                        str(item["profile"]),
                        int(item["start"]),
                        int(item["gi"]),
                        True,
                    ),
                    uuid=str(item["uuid"]),
                )
                state.info = replace(
                    state.info, mig_devices=tuple(sorted((*state.info.mig_devices, made), key=lambda m: m.start))
                )

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


def _instance(
    geo: MigGeometry, parent: str, minor: int, profile: str, start: int, gi: int, dynamic: bool, serial: int = 0
) -> MigDeviceInfo:
    found = geo.profile(profile)
    assert found is not None
    return MigDeviceInfo(
        uuid=mig_uuid(parent, start, profile, serial),
        profile=profile,
        gpu_instance_id=gi,
        compute_instance_id=0,
        memory_mib=found.memory_mib,
        start=start,
        dynamic=dynamic,
        cap_paths=cap_paths(minor, gi, 0),
    )

"""A fake NVML for the nvml backend's tests: patches the functions the backend calls on the real `pynvml`
module (its ctypes structures stay real). `FakeNvml` has GPUs, samples, events and pre-made MIG
devices; `MigNvml` adds the MIG profile table, placements and GPU/compute instance life cycle of an
A100-80GB, enforcing NVML's placement rules."""

from __future__ import annotations

import queue
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

MIB = 1 << 20
RESERVED_MIB = 555  # the driver's reservation on every fake GPU


def err(code: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(code)


class FakeGpu:
    def __init__(self, index: int, name: str, memory_mib: int, mig: bool = False, ecc: bool = True) -> None:
        self.index, self.name, self.memory_mib, self.mig, self.ecc = index, name, memory_mib, mig, ecc
        self.uuid = f"GPU-0000000{index}-aaaa-bbbb-cccc-dddddddddddd"
        self.lost = False
        self.migs = (
            [SimpleNamespace(uuid=f"MIG-{index}-{i}", name=f"{name} MIG 3g.71gb", memory_mib=72448) for i in (0, 1)]
            if mig
            else []
        )


class FakeNvml:
    """Patches the functions the backend calls on the real pynvml module."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, gpus: list[FakeGpu]) -> None:
        self.gpus = gpus
        self.events: queue.Queue[Any] = queue.Queue()
        self.registered: list[tuple[int, int]] = []
        self.calls: list[str] = []
        for name in dir(self):
            if name.startswith("nvml"):
                monkeypatch.setattr(pynvml, name, getattr(self, name))

    def _gpu(self, handle: Any) -> FakeGpu:
        if isinstance(handle, FakeGpu) and handle.lost:
            raise err(pynvml.NVML_ERROR_GPU_IS_LOST)
        return handle  # type: ignore[no-any-return]

    def nvmlInit(self) -> None:
        self.calls.append("init")

    def nvmlShutdown(self) -> None:
        self.calls.append("shutdown")

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> FakeGpu:
        return self.gpus[i]

    def nvmlDeviceGetUUID(self, h: Any) -> str:
        return str(h.uuid)

    def nvmlDeviceGetName(self, h: Any) -> str:
        return str(h.name)

    def nvmlDeviceGetMemoryInfo(self, h: Any, version: int | None = None) -> Any:
        """Version 1 counts the driver's reservation as used; version 2 gives it apart (R510+), as
        nvidia-smi shows it; a GPU with `memory_v2` False refuses version 2 as an old driver does."""
        gpu = self._gpu(h)
        total, reserved = gpu.memory_mib * MIB, RESERVED_MIB * MIB
        used = total // 4
        if version is None:
            return SimpleNamespace(total=total, used=used + reserved, free=total - used - reserved)
        if not getattr(gpu, "memory_v2", True):
            raise err(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        return SimpleNamespace(total=total, reserved=reserved, used=used, free=total - used - reserved)

    def nvmlDeviceGetMinorNumber(self, h: Any) -> int:
        return int(h.index) + 10

    def nvmlDeviceGetNumaNodeId(self, h: Any) -> int:
        raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def nvmlDeviceGetMigMode(self, h: Any) -> list[int]:
        if h.name.startswith("Tesla"):
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return [1, 1] if h.mig else [0, 0]

    def nvmlDeviceGetMaxMigDeviceCount(self, h: Any) -> int:
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: Any, i: int) -> Any:
        if i >= len(h.migs):
            raise err(pynvml.NVML_ERROR_NOT_FOUND)
        return h.migs[i]

    def nvmlDeviceGetGpuInstanceId(self, m: Any) -> int:
        return 1 + int(m.uuid[-1])

    def nvmlDeviceGetComputeInstanceId(self, m: Any) -> int:
        return 0

    def nvmlDeviceGetUtilizationRates(self, h: Any) -> Any:
        self._gpu(h)
        return SimpleNamespace(gpu=42, memory=17)

    def nvmlDeviceGetTemperature(self, h: Any, sensor: int) -> int:
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return 55

    def nvmlDeviceGetPowerUsage(self, h: Any) -> int:
        return 312_500

    def nvmlDeviceGetEnforcedPowerLimit(self, h: Any) -> int:
        return 700_000

    def nvmlDeviceGetTotalEccErrors(self, h: Any, error_type: int, counter: int) -> int:
        assert counter == pynvml.NVML_VOLATILE_ECC
        if not h.ecc:
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return 2 if error_type == pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED else 7

    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.54.15"

    def nvmlDeviceGetClockInfo(self, h: Any, clock: int) -> int:
        return {pynvml.NVML_CLOCK_SM: 1755, pynvml.NVML_CLOCK_MEM: 3201}[clock]

    def nvmlDeviceGetTotalEnergyConsumption(self, h: Any) -> int:
        return 9_876_543

    def nvmlDeviceGetPcieReplayCounter(self, h: Any) -> int:
        return 4

    def nvmlDeviceGetEncoderUtilization(self, h: Any) -> list[int]:
        if h.name.startswith("Tesla"):  # NotSupported, as where the GPU has no such reading
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return [12, 167000]

    def nvmlDeviceGetDecoderUtilization(self, h: Any) -> list[int]:
        if h.name.startswith("Tesla"):
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return [3, 167000]

    def nvmlEventSetCreate(self) -> str:
        return "event-set"

    def nvmlDeviceGetSupportedEventTypes(self, h: Any) -> int:
        if h.name.startswith("Tesla"):
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return pynvml.nvmlEventTypeAll

    def nvmlDeviceRegisterEvents(self, h: Any, mask: int, event_set: str) -> None:
        self.registered.append((h.index, mask))

    def nvmlEventSetWait(self, event_set: str, timeout_ms: int) -> Any:
        try:
            item = self.events.get(timeout=timeout_ms / 1000)
        except queue.Empty:
            raise err(pynvml.NVML_ERROR_TIMEOUT) from None
        if isinstance(item, Exception):
            raise item
        return item

    def nvmlEventSetFree(self, event_set: str) -> None:
        self.calls.append("free")


# A100-80GB: profile index -> (name as NVML v2 names it, profile id, slices, max instances, MiB, placement size, starts)
A100_PROFILES: dict[int, tuple[str, int, int, int, int, int, tuple[int, ...]]] = {
    0: ("MIG 1g.10gb", 19, 1, 7, 9728, 1, (0, 1, 2, 3, 4, 5, 6)),
    1: ("MIG 2g.20gb", 14, 2, 3, 19968, 2, (0, 2, 4)),
    2: ("MIG 3g.40gb", 9, 3, 2, 40192, 4, (0, 4)),
    3: ("MIG 4g.40gb", 5, 4, 1, 40192, 4, (0,)),
    4: ("MIG 7g.80gb", 0, 7, 1, 80896, 8, (0,)),
    7: ("MIG 1g.10gb+me", 20, 1, 1, 9728, 1, (0, 1, 2, 3, 4, 5, 6)),
    9: ("MIG 1g.20gb", 15, 1, 4, 19968, 2, (0, 2, 4, 6)),
}


class GpuInstance:
    def __init__(self, gpu: FakeGpu, gi_id: int, profile_index: int, start: int) -> None:
        self.gpu, self.id, self.profile_index, self.start = gpu, gi_id, profile_index, start
        self.compute: SimpleNamespace | None = None

    @property
    def spec(self) -> tuple[str, int, int, int, int, int, tuple[int, ...]]:
        return A100_PROFILES[self.profile_index]

    def mask(self) -> int:
        return ((1 << self.spec[5]) - 1) << self.start


class MigNvml(FakeNvml):
    """FakeNvml plus the MIG life cycle of A100-80GB GPUs (placement rules as NVML enforces them)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, gpus: list[FakeGpu]) -> None:
        self.instances: dict[int, list[GpuInstance]] = {g.index: [] for g in gpus}
        self.busy: set[str] = set()
        self.fail_compute = False
        self.mig_calls: list[str] = []
        super().__init__(monkeypatch, gpus)

    def _by_profile_id(self, profile_id: int) -> int:
        return next(i for i, p in A100_PROFILES.items() if p[1] == profile_id)

    def nvmlDeviceGetGpuInstanceProfileInfo(self, h: Any, index: int, version: int = 2) -> Any:
        if not h.mig or index not in A100_PROFILES:
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        name, pid, slices, count, mib, _, _ = A100_PROFILES[index]
        return SimpleNamespace(name=name.encode(), id=pid, sliceCount=slices, instanceCount=count, memorySizeMB=mib)

    def nvmlDeviceGetGpuInstancePossiblePlacements(self, h: Any, profile_id: int, array: Any, count: Any) -> int:
        _, _, _, _, _, size, starts = A100_PROFILES[self._by_profile_id(profile_id)]
        for i, start in enumerate(starts):
            array[i].start, array[i].size = start, size
        count._obj.value = len(starts)
        return 0

    def nvmlDeviceCreateGpuInstanceWithPlacement(self, h: Any, profile_id: int, placement: Any) -> GpuInstance:
        self.mig_calls.append("create-gi")
        index = self._by_profile_id(profile_id)
        start, size = placement._obj.start, placement._obj.size
        if start not in A100_PROFILES[index][6] or size != A100_PROFILES[index][5]:
            raise err(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        made = GpuInstance(h, 0, index, start)
        if any(gi.mask() & made.mask() for gi in self.instances[h.index]):
            raise err(pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES)
        used = {gi.id for gi in self.instances[h.index]}
        made.id = next(i for i in range(1, 15) if i not in used)
        self.instances[h.index].append(made)
        return made

    def nvmlGpuInstanceGetComputeInstanceProfileInfo(self, gi: GpuInstance, profile: int, engine: int) -> Any:
        assert engine == pynvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
        return SimpleNamespace(id=100 + profile, sliceCount=gi.spec[2])

    def nvmlGpuInstanceCreateComputeInstance(self, gi: GpuInstance, ci_profile_id: int) -> Any:
        self.mig_calls.append(f"create-ci:{ci_profile_id}")
        if self.fail_compute:
            raise err(pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES)
        gi.compute = SimpleNamespace(id=0, gi=gi)
        return gi.compute

    def nvmlGpuInstanceGetInfo(self, gi: GpuInstance) -> Any:
        return SimpleNamespace(
            id=gi.id, profileId=gi.spec[1], placement=SimpleNamespace(start=gi.start, size=gi.spec[5])
        )

    def nvmlDeviceGetGpuInstanceById(self, h: Any, gi_id: int) -> GpuInstance:
        found = next((gi for gi in self.instances[h.index] if gi.id == gi_id), None)
        if found is None:
            raise err(pynvml.NVML_ERROR_NOT_FOUND)
        return found

    def nvmlGpuInstanceGetComputeInstanceById(self, gi: GpuInstance, ci_id: int) -> Any:
        if gi.compute is None or gi.compute.id != ci_id:
            raise err(pynvml.NVML_ERROR_NOT_FOUND)
        return gi.compute

    def nvmlComputeInstanceDestroy(self, ci: Any) -> None:
        self.mig_calls.append("destroy-ci")
        if self._uuid(ci.gi) in self.busy:
            raise err(pynvml.NVML_ERROR_IN_USE)
        ci.gi.compute = None

    def nvmlGpuInstanceDestroy(self, gi: GpuInstance) -> None:
        self.mig_calls.append("destroy-gi")
        self.instances[gi.gpu.index].remove(gi)

    # MIG devices: one per GPU instance with a compute instance
    @staticmethod
    def _uuid(gi: GpuInstance) -> str:
        return f"MIG-{gi.gpu.index}-gi{gi.id}-s{gi.start}"

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: Any, i: int) -> Any:
        ready = sorted((gi for gi in self.instances[h.index] if gi.compute is not None), key=lambda gi: gi.id)
        if i >= len(ready):
            raise err(pynvml.NVML_ERROR_NOT_FOUND)
        gi = ready[i]
        return SimpleNamespace(
            uuid=self._uuid(gi), name=f"{h.name} {gi.spec[0]}", memory_mib=gi.spec[4], gi=gi.id, lost=False
        )

    def nvmlDeviceGetGpuInstanceId(self, m: Any) -> int:
        return int(m.gi)

    def nvmlDeviceGetComputeInstanceId(self, m: Any) -> int:
        return 0

"""The processes on each GPU through NVML, with their memory and SM utilisation (`usage.GpuProcess`).

Memory: `nvmlDeviceGetComputeRunningProcesses`, `nvmlDeviceGetMPSComputeRunningProcesses` (the clients
of an MPS server, each with its own memory; the server itself is in the first list) and
`nvmlDeviceGetGraphicsRunningProcesses` (a process in several lists is counted once, with its largest
reading; `usedGpuMemory` None, as on WDDM, reads as 0; a list the driver or nvidia-ml-py lacks is skipped).
On a GPU in MIG mode the processes are read on each MIG device's handle
(`nvmlDeviceGetMigDeviceHandleByIndex`), so each is attributed to its MIG device; the parent's handle
gives only an aggregate.
Utilisation over the last interval: `nvmlDeviceGetProcessesUtilizationInfo(handle, lastSeenTimeStamp)`
where the driver has it (R550+), else `nvmlDeviceGetProcessUtilization`; the newest sample of each PID
counts and the next call asks only for what came after the newest seen. NotFound (no sample since)
means idle: 0 %. NotSupported or FunctionNotFound on both (MIG, old GPUs) means unknown: None, and the
GPU is not asked again. Caller: `nvml.NvmlBackend.processes`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from runtimekit.model import GpuUUID
from runtimekit.runtime.backend import DeviceInfo
from runtimekit.runtime.nvml_mig import error_code as _code
from runtimekit.runtime.usage import GpuProcess

log = logging.getLogger(__name__)

ERROR_SUCCESS = 0  # nvidia-ml-py raises NVMLError(SUCCESS) when a utilisation call finds no sample at all
ERROR_NOT_SUPPORTED = 3
ERROR_NOT_FOUND = 6
ERROR_FUNCTION_NOT_FOUND = 13
_MIB = 1 << 20
_UNSUPPORTED = (ERROR_NOT_SUPPORTED, ERROR_FUNCTION_NOT_FOUND)
_NO_SAMPLE = (ERROR_SUCCESS, ERROR_NOT_FOUND)
_PROCESS_LISTS = (
    "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetMPSComputeRunningProcesses",
    "nvmlDeviceGetGraphicsRunningProcesses",
)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class ProcessReader:
    """Reads the processes of the node's GPUs; keeps each GPU's last seen utilisation timestamp."""

    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml
        self._last_seen: dict[str, int] = {}
        self._no_utilization: set[str] = set()

    def read(self, handle: Any, info: DeviceInfo) -> list[GpuProcess]:
        """The processes on one GPU (on its MIG devices when in MIG mode). Raises NVMLError when the GPU
        cannot be read at all."""
        if info.mig_devices:
            return [p for mig, uuid in self._mig_handles(handle) for p in self._processes(mig, info.uuid, uuid, None)]
        return self._processes(handle, info.uuid, info.uuid, self._utilization(handle, info.uuid))

    def _mig_handles(self, handle: Any) -> Iterable[tuple[Any, str]]:
        n = self._nvml
        for slot in range(int(n.nvmlDeviceGetMaxMigDeviceCount(handle))):
            try:
                mig = n.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
            except Exception as exc:
                if _code(exc) == ERROR_NOT_FOUND:
                    continue  # an empty slot
                raise
            yield mig, _text(n.nvmlDeviceGetUUID(mig))

    def _processes(
        self, handle: Any, gpu: GpuUUID, device: str, utilization: dict[int, float] | None
    ) -> list[GpuProcess]:
        memory: dict[int, int] = {}
        for name in _PROCESS_LISTS:
            read = getattr(self._nvml, name, None)
            if read is None:
                continue  # an nvidia-ml-py older than the function
            try:
                listed = read(handle)
            except Exception as exc:
                if _code(exc) not in _UNSUPPORTED:
                    raise
                continue  # graphics processes on a compute-only GPU, MPS clients on an old driver
            for proc in listed:
                used = int(proc.usedGpuMemory or 0) // _MIB
                memory[int(proc.pid)] = max(memory.get(int(proc.pid), 0), used)
        return [
            GpuProcess(pid, gpu, device, mib, None if utilization is None else utilization.get(pid, 0.0))
            for pid, mib in sorted(memory.items())
        ]

    def _utilization(self, handle: Any, uuid: str) -> dict[int, float] | None:
        """PID -> SM % over the interval since the last call; None when the GPU cannot say."""
        if uuid in self._no_utilization:
            return None
        since = self._last_seen.get(uuid, 0)
        n = self._nvml
        calls: tuple[Callable[[], Any], ...] = (
            lambda: n.nvmlDeviceGetProcessesUtilizationInfo(handle, since),
            lambda: n.nvmlDeviceGetProcessUtilization(handle, since),
        )
        for read in calls:
            try:
                samples = read()
            except AttributeError:
                continue  # an nvidia-ml-py older than the function: as the driver lacking it
            except Exception as exc:
                code = _code(exc)
                if code in _NO_SAMPLE:
                    return {}
                if code not in _UNSUPPORTED:
                    raise
                continue
            return self._newest(uuid, samples)
        log.info("GPU %s gives no per-process utilisation; containers' SM utilisation stays unknown", uuid)
        self._no_utilization.add(uuid)
        return None

    def _newest(self, uuid: str, samples: Iterable[Any]) -> dict[int, float]:
        newest: dict[int, tuple[int, float]] = {}
        for sample in samples:
            pid, stamp = int(sample.pid), int(sample.timeStamp)
            if pid not in newest or stamp >= newest[pid][0]:
                newest[pid] = (stamp, float(sample.smUtil))
            self._last_seen[uuid] = max(self._last_seen.get(uuid, 0), stamp)
        return {pid: min(100.0, sm) for pid, (_, sm) in newest.items()}

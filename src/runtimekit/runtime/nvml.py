"""The NVML GPU backend: real GPUs through `pynvml` (PyPI `nvidia-ml-py`).

Enumerates index, UUID, model, memory, minor number, NUMA node, MIG mode, MIG profiles and MIG devices
(with their start slices); samples utilisation, memory, temperature, power, volatile ECC counts and,
where the GPU gives them, SM and memory clocks, total energy, PCIe replays and encoder/decoder use;
lists the processes on each GPU with their memory and utilisation (`nvml_usage`, for per-container usage);
watches XID and ECC events in a thread on an NVML event set (protocols.md §5.2: register
XidCritical|DoubleBitEcc|SingleBitEcc masked by what the GPU supports, wait with a timeout, loop on
Timeout). It never changes MIG mode, compute mode or clocks. On a GPU whose MIG is enabled and that
`--mig-mode` makes dynamic it makes and destroys MIG devices (`nvml_mig`); other MIG GPUs are static
(listed only). The `pynvml` module is injectable so tests run its code paths with patched functions.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from runtimekit.base.threads import Workers
from runtimekit.model import GPU_MODELS, GpuUUID, MigMode
from runtimekit.runtime import nvml_mig
from runtimekit.runtime.backend import (
    BackendError,
    DeviceInfo,
    EventKind,
    GpuLoad,
    GpuSample,
    HealthEvent,
    HealthListener,
    MigDeviceInfo,
    MigError,
    MigFailure,
    label_safe_model,
)
from runtimekit.runtime.mig import MigConfig, placement_problem
from runtimekit.runtime.nvml_usage import ProcessReader
from runtimekit.runtime.usage import GpuProcess

log = logging.getLogger(__name__)

NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_GPU_IS_LOST = 15
NVML_DEVICE_MIG_ENABLE = 1
EVENT_SINGLE_BIT_ECC = 0x1
EVENT_DOUBLE_BIT_ECC = 0x2
EVENT_XID_CRITICAL = 0x8
WANTED_EVENTS = EVENT_XID_CRITICAL | EVENT_DOUBLE_BIT_ECC | EVENT_SINGLE_BIT_ECC
_MIB = 1 << 20
_PRODUCT_TO_MODEL = {spec.product: spec.name for spec in GPU_MODELS.values()}


def nvml_error_code(exc: BaseException) -> int | None:
    """The NVML return code carried by an NVMLError (its `.value`), else None."""
    value = getattr(exc, "value", None)
    return value if isinstance(value, int) else None


def short_model(product: str) -> str:
    """The scheduler's model name for an NVML product name (`NVIDIA H200` -> `H200`)."""
    return _PRODUCT_TO_MODEL.get(product) or label_safe_model(product.removeprefix("NVIDIA "))


class NvmlBackend:
    """Real GPUs through NVML; see the module docstring. `open()` must succeed before use."""

    def __init__(
        self,
        nvml: Any | None = None,
        event_timeout_ms: int = 1000,
        clock: Callable[[], float] = time.time,
        mig_config: MigConfig | None = None,
    ):
        if nvml is None:
            import pynvml

            nvml = pynvml
        self._nvml = nvml
        self._timeout_ms = event_timeout_ms
        self._clock = clock
        self._mig_config = mig_config or MigConfig()
        self._handles: dict[GpuUUID, Any] = {}
        self._memory_v1: set[GpuUUID] = set()  # GPUs whose driver refuses version 2 of the memory reading
        self._tables: dict[GpuUUID, nvml_mig.MigTable] = {}
        self._devices: list[DeviceInfo] = []
        self._mig_lock = threading.Lock()
        self._workers = Workers("nvml")
        self._events_started = False
        self._opened = False
        self._processes = ProcessReader(nvml)

    @property
    def name(self) -> str:
        return "nvml"

    def open(self) -> None:
        """Load the driver library and enumerate the GPUs. Raises BackendError with the reason."""
        n = self._nvml
        try:
            n.nvmlInit()
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ... all mean: no usable GPU
            raise BackendError(f"NVML cannot start (no NVIDIA driver or library?): {exc}") from exc
        self._opened = True
        self._driver = self._driver_version()
        try:
            count = n.nvmlDeviceGetCount()
            self._devices = [self._read_device(i) for i in range(count)]
        except BackendError:
            raise
        except Exception as exc:
            raise BackendError(f"NVML cannot enumerate the GPUs: {exc}") from exc

    def _driver_version(self) -> str:
        try:
            return _text(self._nvml.nvmlSystemGetDriverVersion())
        except Exception as exc:
            if nvml_error_code(exc) is None and not isinstance(exc, AttributeError):
                raise
            return ""

    def _read_device(self, index: int) -> DeviceInfo:
        n = self._nvml
        handle = n.nvmlDeviceGetHandleByIndex(index)
        uuid = GpuUUID(_text(n.nvmlDeviceGetUUID(handle)))
        product = _text(n.nvmlDeviceGetName(handle))
        memory = n.nvmlDeviceGetMemoryInfo(handle)
        model = short_model(product)
        mig_mode = self._configured_mode(index, self._mig_enabled(handle))
        minor = self._optional(n.nvmlDeviceGetMinorNumber, handle, default=index)
        self._handles[uuid] = handle
        table = nvml_mig.read_table(n, handle, model) if mig_mode is not MigMode.OFF else None
        if table is not None:
            self._tables[uuid] = table
        elif mig_mode is MigMode.DYNAMIC:
            log.error("GPU %d (%s): NVML lists no MIG profiles, so no MIG device can be made on it", index, uuid)
        dynamic = mig_mode is MigMode.DYNAMIC
        return DeviceInfo(
            driver_version=self._driver,
            index=index,
            uuid=uuid,
            model=model,
            product=product,
            memory_mib=int(memory.total) // _MIB,
            minor=minor,
            numa_node=self._optional(n.nvmlDeviceGetNumaNodeId, handle, default=-1),
            mig_mode=mig_mode,
            mig_devices=tuple(nvml_mig.read_mig_devices(n, handle, table, minor, dynamic))
            if mig_mode is not MigMode.OFF
            else (),
            mig_geometry=table.geometry if table is not None else None,
        )

    def _optional(self, read: Callable[..., Any], *args: Any, default: int) -> int:
        """`int(read(*args))`, or `default` when NVML says no (NotSupported, NoPermission, ...)."""
        try:
            return int(read(*args))
        except Exception as exc:
            if nvml_error_code(exc) is None and not isinstance(exc, AttributeError):
                raise
            return default

    def _mig_enabled(self, handle: Any) -> bool:
        try:
            current, _pending = self._nvml.nvmlDeviceGetMigMode(handle)
        except Exception as exc:
            if nvml_error_code(exc) is None:
                raise
            return False  # NotSupported: a GPU without MIG
        return bool(current == NVML_DEVICE_MIG_ENABLE)

    def _configured_mode(self, index: int, enabled: bool) -> MigMode:
        """The GPU's mode: what --mig-mode asks where the hardware agrees (the runtime never switches MIG)."""
        asked = self._mig_config.mode(index)
        if not enabled:
            if asked in (MigMode.STATIC, MigMode.DYNAMIC):
                log.warning("GPU %d: --mig-mode asks %s, but MIG is disabled on it; sharing it by time", index, asked)
            return MigMode.OFF
        if asked is MigMode.OFF:
            log.warning("GPU %d: --mig-mode asks off, but MIG is enabled on it; listing its MIG devices", index)
        return MigMode.DYNAMIC if asked is MigMode.DYNAMIC else MigMode.STATIC

    # -- MIG devices -----------------------------------------------------------------------------
    def create_mig_device(self, gpu: GpuUUID, profile: str, start: int) -> MigDeviceInfo:
        with self._mig_lock:
            position, info = self._device(gpu)
            problem = placement_problem(info, profile, start)
            if problem is not None:
                raise problem
            gi = nvml_mig.create(self._nvml, self._handles[gpu], self._tables[gpu], profile, start)
            fresh = self._reread_migs(position)
            made = next((m for m in fresh.mig_devices if m.gpu_instance_id == gi), None)
            if made is None:
                raise MigError(MigFailure.FAILED, f"GPU instance {gi} was made but NVML lists no MIG device for it")
            log.info("made MIG device %s (%s at slice %d) on GPU %d", made.uuid, profile, start, info.index)
            return made

    def destroy_mig_device(self, gpu: GpuUUID, mig_uuid: str) -> None:
        with self._mig_lock:
            position, info = self._device(gpu)
            if info.mig_mode is not MigMode.DYNAMIC:
                raise MigError(
                    MigFailure.CONFLICT, f"GPU {info.index} is not in dynamic MIG mode: its MIG devices stay"
                )
            mig = next((m for m in info.mig_devices if m.uuid == mig_uuid), None)
            if mig is None:
                raise MigError(MigFailure.CONFLICT, f"GPU {info.index} has no MIG device {mig_uuid}")
            try:
                nvml_mig.destroy(self._nvml, self._handles[gpu], mig.gpu_instance_id, mig.compute_instance_id)
            finally:
                self._reread_migs(position)
            log.info("destroyed MIG device %s (%s at slice %d) on GPU %d", mig_uuid, mig.profile, mig.start, info.index)

    def _device(self, gpu: str) -> tuple[int, DeviceInfo]:
        found = next(((i, d) for i, d in enumerate(self._devices) if d.uuid == gpu), None)
        if found is None:
            raise MigError(MigFailure.CONFLICT, f"this node has no GPU {gpu}")
        return found

    def _reread_migs(self, position: int) -> DeviceInfo:
        info = self._devices[position]
        migs = nvml_mig.read_mig_devices(
            self._nvml, self._handles[info.uuid], self._tables.get(info.uuid), info.minor, True
        )
        self._devices[position] = replace(info, mig_devices=tuple(migs))
        return self._devices[position]

    def devices(self) -> Sequence[DeviceInfo]:
        if not self._opened:
            raise BackendError("NVML backend used before open()")
        return list(self._devices)

    # -- samples -------------------------------------------------------------------------------
    def sample(self, load: Mapping[GpuUUID, GpuLoad]) -> Sequence[GpuSample]:
        return [self._sample_one(info) for info in self._devices]

    def _sample_one(self, info: DeviceInfo) -> GpuSample:
        n = self._nvml
        handle = self._handles[info.uuid]
        try:
            util = n.nvmlDeviceGetUtilizationRates(handle)
            used_mib, reserved_mib = self._memory_mib(handle, info.uuid)
            temperature = float(n.nvmlDeviceGetTemperature(handle, 0))  # NVML_TEMPERATURE_GPU
        except Exception as exc:
            code = nvml_error_code(exc)
            if code is None:
                raise
            log.warning("GPU %s (%s) cannot be read: %s", info.index, info.uuid, exc)
            return GpuSample(info.uuid, 0.0, 0.0, 0, info.memory_mib, 0.0, 0.0, 0.0, 0, 0, info.mig_mode, lost=True)
        power = self._optional(n.nvmlDeviceGetPowerUsage, handle, default=0) / 1000.0
        limit = self._optional(n.nvmlDeviceGetEnforcedPowerLimit, handle, default=0) / 1000.0
        return GpuSample(
            uuid=info.uuid,
            utilization_percent=float(util.gpu),
            memory_utilization_percent=float(util.memory),
            memory_used_mib=used_mib,
            memory_total_mib=info.memory_mib,
            memory_reserved_mib=reserved_mib,
            temperature_celsius=temperature,
            power_watts=power,
            power_limit_watts=limit,
            ecc_corrected=self._ecc(handle, 0),
            ecc_uncorrected=self._ecc(handle, 1),
            mig_mode=info.mig_mode,
            sm_clock_mhz=self._maybe(n.nvmlDeviceGetClockInfo, handle, 1),  # NVML_CLOCK_SM
            memory_clock_mhz=self._maybe(n.nvmlDeviceGetClockInfo, handle, 2),  # NVML_CLOCK_MEM
            energy_millijoules=self._maybe(n.nvmlDeviceGetTotalEnergyConsumption, handle),
            pcie_replays=self._maybe(n.nvmlDeviceGetPcieReplayCounter, handle),
            encoder_utilization_percent=self._maybe_first(n.nvmlDeviceGetEncoderUtilization, handle),
            decoder_utilization_percent=self._maybe_first(n.nvmlDeviceGetDecoderUtilization, handle),
        )

    def _memory_mib(self, handle: Any, uuid: GpuUUID) -> tuple[int, int | None]:
        """(memory in use, the driver's reservation) as nvidia-smi and DCGM count them: in use without the
        reservation. Version 2 of `nvmlDeviceGetMemoryInfo` (R510+) gives the reservation apart; version 1
        counts it as used (390 MiB of an 8 GiB GPU in tests/data/gpu/nvidia-smi-q-575.xml), so it is the
        fallback only where version 2 is refused, and then the reservation is unknown (None)."""
        n = self._nvml
        if uuid not in self._memory_v1:
            try:
                memory = n.nvmlDeviceGetMemoryInfo(handle, version=n.nvmlMemory_v2)
                return int(memory.used) // _MIB, int(memory.reserved) // _MIB
            except Exception as exc:
                if nvml_error_code(exc) is None and not isinstance(exc, (AttributeError, TypeError)):
                    raise
                self._memory_v1.add(uuid)  # an old driver or nvidia-ml-py: not asked again
        return int(n.nvmlDeviceGetMemoryInfo(handle).used) // _MIB, None

    def _maybe(self, read: Callable[..., Any], *args: Any) -> int | None:
        """`int(read(*args))`, or None when NVML says no: the reading has no source on this GPU."""
        try:
            return int(read(*args))
        except Exception as exc:
            if nvml_error_code(exc) is None and not isinstance(exc, AttributeError):
                raise
            return None

    def _maybe_first(self, read: Callable[..., Any], handle: Any) -> float | None:
        """The utilisation of an encoder/decoder read (NVML answers [percent, sampling period in µs])."""
        try:
            return float(read(handle)[0])
        except Exception as exc:
            if nvml_error_code(exc) is None and not isinstance(exc, AttributeError):
                raise
            return None

    def processes(self) -> Sequence[GpuProcess]:
        """The processes on every GPU (`nvml_usage`); a GPU that cannot be read is left out."""
        out: list[GpuProcess] = []
        for info in self._devices:
            try:
                out.extend(self._processes.read(self._handles[info.uuid], info))
            except Exception as exc:
                if nvml_error_code(exc) is None:
                    raise
                log.warning("GPU %s (%s): its processes cannot be read: %s", info.index, info.uuid, exc)
        return out

    def _ecc(self, handle: Any, error_type: int) -> int:
        # NVML_MEMORY_ERROR_TYPE_{CORRECTED=0,UNCORRECTED=1}, NVML_VOLATILE_ECC=0; consumer GPUs: NotSupported.
        return self._optional(self._nvml.nvmlDeviceGetTotalEccErrors, handle, error_type, 0, default=0)

    # -- events --------------------------------------------------------------------------------
    def start_events(self, listener: HealthListener) -> None:
        if self._events_started:
            raise RuntimeError("start_events called twice")
        self._events_started = True
        event_set = self._nvml.nvmlEventSetCreate()
        for info in self._devices:
            self._register(event_set, info)
        self._workers.spawn("nvml-events", lambda: self._event_loop(event_set, listener))

    def _register(self, event_set: Any, info: DeviceInfo) -> None:
        n = self._nvml
        handle = self._handles[info.uuid]
        try:
            mask = WANTED_EVENTS & int(n.nvmlDeviceGetSupportedEventTypes(handle))
            if mask:
                n.nvmlDeviceRegisterEvents(handle, mask, event_set)
        except Exception as exc:
            if nvml_error_code(exc) is None:
                raise
            log.warning("GPU %s (%s): no health events (too old for health checks?): %s", info.index, info.uuid, exc)

    def _event_loop(self, event_set: Any, listener: HealthListener) -> None:
        n = self._nvml
        try:
            while not self._workers.stopped:
                try:
                    data = n.nvmlEventSetWait(event_set, self._timeout_ms)
                except Exception as exc:
                    if nvml_error_code(exc) == NVML_ERROR_TIMEOUT:
                        continue
                    if nvml_error_code(exc) is None:
                        raise
                    log.error("NVML event wait failed, marking every GPU unhealthy: %s", exc)
                    listener(HealthEvent(EventKind.ERROR, None, self._now_ms(), detail=f"NVML event wait: {exc}"))
                    self._workers.wait(1.0)
                    continue
                for event in self._translate(data):
                    listener(event)
        finally:
            try:
                n.nvmlEventSetFree(event_set)
            except Exception as exc:  # shutting down; nothing left to do with the error
                log.debug("nvmlEventSetFree: %s", exc)

    def _translate(self, data: Any) -> list[HealthEvent]:
        try:
            uuid: GpuUUID | None = GpuUUID(_text(self._nvml.nvmlDeviceGetUUID(data.device)))
        except Exception as exc:
            if nvml_error_code(exc) is None:
                raise
            uuid = None
        kind = int(data.eventType)
        now = self._now_ms()
        events = []
        if kind & EVENT_XID_CRITICAL:
            events.append(HealthEvent(EventKind.XID, uuid, now, xid=int(data.eventData)))
        if kind & EVENT_DOUBLE_BIT_ECC:
            events.append(HealthEvent(EventKind.ECC, uuid, now, uncorrectable=True, detail="double-bit ECC"))
        if kind & EVENT_SINGLE_BIT_ECC:
            events.append(HealthEvent(EventKind.ECC, uuid, now, detail="single-bit ECC"))
        return events

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def close(self) -> None:
        self._workers.stop(timeout=self._timeout_ms / 1000.0 + 2.0)
        if self._opened:
            self._opened = False
            try:
                self._nvml.nvmlShutdown()
            except Exception as exc:
                log.debug("nvmlShutdown: %s", exc)


def _text(value: object) -> str:
    """NVML strings are str in Python 3 (convertStrBytes); older bindings gave bytes."""
    return value.decode() if isinstance(value, bytes) else str(value)

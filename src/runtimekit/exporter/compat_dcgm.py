"""dcgm-exporter's metric names (`--metrics-compat dcgm`, on by default under the `nvidia` preset), so
that NVIDIA's Grafana dashboard and alerts written for dcgm-exporter chart this kit's GPUs unchanged.

The families, their types and help strings are those of dcgm-exporter's default counters file
(etc/default-counters.csv in NVIDIA/dcgm-exporter); a family whose reading the runtime does not give
(no NVML source on the GPU, or none simulated) is left out, never written as zero. Labels are
dcgm-exporter's: `gpu` (index), `UUID`, `device` (`nvidia<index>`), `modelName` (the product name),
`Hostname` (the node), `DCGM_FI_DRIVER_VERSION` (empty where there is no driver: simulated), and
`container`, `namespace`, `pod` — empty on a GPU no container holds, and on a GPU several containers
share one copy of each device reading per container, as dcgm-exporter's Kubernetes mapping does with
shared GPUs; a container on a MIG device has its copy labelled with the device's `GPU_I_PROFILE` and
`GPU_I_ID`, as dcgm-exporter labels a GPU instance. Where the runtime reads each container's own usage,
`DCGM_FI_DEV_GPU_UTIL` and `DCGM_FI_DEV_FB_USED` are what dcgm-exporter's per-process mapping makes of
them: the device's reading with empty pod labels, and each container's own use with its labels.
Called by `RuntimeCollector` with the scrape's one sample.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

from prometheus_client.core import Metric

from runtimekit.exporter.sample import AllocationReading, ContainerReading, GpuReading, Sample
from runtimekit.model import GPU_MODELS

DCGM_LABELS = ["gpu", "UUID", "device", "modelName", "Hostname", "container", "namespace", "pod"]
DCGM_LABELS += ["GPU_I_PROFILE", "GPU_I_ID"]  # a MIG device's GPU instance; empty for a whole GPU
DCGM_LABELS += ["DCGM_FI_DRIVER_VERSION"]  # the counters file's one label field; empty where no driver
_MIB = 1024.0 * 1024.0

Reading = Callable[[GpuReading], float | None]


def _percent(value: float | None) -> float | None:
    return None if value is None else round(value * 100.0, 6)


def _free_mib(g: GpuReading) -> float | None:
    """Free as DCGM and nvidia-smi count it: total less used less the driver's reservation."""
    if g.memory_total_bytes is None or g.memory_used_bytes is None:
        return None
    reserved = g.memory_reserved_bytes or 0.0
    return max(g.memory_total_bytes - g.memory_used_bytes - reserved, 0.0) / _MIB


def _reserved_mib(g: GpuReading) -> float | None:
    return None if g.memory_reserved_bytes is None else g.memory_reserved_bytes / _MIB


def _used_mib(g: GpuReading) -> float | None:
    return None if g.memory_used_bytes is None else g.memory_used_bytes / _MIB


# (name, type, help as the counters file has it, reading); in the file's order.
FAMILIES: Sequence[tuple[str, str, str, Reading]] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", lambda g: g.sm_clock_mhz),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", lambda g: g.memory_clock_mhz),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", lambda g: g.temperature_celsius),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", lambda g: g.power_watts),
    (
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "counter",
        "Total energy consumption since boot (in mJ).",
        lambda g: g.energy_millijoules,
    ),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.", lambda g: g.pcie_replays),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", lambda g: _percent(g.utilization)),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", lambda g: _percent(g.memory_utilization)),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).", lambda g: _percent(g.encoder_utilization)),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).", lambda g: _percent(g.decoder_utilization)),
    (
        "DCGM_FI_DEV_XID_ERRORS",
        "gauge",
        "Value of the last XID error encountered.",
        lambda g: float(g.xids[-1].xid) if g.xids else 0.0,
    ),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", _free_mib),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", _used_mib),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB).", _reserved_mib),
)

# Families of the default counters file with no source here, and why (docs/user-guide/exporter.md).
OMITTED = {
    "DCGM_FI_DEV_MEMORY_TEMP": "NVML gives memory temperature only as a field value the runtime does not read",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": "NVLink counters are not read by the runtime",
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS": "vGPU (GRID) licensing does not apply to the GPUs the kit shares",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": "row remapping is not read by the runtime",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": "row remapping is not read by the runtime",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": "row remapping is not read by the runtime",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "profiling (DCP) metrics come from DCGM's profiling module, not NVML",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "profiling (DCP) metrics come from DCGM's profiling module, not NVML",
    "DCGM_FI_PROF_DRAM_ACTIVE": "profiling (DCP) metrics come from DCGM's profiling module, not NVML",
    "DCGM_FI_PROF_PCIE_TX_BYTES": "profiling (DCP) metrics come from DCGM's profiling module, not NVML",
    "DCGM_FI_PROF_PCIE_RX_BYTES": "profiling (DCP) metrics come from DCGM's profiling module, not NVML",
}


# The families dcgm-exporter gives per process (hence per container) when it attributes processes to pods.
PER_CONTAINER: dict[str, Callable[[ContainerReading], float | None]] = {
    "DCGM_FI_DEV_GPU_UTIL": lambda c: _percent(c.sm_ratio),
    "DCGM_FI_DEV_FB_USED": lambda c: c.memory_used_bytes / _MIB,
}


def model_name(g: GpuReading) -> str:
    """dcgm-exporter's `modelName`: the product name NVML reports (`NVIDIA H200`), else the kit's for the model."""
    if g.product:
        return g.product
    spec = GPU_MODELS.get(g.model)
    return spec.product if spec is not None else g.model


def _instance(a: AllocationReading) -> list[str]:
    """`GPU_I_PROFILE`, `GPU_I_ID` of a grant on a MIG device; empty for a GPU share."""
    if not a.mig_parent_uuid:
        return ["", ""]
    return [a.mig_profile, "" if a.gpu_instance_id is None else str(a.gpu_instance_id)]


def _series(sample: Sample) -> Iterator[tuple[GpuReading, list[str]]]:
    """Each GPU's label sets: one per container holding it (or one of its MIG devices, with the
    device's GPU instance), or one with empty pod labels."""
    holders: dict[str, list[AllocationReading]] = {}
    for a in sample.allocations:
        holders.setdefault(a.physical_uuid, []).append(a)
    for g in sample.gpus:
        device = [str(g.index), g.uuid, f"nvidia{g.index}", model_name(g), sample.node]
        held = holders.get(g.uuid, [])
        if not held:
            yield g, [*device, "", "", "", "", "", g.driver_version]
        for a in held:
            yield g, [*device, a.container, a.namespace, a.pod, *_instance(a), g.driver_version]


def _own_use(
    sample: Sample, device: Reading, own: Callable[[ContainerReading], float | None]
) -> Iterator[tuple[list[str], float | None]]:
    """Each GPU's reading with empty pod labels, then each container's own use of it (per MIG device,
    with its GPU instance, for a container on MIG devices); an unknown use is left out."""
    instances = {a.gpu_uuid: _instance(a) for a in sample.allocations if a.mig_parent_uuid}
    used: dict[tuple[str, str, str, str, str, str], float] = {}
    for c in sample.containers:
        value = own(c)
        if value is not None:
            profile, gi = instances.get(c.device_uuid, ["", ""])
            key = (c.gpu_uuid, c.container, c.namespace, c.pod, profile, gi)
            used[key] = used.get(key, 0.0) + value
    for g in sample.gpus:
        labels = [str(g.index), g.uuid, f"nvidia{g.index}", model_name(g), sample.node]
        yield [*labels, "", "", "", "", "", g.driver_version], device(g)
        for (uuid, *owner), value in used.items():
            if uuid == g.uuid:
                yield [*labels, *owner, g.driver_version], value


def dcgm_families(sample: Sample) -> Iterator[Metric]:
    """The dcgm-exporter families of one sample; families with no reading on any GPU are left out."""
    # each series' labels made once and shared by every family (a scrape writes them 13 times)
    series = [(dict(zip(DCGM_LABELS, labels, strict=True)), g) for g, labels in _series(sample)]
    for name, kind, doc, read in FAMILIES:
        family = Metric(name, doc, kind)
        if sample.usage_source and name in PER_CONTAINER:
            rows: Iterable[tuple[dict[str, str], float | None]] = (
                (dict(zip(DCGM_LABELS, labels, strict=True)), value)
                for labels, value in _own_use(sample, read, PER_CONTAINER[name])
            )
        else:
            rows = ((labels, read(g)) for labels, g in series)
        for labels, value in rows:
            if value is not None:
                # named exactly as dcgm-exporter writes it: its counters carry no `_total`
                family.add_sample(name, labels, value)
        if family.samples:
            yield family

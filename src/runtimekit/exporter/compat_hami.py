"""HAMi's metric names (`--metrics-compat hami`, on by default under the `hami` preset), so that HAMi's
Grafana dashboards and alerts chart this kit's shares unchanged.

HAMi publishes from two places: its vGPU monitor on each node (cmd/vGPUmonitor/metrics.go: the GPUs'
readings and each container's vGPU) and its scheduler (cmd/scheduler/metrics.go: what is granted on
each GPU, under the constant label `zone="vGPU"`). Each node's exporter here writes both for its own
node, from the scrape's one sample: the current `hami_*` names and the older names HAMi writes with
`--legacy-metrics` (`HostGPUMemoryUsage`, `GPUDeviceMemoryLimit`, `vGPU_device_memory_limit_in_bytes`
...), with HAMi's labels and units (its `*_ratio` utilisations and core figures are percent, 0-100).
A container's own usage (`hami_vgpu_memory_used_bytes`, `hami_container_device_memory_bytes`,
`hami_container_device_utilization_ratio` and their older names) comes from the runtime's per-container
readings and is left out where the runtime has none (docs/user-guide/exporter.md). Called by
`RuntimeCollector`.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily

from runtimekit.exporter.compat_dcgm import model_name
from runtimekit.exporter.sample import AllocationReading, ContainerReading, Sample

_MIB = 1024.0 * 1024.0
ZONE = "vGPU"  # the constant label HAMi's scheduler registers its collector under

HOST = ["node", "device_index", "device_uuid", "device_type"]
HOST_LEGACY = ["nodeid", "deviceidx", "deviceuuid", "devicetype"]
CONTAINER = ["namespace", "pod", "container", "vdevice_index", "device_uuid"]
CONTAINER_LEGACY = ["podnamespace", "podname", "ctrname", "vdeviceid", "deviceuuid"]
SCHED = ["node", "device_uuid", "device_index", "device_type", "zone"]
SCHED_LEGACY = ["nodeid", "deviceuuid", "deviceidx", "devicetype", "zone"]


def _percent(ratio: float) -> float:
    return round(ratio * 100.0, 6)


def _gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels)


def hami_families(sample: Sample) -> Iterator[GaugeMetricFamily]:
    yield from _monitor_families(sample)
    yield from _container_families(sample)
    yield from _scheduler_families(sample)


def _monitor_families(sample: Sample) -> Iterator[GaugeMetricFamily]:
    """The vGPU monitor's per-GPU readings (utilisation in percent, as HAMi writes NVML's figure)."""
    used = _gauge("hami_host_gpu_memory_used_bytes", "GPU device memory usage in bytes", HOST)
    util = _gauge("hami_host_gpu_utilization_ratio", "GPU core utilization ratio (0-100)", HOST)
    mem_util = _gauge(
        "hami_host_gpu_memory_controller_utilization_ratio",
        "GPU memory controller utilization ratio (0-100)",
        HOST[1:],
    )
    used_legacy = _gauge("HostGPUMemoryUsage", "GPU device memory usage", HOST_LEGACY)
    util_legacy = _gauge("HostCoreUtilization", "GPU core utilization", HOST_LEGACY)
    for g in sample.gpus:
        labels = [sample.node, str(g.index), g.uuid, model_name(g.model)]
        if g.memory_used_bytes is not None:
            used.add_metric(labels, g.memory_used_bytes)
            used_legacy.add_metric(labels, g.memory_used_bytes)
        if g.utilization is not None:
            util.add_metric(labels, _percent(g.utilization))
            util_legacy.add_metric(labels, _percent(g.utilization))
        if g.memory_utilization is not None:
            mem_util.add_metric(labels[1:], _percent(g.memory_utilization))
    yield from (used, util, mem_util, used_legacy, util_legacy)


def _vdevice_numbers(sample: Sample) -> dict[tuple[str, str, str, str], int]:
    """HAMi's `vdevice_index` of each (namespace, pod, container, GPU UUID): the container's devices
    numbered 0, 1, ... (here in the order of their index on the node), from its grants and its usage."""
    per_container: dict[tuple[str, str, str], set[tuple[str, str]]] = {}
    items: list[AllocationReading | ContainerReading] = [*sample.allocations, *sample.containers]
    for item in items:
        per_container.setdefault((item.namespace, item.pod, item.container), set()).add((item.gpu_index, item.gpu_uuid))
    numbers = {}
    for owner, devices in per_container.items():
        ordered = sorted(devices, key=lambda d: (d[0] == "", d[0].zfill(6), d[1]))
        for number, (_, uuid) in enumerate(ordered):
            numbers[(*owner, uuid)] = number
    return numbers


def _container_families(sample: Sample) -> Iterator[GaugeMetricFamily]:
    numbers = _vdevice_numbers(sample)

    def labels(item: AllocationReading | ContainerReading) -> list[str]:
        number = numbers[(item.namespace, item.pod, item.container, item.gpu_uuid)]
        return [item.namespace, item.pod, item.container, str(number), item.gpu_uuid]

    limit = _gauge("hami_vgpu_memory_limit_bytes", "vGPU device memory limit in bytes", CONTAINER)
    limit_legacy = _gauge("vGPU_device_memory_limit_in_bytes", "vGPU device limit", CONTAINER_LEGACY)
    for a in sample.allocations:
        limit.add_metric(labels(a), a.memory_bytes)
        limit_legacy.add_metric(labels(a), a.memory_bytes)
    yield from (limit, limit_legacy)
    if not sample.usage_source:
        return  # the runtime reads no per-container usage: these families have no source
    used = _gauge("hami_vgpu_memory_used_bytes", "vGPU device memory usage in bytes", CONTAINER)
    device_memory = _gauge("hami_container_device_memory_bytes", "Container device memory usage in bytes", CONTAINER)
    util = _gauge("hami_container_device_utilization_ratio", "Container device SM utilization ratio", CONTAINER)
    used_legacy = _gauge("vGPU_device_memory_usage_in_bytes", "vGPU device usage", CONTAINER_LEGACY)
    # HAMi's labels split the memory into context, module and data; the kit reads only the total, so
    # those labels stay empty rather than claim a split it does not know.
    memory_legacy = _gauge(
        "Device_memory_desc_of_container",
        "Container device memory description",
        [*CONTAINER_LEGACY, "context", "module", "data", "offset"],
    )
    util_legacy = _gauge(
        "Device_utilization_desc_of_container", "Container device utilization description", CONTAINER_LEGACY
    )
    memory: dict[tuple[str, ...], float] = {}
    sm: dict[tuple[str, ...], float] = {}
    for c in sample.containers:  # a container's MIG devices on one GPU count together, as one vdevice
        key = tuple(labels(c))
        memory[key] = memory.get(key, 0.0) + c.memory_used_bytes
        if c.sm_ratio is not None:
            sm[key] = sm.get(key, 0.0) + c.sm_ratio
    for key, value in memory.items():
        for family in (used, device_memory, used_legacy):
            family.add_metric(list(key), value)
        memory_legacy.add_metric([*key, "", "", "", ""], value)
    for key, ratio in sm.items():
        util.add_metric(list(key), _percent(ratio))  # percent, as HAMi writes its SM figure
        util_legacy.add_metric(list(key), _percent(ratio))
    yield from (used, device_memory, util, used_legacy, memory_legacy, util_legacy)


def _scheduler_families(sample: Sample) -> Iterator[GaugeMetricFamily]:
    """What HAMi's scheduler reports per GPU: limits (memory in bytes, cores in percent: 100 a card),
    what is granted, how many containers share the GPU."""
    memory_limit = _gauge("hami_gpu_memory_limit_bytes", "Device memory limit for a certain GPU", SCHED)
    core_limit = _gauge("hami_gpu_core_limit_ratio", "Device core limit for a certain GPU", SCHED)
    memory_allocated = _gauge(
        "hami_gpu_memory_allocated_bytes",
        "Device memory allocated for a certain GPU",
        ["node", "device_uuid", "device_index", "device_cores", "device_type", "zone"],
    )
    shared = _gauge("hami_gpu_shared_count", "Number of containers sharing this GPU", SCHED)
    core_allocated = _gauge("hami_gpu_core_allocated_ratio", "Device core allocated for a certain GPU", SCHED)
    overview = _gauge(
        "hami_node_gpu_overview",
        "GPU overview on a certain node",
        ["node", "device_uuid", "device_index", "device_cores", "device_memory_limit", "device_type", "zone"],
    )
    memory_ratio = _gauge(
        "hami_node_gpu_memory_allocated_ratio", "GPU Memory Allocated Percentage on a certain GPU", SCHED
    )
    legacy_memory_limit = _gauge("GPUDeviceMemoryLimit", "Device memory limit for a certain GPU", SCHED_LEGACY)
    legacy_core_limit = _gauge("GPUDeviceCoreLimit", "Device memory core limit for a certain GPU", SCHED_LEGACY)
    legacy_memory_allocated = _gauge(
        "GPUDeviceMemoryAllocated",
        "Device memory allocated for a certain GPU",
        ["nodeid", "deviceuuid", "deviceidx", "devicecores", "devicetype", "zone"],
    )
    legacy_shared = _gauge("GPUDeviceSharedNum", "Number of containers sharing this GPU", SCHED_LEGACY)
    legacy_core_allocated = _gauge("GPUDeviceCoreAllocated", "Device core allocated for a certain GPU", SCHED_LEGACY)
    legacy_overview = _gauge(
        "nodeGPUOverview",
        "GPU overview on a certain node",
        ["nodeid", "deviceuuid", "deviceidx", "devicecores", "devicememorylimit", "devicetype", "zone"],
    )
    legacy_memory_ratio = _gauge(
        "nodeGPUMemoryPercentage",
        "GPU Memory Allocated Percentage on a certain GPU",
        ["nodeid", "deviceuuid", "deviceidx", "zone"],
    )
    granted: dict[str, list[AllocationReading]] = {}
    for a in sample.allocations:
        granted.setdefault(a.gpu_uuid, []).append(a)
    for g in sample.gpus:
        if g.memory_total_bytes is None:
            continue
        held = granted.get(g.uuid, [])
        total_mib = g.memory_total_bytes / _MIB
        memory = sum(a.memory_bytes for a in held)
        cores = _percent(sum(a.core_ratio for a in held))
        labels = [sample.node, g.uuid, str(g.index), model_name(g.model), ZONE]
        with_cores = [*labels[:3], "100", *labels[3:]]
        for new, old, value in (
            (memory_limit, legacy_memory_limit, g.memory_total_bytes),
            (core_limit, legacy_core_limit, 100.0),
            (shared, legacy_shared, float(len(held))),
            (core_allocated, legacy_core_allocated, cores),
        ):
            new.add_metric(labels, value)
            old.add_metric(labels, value)
        memory_allocated.add_metric(with_cores, memory)
        legacy_memory_allocated.add_metric(with_cores, memory)
        overview_labels = [*labels[:3], "100", f"{total_mib:g}", *labels[3:]]
        overview.add_metric(overview_labels, memory)
        legacy_overview.add_metric(overview_labels, memory)
        memory_ratio.add_metric(labels, memory / g.memory_total_bytes)
        legacy_memory_ratio.add_metric([*labels[:3], ZONE], memory / g.memory_total_bytes)
    yield from (memory_limit, core_limit, memory_allocated, shared, core_allocated, overview, memory_ratio)
    yield from (
        legacy_memory_limit,
        legacy_core_limit,
        legacy_memory_allocated,
        legacy_shared,
        legacy_core_allocated,
        legacy_overview,
        legacy_memory_ratio,
    )

"""Per-container GPU usage families: what each container uses of its grant, and what no container does.

Read from the runtime's `ExporterGetDataList.container_usage` and `unattributed` (feature
`container-usage`); a runtime that sends no usage (`usage_source` empty) gets none of these families.
Container families carry the labels of the `runtimekit_allocation_*` families (`node`, `namespace`,
`pod`, `container`, `gpu`, `uuid`: the MIG device's UUID for a MIG grant), so the share granted is
`runtimekit_allocation_core_ratio` / `runtimekit_allocation_memory_limit_bytes` of the same series and
`used / granted` needs no `on()`. A deleted pod's series go with its allocation (each scrape is fresh).
Cardinality: at most `limit` containers' series per node, the ones using most memory first; the rest
are left out and counted in `runtimekit_container_series_dropped_total`. Caller: `collector.RuntimeCollector`.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from runtimekit.exporter.sample import ContainerReading, Sample

CONTAINER_LABELS = ["node", "namespace", "pod", "container", "gpu", "uuid"]
GPU_LABELS = ["node", "gpu", "uuid", "model"]
DEFAULT_MAX_CONTAINER_SERIES = 512  # config.ExporterConfig.max_container_series


def kept(containers: tuple[ContainerReading, ...], limit: int) -> tuple[list[ContainerReading], int]:
    """The containers whose series are exported (most memory used first, then by name) and how many are not."""
    order = sorted(containers, key=lambda c: (-c.memory_used_bytes, c.namespace, c.pod, c.container, c.device_uuid))
    return order[:limit], max(0, len(order) - limit)


def usage_families(sample: Sample, limit: int) -> tuple[list[GaugeMetricFamily], int]:
    """The families of one sample and how many containers' series the limit left out."""
    if not sample.usage_source:
        return [], 0
    used = GaugeMetricFamily(
        "runtimekit_container_gpu_memory_used_bytes",
        "GPU memory a container's processes use on one of its grants",
        labels=CONTAINER_LABELS,
    )
    sm = GaugeMetricFamily(
        "runtimekit_container_gpu_utilization_ratio",
        "SM utilisation of a container's processes over the last sample interval, as a share of the GPU (0-1)",
        labels=CONTAINER_LABELS,
    )
    over = GaugeMetricFamily(
        "runtimekit_container_over_share",
        "1 when a container uses more GPU memory than granted or SM utilisation 5 points above its core share",
        labels=CONTAINER_LABELS,
    )
    containers, dropped = kept(sample.containers, limit)
    for c in containers:
        labels = [sample.node, c.namespace, c.pod, c.container, c.gpu_index, c.device_uuid]
        used.add_metric(labels, c.memory_used_bytes)
        if c.sm_ratio is not None:
            sm.add_metric(labels, c.sm_ratio)
        over.add_metric(labels, 1.0 if c.over_share else 0.0)
    return [used, sm, over, *_remainder_families(sample)], dropped


def _remainder_families(sample: Sample) -> Iterator[GaugeMetricFamily]:
    memory = GaugeMetricFamily(
        "runtimekit_gpu_unattributed_memory_bytes",
        "GPU memory in use that no container accounts for (driver, processes outside allocated containers)",
        labels=GPU_LABELS,
    )
    util = GaugeMetricFamily(
        "runtimekit_gpu_unattributed_utilization_ratio",
        "GPU utilisation that no container accounts for (0-1)",
        labels=GPU_LABELS,
    )
    gpus = {g.uuid: g for g in sample.gpus}
    for r in sample.unattributed:
        g = gpus.get(r.gpu_uuid)
        if g is None:
            continue
        labels = [sample.node, str(g.index), g.uuid, g.model]
        memory.add_metric(labels, r.memory_bytes)
        if r.sm_ratio is not None:
            util.add_metric(labels, r.sm_ratio)
    yield memory
    yield util


def dropped_family(total: int) -> CounterMetricFamily:
    family = CounterMetricFamily(
        "runtimekit_container_series_dropped",
        "Containers' usage series left out by the exporter's per-node limit (maxContainerSeries), summed over scrapes",
    )
    family.add_metric([], total)
    return family

"""The Prometheus collector: each scrape reads the runtime once (with a timeout) and yields fresh
metric families; nothing accumulates between scrapes (the counters are the runtime's own).
A slow or dead runtime yields `runtimekit_runtime_up 0` and the scrape still answers.

Metric names follow Prometheus conventions: the `runtimekit_` prefix, base units (bytes, seconds,
watts, ratios 0-1, celsius), `_total` for counters, `_info` for labels-only metrics.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector

from runtimekit import __version__
from runtimekit.api.runtime_client import RuntimeCallError, RuntimeClient
from runtimekit.exporter.compat import compat_families
from runtimekit.exporter.sample import Sample, SampleError, read_sample
from runtimekit.exporter.usage import DEFAULT_MAX_CONTAINER_SERIES, dropped_family, usage_families
from runtimekit.protocol import KitProtocol

GPU_LABELS = ["node", "gpu", "uuid", "model"]
ALLOC_LABELS = ["node", "namespace", "pod", "container", "gpu", "uuid"]


class RuntimeCollector(Collector):
    def __init__(
        self,
        client: RuntimeClient,
        protocol: KitProtocol,
        node_name: str = "",
        max_container_series: int = DEFAULT_MAX_CONTAINER_SERIES,
        compat: tuple[str, ...] = (),
    ) -> None:
        self.client, self.protocol, self.node_name = client, protocol, node_name
        self.max_container_series = max_container_series
        self.dropped_series = 0  # a real counter: containers' series left out by the limit, over all scrapes
        self.compat = compat  # peers' metric names written too (runtimekit.exporter.compat)
        self.last_error = ""

    def describe(self) -> list[object]:
        return []  # collected at scrape time only (no describe-time call to the runtime)

    def collect(self) -> Iterator[Metric]:
        started = time.perf_counter()
        up = GaugeMetricFamily("runtimekit_runtime_up", "1 when the node runtime answered this scrape")
        info = InfoMetricFamily("runtimekit_exporter", "The exporter's version and protocol fingerprint")
        info.add_metric([], {"version": __version__, "protocol_fingerprint": self.protocol.fingerprint})
        yield info
        try:
            sample = read_sample(self.client, self.node_name)
        except SampleError as exc:
            self.last_error = str(exc)
            up.add_metric([], 0)
            yield up
            yield _duration(started)
            return
        self.last_error = ""
        up.add_metric([], 1)
        yield up
        yield from self._runtime_info(sample)
        yield from gpu_families(sample)
        yield from allocation_families(sample)
        yield from state_families(sample)
        families, left_out = usage_families(sample, self.max_container_series)
        self.dropped_series += left_out
        yield from families
        yield dropped_family(self.dropped_series)
        yield from compat_families(sample, self.compat)
        dropped = GaugeMetricFamily(
            "runtimekit_runtime_malformed_readings",
            "Readings of the last scrape left out because the runtime sent them malformed",
        )
        dropped.add_metric([], sample.dropped)
        yield dropped
        yield _duration(started)

    def _runtime_info(self, sample: Sample) -> Iterator[InfoMetricFamily]:
        try:
            version = self.client.version()
        except RuntimeCallError:
            return
        family = InfoMetricFamily("runtimekit_runtime", "The node runtime's version, backend, isolation and protocol")
        family.add_metric(
            [],
            {
                "node": sample.node,
                "version": version.runtime_version,
                "api_level": str(version.api_level),
                "backend": version.backend,
                "isolation": version.isolation,
                "protocol_fingerprint": version.protocol_fingerprint,
            },
        )
        yield family


def state_families(sample: Sample) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    """Whether the runtime's allocations cover what runs on the node, and what it rebuilt."""
    labels = ["node"]
    state = GaugeMetricFamily(
        "runtimekit_runtime_checkpoint_state",
        "1 for the state of the runtime's allocations (ok, recovered: they cover the node's running containers)",
        labels=[*labels, "state"],
    )
    state.add_metric([sample.node, sample.state.checkpoint], 1.0)
    rebuilt = CounterMetricFamily(
        "runtimekit_runtime_allocations_rebuilt",
        "Allocations the runtime rebuilt from the node's pods since it started (missing from its checkpoint)",
        labels=labels,
    )
    rebuilt.add_metric([sample.node], sample.state.rebuilt_total)
    torn = CounterMetricFamily(
        "runtimekit_runtime_journal_torn_lines",
        "Torn last lines of the checkpoint journal found at start",
        labels=labels,
    )
    torn.add_metric([sample.node], sample.state.torn_total)
    unaccounted = GaugeMetricFamily(
        "runtimekit_runtime_unaccounted_containers",
        "Running containers that hold GPU devices the runtime has no allocation for",
        labels=labels,
    )
    unaccounted.add_metric([sample.node], sample.state.unaccounted)
    yield from (state, rebuilt, torn, unaccounted)


def _duration(started: float) -> GaugeMetricFamily:
    family = GaugeMetricFamily("runtimekit_exporter_scrape_duration_seconds", "Time this scrape took")
    family.add_metric([], time.perf_counter() - started)
    return family


def gpu_families(sample: Sample) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    def gauge(name: str, doc: str) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, doc, labels=GPU_LABELS)

    util = gauge("runtimekit_gpu_utilization_ratio", "GPU compute utilization over the last sample period (0-1)")
    mem_util = gauge("runtimekit_gpu_memory_utilization_ratio", "GPU memory controller utilization (0-1)")
    used = gauge("runtimekit_gpu_memory_used_bytes", "GPU memory in use")
    total = gauge("runtimekit_gpu_memory_total_bytes", "GPU memory in total")
    reserved = gauge("runtimekit_gpu_memory_reserved_bytes", "GPU memory the driver reserves (not in use, not free)")
    temp = gauge("runtimekit_gpu_temperature_celsius", "GPU temperature")
    power = gauge("runtimekit_gpu_power_watts", "GPU power draw")
    limit = gauge("runtimekit_gpu_power_limit_watts", "GPU enforced power limit")
    ecc = CounterMetricFamily(
        "runtimekit_gpu_ecc_errors", "ECC errors since the driver loaded", labels=[*GPU_LABELS, "type"]
    )
    xid = CounterMetricFamily(
        "runtimekit_gpu_xid_errors", "XID error events since the runtime started", labels=GPU_LABELS
    )
    last_xid = gauge("runtimekit_gpu_last_xid", "The number of the most recent XID event (0: none)")
    healthy = gauge("runtimekit_gpu_healthy", "1 when the GPU is healthy, 0 when not")
    mig = GaugeMetricFamily(
        "runtimekit_gpu_mig_mode", "1 for the GPU's MIG mode (off, static, dynamic)", labels=[*GPU_LABELS, "mode"]
    )
    for g in sample.gpus:
        labels = [sample.node, str(g.index), g.uuid, g.model]
        for family, value in (
            (util, g.utilization),
            (mem_util, g.memory_utilization),
            (used, g.memory_used_bytes),
            (total, g.memory_total_bytes),
            (reserved, g.memory_reserved_bytes),
            (temp, g.temperature_celsius),
            (power, g.power_watts),
            (limit, g.power_limit_watts),
        ):
            if value is not None:
                family.add_metric(labels, value)
        ecc.add_metric([*labels, "corrected"], g.ecc_corrected)
        ecc.add_metric([*labels, "uncorrected"], g.ecc_uncorrected)
        xid.add_metric(labels, g.xid_count)
        last_xid.add_metric(labels, g.xids[-1].xid if g.xids else 0)
        if g.healthy is not None:
            healthy.add_metric(labels, 1.0 if g.healthy else 0.0)
        mig.add_metric([*labels, g.mig_mode], 1.0)
    yield from (util, mem_util, used, total, reserved, temp, power, limit, ecc, xid, last_xid, healthy, mig)
    reasons = GaugeMetricFamily(
        "runtimekit_gpu_unhealthy_reason", "1 with the reason of an unhealthy GPU", labels=[*GPU_LABELS, "reason"]
    )
    for g in sample.gpus:
        if g.healthy is False:
            reasons.add_metric([sample.node, str(g.index), g.uuid, g.model, g.health_reason or "unknown"], 1.0)
    yield reasons


def allocation_families(sample: Sample) -> Iterator[GaugeMetricFamily]:
    core = GaugeMetricFamily(
        "runtimekit_allocation_core_ratio", "Compute share granted to a container on a GPU (0-1)", labels=ALLOC_LABELS
    )
    memory = GaugeMetricFamily(
        "runtimekit_allocation_memory_limit_bytes", "GPU memory granted to a container on a GPU", labels=ALLOC_LABELS
    )
    per_gpu_core: dict[str, float] = {}
    per_gpu_mem: dict[str, float] = {}
    for a in sample.allocations:
        labels = [sample.node, a.namespace, a.pod, a.container, a.gpu_index, a.gpu_uuid]
        core.add_metric(labels, a.core_ratio)
        memory.add_metric(labels, a.memory_bytes)
        per_gpu_core[a.gpu_uuid] = per_gpu_core.get(a.gpu_uuid, 0.0) + a.core_ratio
        per_gpu_mem[a.gpu_uuid] = per_gpu_mem.get(a.gpu_uuid, 0.0) + a.memory_bytes
    yield core
    yield memory
    gpu_core = GaugeMetricFamily(
        "runtimekit_gpu_core_allocated_ratio", "Compute share of the GPU granted to containers (0-1)", labels=GPU_LABELS
    )
    gpu_mem = GaugeMetricFamily(
        "runtimekit_gpu_memory_allocated_bytes", "GPU memory granted to containers", labels=GPU_LABELS
    )
    for g in sample.gpus:
        labels = [sample.node, str(g.index), g.uuid, g.model]
        gpu_core.add_metric(labels, min(per_gpu_core.get(g.uuid, 0.0), 1.0))
        gpu_mem.add_metric(labels, per_gpu_mem.get(g.uuid, 0.0))
    yield gpu_core
    yield gpu_mem
    node_labels = ["node"]
    capacity_core = GaugeMetricFamily(
        "runtimekit_node_gpu_core_capacity", "Compute capacity of the node's healthy GPUs, in GPUs", labels=node_labels
    )
    allocated_core = GaugeMetricFamily(
        "runtimekit_node_gpu_core_allocated", "Compute granted to containers on the node, in GPUs", labels=node_labels
    )
    capacity_mem = GaugeMetricFamily(
        "runtimekit_node_gpu_memory_capacity_bytes", "Memory of the node's healthy GPUs", labels=node_labels
    )
    allocated_mem = GaugeMetricFamily(
        "runtimekit_node_gpu_memory_allocated_bytes", "GPU memory granted to containers on the node", labels=node_labels
    )
    healthy = [g for g in sample.gpus if g.healthy is not False]
    capacity_core.add_metric([sample.node], float(len(healthy)))
    allocated_core.add_metric([sample.node], sum(a.core_ratio for a in sample.allocations))
    capacity_mem.add_metric([sample.node], sum(g.memory_total_bytes or 0.0 for g in healthy))
    allocated_mem.add_metric([sample.node], sum(a.memory_bytes for a in sample.allocations))
    yield from (capacity_core, allocated_core, capacity_mem, allocated_mem)

"""An example custom collector for the exporter: the age of each container's GPU allocation.

Enable it in the exporter's config:  collectors: ["examples/exporter/allocation_age.py:factory"]
or publish `factory` in your package under the entry-point group `runtimekit.exporter.collectors`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily

from runtimekit.api.runtime_client import RuntimeCallError
from runtimekit.exporter.extensions import ExtensionContext


class AllocationAge:
    def __init__(self, context: ExtensionContext) -> None:
        self.context = context

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "runtimekit_allocation_age_seconds",
            "Seconds since a container's GPUs were allocated",
            labels=["namespace", "pod", "container"],
        )
        try:
            allocations = self.context.client.list_allocations()
        except RuntimeCallError:
            return
        now_ms = time.time() * 1000
        for a in allocations:
            family.add_metric([a.pod.namespace, a.pod.name, a.container], max(0.0, (now_ms - a.created_unix_ms) / 1000))
        yield family


def factory(context: ExtensionContext) -> AllocationAge:
    return AllocationAge(context)

"""The Prometheus text format (0.0.4) as Volcano's Go client writes it: families sorted by name, each
with its HELP and TYPE lines under the name its series carry (a counter is `..._total` only when its
series are), numbers as Go writes them, no `_created` series. Used for the scheduler's `/metrics`
instead of prometheus_client's writer, which would add `_total` to Volcano's
`volcano_total_preemption_attempts` and write bucket bounds Python's way.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric

from runtimekit.scheduler.metrics.series import go_float

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_TYPES = {"unknown": "untyped", "info": "gauge", "stateset": "gauge", "gaugehistogram": "histogram"}


def render(registry: CollectorRegistry) -> bytes:
    families: dict[str, list[str]] = {}
    for metric in registry.collect():
        samples = [s for s in metric.samples if not s.name.endswith("_created")]
        if not samples:
            continue
        name = _header_name(metric, [s.name for s in samples])
        lines = families.setdefault(name, [f"# HELP {name} {_doc(metric.documentation)}\n"])
        if len(lines) == 1:
            lines.append(f"# TYPE {name} {_TYPES.get(metric.type, metric.type)}\n")
        for sample in samples:
            labels = ",".join(f'{key}="{_value(value)}"' for key, value in sample.labels.items())
            lines.append(
                f"{sample.name}{{{labels}}} {go_float(sample.value)}\n"
                if labels
                else f"{sample.name} {go_float(sample.value)}\n"
            )
    return "".join(line for name in sorted(families) for line in families[name]).encode("utf-8")


def _header_name(metric: Metric, names: list[str]) -> str:
    if metric.type == "counter" and all(n == metric.name + "_total" for n in names):
        return metric.name + "_total"  # prometheus_client's counters (process_cpu_seconds_total)
    return str(metric.name)


def _doc(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n")


def _value(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")

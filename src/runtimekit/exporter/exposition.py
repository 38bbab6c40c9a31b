"""`/metrics` bytes: the Prometheus text format (0.0.4) exactly as `prometheus_client.generate_latest`
writes it, with each sample's name-and-labels prefix memoised.

A scrape repeats the same label sets (node, GPU, pod, container) every time, and escaping them is most
of `generate_latest`'s cost (about 60 % of a scrape with 8 GPUs and 64 allocations). Here each
distinct (name, labels) is escaped once, with the library's own escaping functions, and only values
are formatted per scrape. tests/exporter/test_exposition.py checks the output is byte for byte the
library's for every kind of metric family. One difference: a counter whose samples carry no `_total`
(dcgm-exporter's names, `compat_dcgm`) gets a TYPE line with its own name, where the library would name
a `_total` family no sample has.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client.openmetrics.exposition import escape_label_name, escape_metric_name
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

_go_float: Callable[[float], str] = floatToGoString  # the library's number format (untyped there)
MEMO_LIMIT = 50_000  # distinct series remembered; past it the memo starts afresh
_OM_SUFFIXES = ("_created", "_gsum", "_gcount")  # OpenMetrics samples, moved to gauges at the end
_TYPES = {"counter": ("_total", "counter"), "info": ("_info", "gauge"), "stateset": ("", "gauge")}
_TYPES |= {"gaugehistogram": ("", "histogram"), "unknown": ("", "untyped")}


def _doc(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n")


def _label_value(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


class Exposition:
    """Renders a registry; keep one per registry so the memo lives across scrapes."""

    def __init__(self, registry: Collector) -> None:
        self.registry = registry
        self._prefixes: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}

    def _prefix(self, sample: Sample) -> str:
        key = (sample.name, tuple(sorted(sample.labels.items())))
        found = self._prefixes.get(key)
        if found is None:
            if len(self._prefixes) > MEMO_LIMIT:
                self._prefixes.clear()
            labels = ",".join(f'{escape_label_name(k)}="{_label_value(v)}"' for k, v in key[1])
            found = escape_metric_name(sample.name) + (f"{{{labels}}}" if labels else "")
            self._prefixes[key] = found
        return found

    def _line(self, sample: Sample) -> str:
        timestamp = "" if sample.timestamp is None else f" {int(float(sample.timestamp) * 1000):d}"
        return f"{self._prefix(sample)} {_go_float(sample.value)}{timestamp}\n"

    def render(self) -> bytes:
        output: list[str] = []
        for metric in self.registry.collect():
            suffix, kind = _TYPES.get(metric.type, ("", metric.type))
            if metric.type == "counter" and metric.samples and metric.samples[0].name == metric.name:
                suffix = ""  # a peer's counter named without `_total` (dcgm-exporter's): its TYPE line names it so
            name = escape_metric_name(metric.name + suffix)
            doc = _doc(metric.documentation)
            output.append(f"# HELP {name} {doc}\n# TYPE {name} {kind}\n")
            extra: dict[str, list[str]] = {}
            for sample in metric.samples:
                om = next((s for s in _OM_SUFFIXES if sample.name == metric.name + s), None)
                if om is None:
                    output.append(self._line(sample))
                else:
                    extra.setdefault(om, []).append(self._line(sample))
            for om, lines in sorted(extra.items()):
                om_name = escape_metric_name(metric.name + om)
                output.append(f"# HELP {om_name} {doc}\n# TYPE {om_name} gauge\n")
                output.extend(lines)
        return "".join(output).encode("utf-8")

"""The exporter's renderer writes exactly what prometheus_client's generate_latest writes, for every
kind of family, across scrapes whose values change while label sets repeat. (What the exporter serves
through it is checked in test_metrics.py, promtool included.)"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Enum, Gauge, Histogram, Info, Summary, generate_latest
from prometheus_client.core import GaugeHistogramMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from runtimekit.exporter.exposition import Exposition


class Changing(Collector):
    """Families built at scrape time, as the exporter's collectors do; values differ per scrape."""

    def __init__(self) -> None:
        self.scrape = 0

    def collect(self) -> Iterator[Metric]:
        self.scrape += 1
        gauge = GaugeMetricFamily("t_gpu_ratio", 'doc with "quotes", \\ and\nnewline', labels=["gpu", "pod"])
        for i in range(4):
            gauge.add_metric([str(i), f'p"{i}\\\n'], self.scrape / (i + 1))
        gauge.add_metric(["big", "x"], 1.5e12 * self.scrape)
        gauge.add_metric(["nan", "x"], float("nan"))
        gauge.add_metric(["inf", "x"], float("inf"), timestamp=1700000000.25)
        yield gauge
        histogram = GaugeHistogramMetricFamily("t_wait_seconds", "a gauge histogram", labels=["queue"])
        histogram.add_metric(["q"], [("0.5", 1.0), ("+Inf", 3.0)], gsum_value=self.scrape)
        yield histogram


def registry_with_everything() -> tuple[CollectorRegistry, Changing]:
    registry = CollectorRegistry()
    changing = Changing()
    registry.register(changing)
    Counter("t_requests", "requests", ["code"], registry=registry).labels("200").inc(3)
    Gauge("t_plain", "no labels", registry=registry).set(-2.5)
    Histogram("t_latency_seconds", "latency", ["path"], registry=registry).labels("/m").observe(0.02)
    Summary("t_size_bytes", "sizes", registry=registry).observe(512)
    Info("t_build", "build", registry=registry).info({"version": "1.2"})
    Enum("t_state", "state", states=["on", "off"], registry=registry).state("off")
    return registry, changing


def test_the_same_bytes_as_generate_latest_scrape_after_scrape() -> None:
    registry, changing = registry_with_everything()
    exposition = Exposition(registry)
    for _ in range(3):
        ours = exposition.render()
        changing.scrape -= 1  # generate_latest sees the same scrape's values
        assert ours == generate_latest(registry)
    assert b't_gpu_ratio{gpu="0",pod="p\\"0\\\\\\n"} 3.0' in ours  # label values escaped once, reused


class PeerCounter(Collector):
    """A counter named as dcgm-exporter names its counters: no `_total` on the family or its samples."""

    def collect(self) -> Iterator[Metric]:
        family = Metric("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "Total number of PCIe retries.", "counter")
        family.add_sample("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", {"gpu": "0"}, 4.0)
        yield family


def test_a_counter_without_total_gets_a_type_line_naming_it() -> None:
    registry = CollectorRegistry()
    registry.register(PeerCounter())
    assert Exposition(registry).render().decode() == (
        "# HELP DCGM_FI_DEV_PCIE_REPLAY_COUNTER Total number of PCIe retries.\n"
        "# TYPE DCGM_FI_DEV_PCIE_REPLAY_COUNTER counter\n"
        'DCGM_FI_DEV_PCIE_REPLAY_COUNTER{gpu="0"} 4.0\n'
    )

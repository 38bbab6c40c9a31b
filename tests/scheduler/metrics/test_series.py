"""Series kept as Volcano's Go client keeps them: numbers written as Go writes them, bucket bounds
as Volcano's ExponentialBucketsRange gives them, families without series left out, counters under
the names Volcano gives them."""

from __future__ import annotations

import math
import threading

import pytest
from prometheus_client import CollectorRegistry

from runtimekit.scheduler.framework.info import JobInfo, JobKey
from runtimekit.scheduler.metrics import series
from runtimekit.scheduler.metrics.observer import SchedulerMetrics
from runtimekit.scheduler.metrics.series import HistogramVec, ValueVec, go_float
from runtimekit.scheduler.metrics.text import render


@pytest.mark.parametrize(
    ("value", "text"),
    [  # strconv.FormatFloat(v, 'g', -1, 64), as printed by Go 1.19
        (1.0, "1"),
        (100.0, "100"),
        (0.1, "0.1"),
        (1e6, "1e+06"),
        (123456789.0, "1.23456789e+08"),
        (1e20, "1e+20"),
        (0.0001, "0.0001"),
        (1e-05, "1e-05"),
        (120000.0, "120000"),
        (119999.99999999991, "119999.99999999991"),
        (1234567.5, "1.2345675e+06"),
        (5e-324, "5e-324"),
        (1.5e300, "1.5e+300"),
        (-2.5, "-2.5"),
        (0.0, "0"),
        (math.inf, "+Inf"),
    ],
)
def test_numbers_are_written_as_go_writes_them(value: float, text: str) -> None:
    assert go_float(value) == text


@pytest.mark.parametrize(
    ("bounds", "low", "high", "count"),
    [  # Volcano's pkg/scheduler/metrics: ExponentialBucketsRange(min, max, count) per family
        pytest.param(series.E2E_BUCKETS, 1, 5000, 20, id="e2e-and-open-session"),
        pytest.param(series.JOB_BUCKETS, 100, 120000, 30, id="e2e-job"),
        pytest.param(series.PLUGIN_BUCKETS, 0.1, 100, 15, id="plugin"),
        pytest.param(series.ACTION_BUCKETS, 1, 2000, 20, id="action"),
        pytest.param(series.TASK_BUCKETS, 50, 60000, 30, id="task"),
        pytest.param(series.STAGE_BUCKETS, 0.1, 500, 20, id="stage"),
    ],
)
def test_bucket_bounds_are_volcanos(bounds: tuple[float, ...], low: float, high: float, count: int) -> None:
    growth = (high / low) ** (1 / (count - 1))
    assert len(bounds) == count
    assert bounds[0] == low
    for i, bound in enumerate(bounds):  # the formula, to within Go's and C's rounding of pow
        assert bound == pytest.approx(low * growth**i, rel=1e-13)
    assert list(bounds) == sorted(bounds)


def test_families_render_as_gos_client_writes_them() -> None:
    registry = CollectorRegistry()
    latency = HistogramVec("t_latency_milliseconds", "a histogram", ("action",), (1.0, 2.5))
    plain = HistogramVec("t_plain_milliseconds", "no labels", (), (1.0,))
    attempts = ValueVec("t_total_attempts", "a counter named without _total", kind="counter")
    unused = ValueVec("t_unused", "a family with labels and no series", ("x",))
    for collector in (latency, plain, attempts, unused):
        registry.register(collector)
    latency.observe(0.5, "allocate")
    latency.observe(2.0, "allocate")
    attempts.add(3)
    text = render(registry).decode()
    assert text == (
        "# HELP t_latency_milliseconds a histogram\n"
        "# TYPE t_latency_milliseconds histogram\n"
        't_latency_milliseconds_bucket{action="allocate",le="1"} 1\n'
        't_latency_milliseconds_bucket{action="allocate",le="2.5"} 2\n'
        't_latency_milliseconds_bucket{action="allocate",le="+Inf"} 2\n'
        't_latency_milliseconds_sum{action="allocate"} 2.5\n'
        't_latency_milliseconds_count{action="allocate"} 2\n'
        "# HELP t_plain_milliseconds no labels\n"
        "# TYPE t_plain_milliseconds histogram\n"
        't_plain_milliseconds_bucket{le="1"} 0\n'
        't_plain_milliseconds_bucket{le="+Inf"} 0\n'
        "t_plain_milliseconds_sum 0\n"
        "t_plain_milliseconds_count 0\n"
        "# HELP t_total_attempts a counter named without _total\n"
        "# TYPE t_total_attempts counter\n"
        "t_total_attempts 3\n"
    )


def test_a_value_on_a_bound_counts_in_that_bucket() -> None:
    histogram = HistogramVec("t", "t", (), (1.0, 2.0))
    histogram.observe(1.0)
    (metric,) = histogram.collect()
    assert [s.value for s in metric.samples if s.name == "t_bucket"] == [1, 1, 1]


def test_observations_from_many_threads_are_all_counted() -> None:
    """Observations are queued without a lock and counted when read (or every FOLD_AT): from eight
    threads at once, none is lost or counted twice, whether a fold happens meanwhile or not."""
    histogram = HistogramVec("t", "t", ("who",), (1.0, 2.0))
    per_thread = HistogramVec.FOLD_AT + 123

    def observe(who: str) -> None:
        for i in range(per_thread):
            histogram.observe(float(i % 3), who)

    threads = [threading.Thread(target=observe, args=(f"w{i % 2}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert histogram.count("w0") + histogram.count("w1") == 8 * per_thread
    (metric,) = histogram.collect()
    sums = [s.value for s in metric.samples if s.name == "t_sum"]
    assert sum(sums) == 8 * sum(float(i % 3) for i in range(per_thread))


def test_job_series_follow_the_jobs_that_exist() -> None:
    """Per-job gauges come from what sessions recorded; a deleted job's series go at the next scrape."""
    metrics = SchedulerMetrics(clock=lambda: 1000.0)
    alive = {"ns/a", "ns/b"}
    metrics.jobs = lambda: alive
    a = JobInfo(JobKey("ns/a"), "ns", "a", queue="q", created=990.0)
    b = JobInfo(JobKey("ns/b"), "ns", "b", created=995.0)
    metrics.job_placed(a, 2)
    metrics.job_closed(a, 0)
    metrics.job_closed(b, 3)
    list(metrics.collect())
    assert metrics.job_duration.get("a", "q", "ns") == 10_000.0
    assert metrics.job_last.get("a", "q", "ns") == 1000.0
    assert metrics.job_start.get("b", "default", "ns") == 995.0
    assert metrics.job_duration.get("b", "default", "ns") is None  # never placed
    assert metrics.unready_tasks.get("b") == 3
    assert metrics.job_retries.get("b") == 1
    assert metrics.job_latency.count() == 2
    alive.discard("ns/b")
    list(metrics.collect())
    assert metrics.job_start.get("b", "default", "ns") is None
    assert metrics.unready_tasks.get("b") is None
    assert metrics.job_start.get("a", "q", "ns") == 990.0

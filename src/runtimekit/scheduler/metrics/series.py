"""Metric series kept the way Volcano's Go client keeps them, so that the scheduler's `/metrics` is
Volcano's to the byte where it matters to Prometheus: series names, label names and `le` values.

- Histogram bucket bounds are the floats Volcano's `prometheus.ExponentialBucketsRange(min, max, n)`
  gives. That function calls Go's `math.Pow`, whose last bits differ from C's `pow` for most of these
  bounds, and each bound is a label (`le`) of its own series; so the bounds are kept below as Go
  wrote them (Go 1.19, amd64), not recomputed. tests/scheduler/metrics checks them against the formula.
- `le` values are written as Go writes them (`go_float`: `1`, not Python's `1.0`).
- A family with labels has no series until one is set or observed (as a Go `...Vec`); a family
  without labels always has its one series.
Thread-safe: the scheduling thread, binder threads and scrapes share them.
"""

from __future__ import annotations

import math
import threading
from bisect import bisect_left
from collections import deque
from collections.abc import Iterable, Iterator
from decimal import Decimal

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

LabelValues = tuple[str, ...]


def go_float(value: float) -> str:
    """`value` as Go's text exposition writes it (strconv.FormatFloat(v, 'g', -1, 64), with 1, 0, -1
    and the infinities spelt out)."""
    value = float(value)  # numpy numbers and bools too
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "0"
    if -1e6 < value < 1e6 and value.is_integer():  # most values (milli CPU, counts): Go writes the digits
        return str(int(value))
    sign, digits_t, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digits_t))
    point = len(digits) + exponent  # where the decimal point falls in `digits`
    lead = point - 1  # the exponent of the first digit
    prefix = "-" if sign else ""
    if lead < -4 or lead >= 6:  # Go's %e threshold for the shortest representation
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{prefix}{mantissa}e{'-' if lead < 0 else '+'}{abs(lead):02d}"
    if point <= 0:
        return f"{prefix}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{prefix}{digits}{'0' * (point - len(digits))}"
    return f"{prefix}{digits[:point]}.{digits[point:]}"


def _bounds(text: str) -> tuple[float, ...]:
    return tuple(float(word) for word in text.split())


# e2e_scheduling_latency_milliseconds, open_session_duration_milliseconds: ExponentialBucketsRange(1, 5000, 20)
E2E_BUCKETS = _bounds(
    "1 1.5656065579430964 2.45112389427443 3.8374956432070686 6.008008345083047 9.406177265238869 "
    "14.726372811633231 23.055705848607904 36.09616427458753 56.51239150488555 88.47617074509654 "
    "138.51887314021627 216.86605618721043 339.5269197619527 531.5655721775325 832.2225457779193 "
    "1302.933075338009 2039.8805673101535 3193.65039360146 4999.999999999997"
)
# e2e_job_scheduling_latency_milliseconds: ExponentialBucketsRange(100, 120000, 30)
JOB_BUCKETS = _bounds(
    "100 127.6964028795552 163.06371308377672 208.22649600982146 265.8977452466826 339.54185601785707 "
    "433.582736405282 553.6695578962887 707.0161092726969 902.8341393202192 1152.886719880512 "
    "1472.1948705635073 1879.9398930869224 2400.6156197697555 3065.4997934107178 3914.532966465682 "
    "4998.717787711021 6383.182805007454 8151.09483122081 10408.654894770323 13291.477888768455 "
    "16972.739153488765 21673.57736913502 27676.378675702752 35341.74001619669 45130.13071572749 "
    "57629.55353882527 73590.86686462727 93972.88983401153 119999.99999999991"
)
# plugin_scheduling_latency_milliseconds: ExponentialBucketsRange(0.1, 100, 15)
PLUGIN_BUCKETS = _bounds(
    "0.1 0.16378937069540644 0.2682695795279726 0.4393970560760792 0.7196856730011522 1.1787686347935875 "
    "1.9306977288832508 3.1622776601683804 5.1794746792312125 8.483428982440724 13.894954943731381 "
    "22.758459260747898 37.27593720314942 61.054022965853314 100.00000000000006"
)
# action_scheduling_latency_milliseconds: ExponentialBucketsRange(1, 2000, 20)
ACTION_BUCKETS = _bounds(
    "1 1.4918955578206108 2.2257523554448713 3.3205900518969647 4.953973547768393 7.390811129476477 "
    "11.026318292757086 16.45011528008044 24.541853911988955 36.6138828319787 54.624089151593346 "
    "81.49343595525913 121.57969509318953 181.38420703071378 270.60629272793585 403.71632603911144 "
    "602.3025934374076 898.5725636131018 1340.5764160338647 1999.9999999999977"
)
# task_scheduling_latency_milliseconds: ExponentialBucketsRange(50, 60000, 30)
TASK_BUCKETS = _bounds(
    "50 63.8482014397776 81.53185654188836 104.11324800491073 132.9488726233413 169.77092800892854 "
    "216.791368202641 276.83477894814433 353.50805463634845 451.4170696601096 576.443359940256 "
    "736.0974352817536 939.9699465434612 1200.3078098848778 1532.7498967053589 1957.266483232841 "
    "2499.3588938555104 3191.591402503727 4075.547415610405 5204.327447385162 6645.738944384228 "
    "8486.369576744382 10836.78868456751 13838.189337851376 17670.870008098344 22565.065357863747 "
    "28814.776769412634 36795.433432313635 46986.44491700576 59999.999999999956"
)
# scheduling_stage_duration_milliseconds: ExponentialBucketsRange(0.1, 500, 20)
STAGE_BUCKETS = _bounds(
    "0.1 0.15656065579430967 0.245112389427443 0.3837495643207069 0.6008008345083047 0.9406177265238869 "
    "1.4726372811633233 2.3055705848607904 3.609616427458753 5.651239150488555 8.847617074509655 "
    "13.851887314021628 21.686605618721046 33.95269197619527 53.15655721775326 83.22225457779194 "
    "130.2933075338009 203.98805673101538 319.36503936014606 499.9999999999998"
)


class HistogramVec(Collector):
    """A histogram family: per label values, cumulative bucket counts, sum and count.

    An observation is only queued (a deque append, safe from any thread without a lock: the
    scheduler observes several per pod); the queue is counted into the buckets when read, or
    when it holds `FOLD_AT` observations."""

    FOLD_AT = 4096

    def __init__(self, name: str, doc: str, labels: Iterable[str], bounds: tuple[float, ...]) -> None:
        self.name, self.doc, self.labels, self.bounds = name, doc, tuple(labels), bounds
        self._les = (*(go_float(b) for b in bounds), "+Inf")
        self._series: dict[LabelValues, tuple[list[int], list[float]]] = {}
        self._queued: deque[tuple[float, LabelValues]] = deque()
        self._lock = threading.Lock()
        if not self.labels:
            self._series[()] = ([0] * (len(bounds) + 1), [0.0])

    def observe(self, value: float, *label_values: str) -> None:
        self._queued.append((value, label_values))
        if len(self._queued) >= self.FOLD_AT:
            self._fold()

    def _fold(self) -> None:
        """Count the queued observations in (an observation queued meanwhile waits for the next)."""
        bounds, size = self.bounds, len(self.bounds) + 1
        with self._lock:
            queued, series_of = self._queued, self._series
            while queued:
                try:
                    value, label_values = queued.popleft()
                except IndexError:
                    break
                series = series_of.get(label_values)
                if series is None:
                    series = series_of[label_values] = ([0] * size, [0.0])
                series[0][bisect_left(bounds, value)] += 1  # the first bucket whose bound is >= value
                series[1][0] += value

    def count(self, *label_values: str) -> int:
        self._fold()
        with self._lock:
            series = self._series.get(label_values)
            return sum(series[0]) if series else 0

    def collect(self) -> Iterator[Metric]:
        metric = Metric(self.name, self.doc, "histogram")
        self._fold()
        with self._lock:
            series = [(k, list(counts), total[0]) for k, (counts, total) in self._series.items()]
        for label_values, counts, total in sorted(series):
            labels = dict(zip(self.labels, label_values, strict=True))
            running = 0
            for le, count in zip(self._les, counts, strict=True):
                running += count
                metric.add_sample(self.name + "_bucket", {**labels, "le": le}, running)
            metric.add_sample(self.name + "_sum", labels, total)
            metric.add_sample(self.name + "_count", labels, running)
        yield metric


class ValueVec(Collector):
    """A counter or gauge family: one value per label values. The name is written as given (a Go
    counter's name carries its own `_total`, or does not: `volcano_total_preemption_attempts`)."""

    def __init__(self, name: str, doc: str, labels: Iterable[str] = (), kind: str = "gauge") -> None:
        self.name, self.doc, self.labels, self.kind = name, doc, tuple(labels), kind
        self._values: dict[LabelValues, float] = {} if self.labels else {(): 0.0}
        self._lock = threading.Lock()

    def set(self, value: float, *label_values: str) -> None:
        with self._lock:
            self._values[label_values] = value

    def add(self, amount: float, *label_values: str) -> None:
        with self._lock:
            self._values[label_values] = self._values.get(label_values, 0.0) + amount

    def get(self, *label_values: str) -> float | None:
        with self._lock:
            return self._values.get(label_values)

    def replace(self, values: Iterable[tuple[LabelValues, float]]) -> None:
        """Every series at once: those in `values` (label values, value), no other."""
        fresh = dict(values)
        with self._lock:
            self._values = fresh

    def retain(self, keep: Iterable[LabelValues]) -> None:
        """Drop every series but those in `keep` (e.g. the jobs that still exist)."""
        wanted = set(keep)
        with self._lock:
            for key in [k for k in self._values if k not in wanted]:
                del self._values[key]

    def collect(self) -> Iterator[Metric]:
        metric = Metric(self.name, self.doc, self.kind)
        with self._lock:
            values = sorted(self._values.items())
        for label_values, value in values:
            metric.add_sample(self.name, dict(zip(self.labels, label_values, strict=True)), value)
        yield metric

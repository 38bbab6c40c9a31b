"""Health detection: which GPUs to mark unhealthy in the runtime, and when to clear them.

Rules (NVIDIA's device plugin's, plus temperature): a critical XID event (any XID not in the ignore
list, default 13, 31, 43, 45, 68, 109), a rise in uncorrectable ECC errors, or a temperature at or
above the threshold marks the GPU unhealthy with the reason. A GPU marked for XID/ECC is cleared
after `recovery_seconds` without a new such event; one marked for temperature when it cools below
threshold - hysteresis. Only marks the detector made are cleared: a GPU the runtime itself reports
unhealthy (lost) is left to the runtime. The decision is a pure function (`evaluate`); the
`HealthDetector` thread reads the runtime, applies it through `SetDeviceHealth`, and counts events.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from runtimekit.api.runtime_client import RuntimeCallError, RuntimeClient
from runtimekit.base.threads import Workers
from runtimekit.exporter.config import HealthConfig
from runtimekit.exporter.sample import Sample, SampleError, read_sample

log = logging.getLogger(__name__)
KINDS = ("xid", "ecc", "temperature")  # why the detector marks a GPU


@dataclass
class Mark:
    reason: str
    kind: str  # one of KINDS
    since: float
    last_event: float


@dataclass
class HealthState:
    last_xid_ms: dict[str, int] = field(default_factory=dict)
    last_ecc: dict[str, int] = field(default_factory=dict)
    marks: dict[str, Mark] = field(default_factory=dict)


@dataclass(frozen=True)
class Action:
    uuid: str
    healthy: bool
    reason: str
    kind: str


def evaluate(state: HealthState, sample: Sample, config: HealthConfig, now: float) -> list[Action]:
    """Update `state` from one sample and return what to tell the runtime."""
    actions: list[Action] = []
    for gpu in sample.gpus:
        found: tuple[str, str] | None = None
        seen_ms = state.last_xid_ms.get(gpu.uuid, -1)
        critical = [x for x in gpu.xids if x.unix_ms > seen_ms and x.xid not in config.ignored_xids]
        if gpu.xids:
            state.last_xid_ms[gpu.uuid] = max(seen_ms, *(x.unix_ms for x in gpu.xids))
        if critical:
            found = ("xid", f"critical XID {critical[-1].xid}")
        previous_ecc = state.last_ecc.get(gpu.uuid)
        state.last_ecc[gpu.uuid] = gpu.ecc_uncorrected
        if gpu.ecc_uncorrected > (previous_ecc if previous_ecc is not None else 0):
            found = ("ecc", f"{gpu.ecc_uncorrected - (previous_ecc or 0)} uncorrectable ECC error(s)")
        hot = gpu.temperature_celsius is not None and gpu.temperature_celsius >= config.temperature_celsius
        if hot and found is None:
            found = (
                "temperature",
                f"temperature {gpu.temperature_celsius:.0f} C at or above {config.temperature_celsius:.0f} C",
            )
        mark = state.marks.get(gpu.uuid)
        if found is not None:
            kind, reason = found
            if mark is None:
                state.marks[gpu.uuid] = Mark(reason, kind, now, now)
                actions.append(Action(gpu.uuid, False, reason, kind))
            else:
                mark.last_event = now
            continue
        if mark is None:
            continue
        if mark.kind == "temperature":
            cool = gpu.temperature_celsius is not None and (
                gpu.temperature_celsius < config.temperature_celsius - config.temperature_hysteresis_celsius
            )
            clear = cool
        else:
            clear = now - mark.last_event >= config.recovery_seconds
        if clear:
            del state.marks[gpu.uuid]
            actions.append(Action(gpu.uuid, True, f"recovered from: {mark.reason}", mark.kind))
    return actions


class HealthDetector:
    def __init__(
        self,
        client: RuntimeClient,
        config: HealthConfig,
        node_name: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client, self.config, self.node_name, self.clock = client, config, node_name, clock
        self.state = HealthState()
        self.events: dict[tuple[str, bool], int] = {}  # (kind, healthy) -> count, for a counter metric
        self.runtime_reachable = True
        self._workers = Workers("health")
        self._lock = threading.Lock()

    def check_once(self) -> list[Action]:
        try:
            sample = read_sample(self.client, self.node_name)
        except SampleError as exc:
            if self.runtime_reachable:
                log.warning("runtime unreachable: %s", exc)
            self.runtime_reachable = False
            return []
        self.runtime_reachable = True
        with self._lock:
            actions = evaluate(self.state, sample, self.config, self.clock())
        done = []
        for action in actions:
            try:
                self.client.set_device_health(action.uuid, action.healthy, action.reason, source="exporter")
            except RuntimeCallError as exc:
                log.warning(
                    "could not mark GPU %s %s: %s", action.uuid, "healthy" if action.healthy else "unhealthy", exc
                )
                with self._lock:  # forget the decision so the next round tries again
                    if not action.healthy:
                        self.state.marks.pop(action.uuid, None)
                continue
            log.warning(
                "GPU %s marked %s: %s", action.uuid, "healthy" if action.healthy else "unhealthy", action.reason
            )
            key = (action.kind, action.healthy)
            self.events[key] = self.events.get(key, 0) + 1
            done.append(action)
        return done

    def start(self) -> HealthDetector:
        """Check every `interval_seconds` on a thread until `stop()`."""
        self._workers.every("health", self.config.interval_seconds, self.check_once)
        return self

    def stop(self) -> None:
        self._workers.stop(5.0)


class HealthCollector(Collector):
    """Counters of the detector's decisions: `runtimekit_gpu_health_changes_total{kind, healthy}`."""

    def __init__(self, detector: HealthDetector) -> None:
        self.detector = detector

    def collect(self) -> Iterable[Metric]:
        family = CounterMetricFamily(
            "runtimekit_gpu_health_changes",
            "GPUs marked healthy or unhealthy by the exporter",
            labels=["kind", "healthy"],
        )
        # every kind at 0 from the first scrape: a counter whose series appears at 1 hides that first
        # change from increase() and rate(), and a dashboard panel over it shows nothing until then
        events = {(kind, healthy): 0 for kind in KINDS for healthy in (False, True)} | self.detector.events
        for (kind, healthy), count in sorted(events.items()):
            family.add_metric([kind, "true" if healthy else "false"], count)
        return [family]

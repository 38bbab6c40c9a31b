"""The over-share Event: written when a container goes over, repeated at most every REPEAT_S while it
stays over (with the same message, so the sink counts it on one Event), forgotten when back within."""

from __future__ import annotations

from dataclasses import replace

from runtimekit.model import GpuUUID
from runtimekit.runtime.overshare import REASON, REPEAT_S, OverShare
from runtimekit.runtime.usage import ContainerUsage

OVER = ContainerUsage("ml", "train", "uid-1", "main", GpuUUID("GPU-1"), "GPU-1", 9000, 10.0, 300, 8192)
WITHIN = replace(OVER, memory_used_mib=100)


class Sink:
    def __init__(self) -> None:
        self.written: list[tuple[str, ...]] = []

    def record_pod_event(self, namespace: str, name: str, uid: str, kind: str, reason: str, message: str) -> None:
        self.written.append((namespace, name, uid, kind, reason, message))


def test_written_at_once_then_at_most_every_repeat() -> None:
    now = [100.0]
    sink = Sink()
    watch = OverShare(sink, "node-a", clock=lambda: now[0])
    assert watch.observe([OVER]) == [OVER]
    for step in (1.0, 30.0, REPEAT_S - 1.0):
        now[0] = 100.0 + step
        assert watch.observe([replace(OVER, memory_used_mib=9100)]) == []  # still over: nothing at each scrape
    now[0] = 100.0 + REPEAT_S
    watch.observe([OVER])
    assert len(sink.written) == 2
    assert sink.written[0] == sink.written[1]  # the same Event again: counted, not a new one
    assert sink.written[0][3:5] == ("Warning", REASON)
    assert "GPU memory above the 8192 MiB granted" in sink.written[0][5]


def test_back_within_then_over_again_is_written_at_once() -> None:
    now = [0.0]
    sink = Sink()
    watch = OverShare(sink, "node-a", clock=lambda: now[0])
    watch.observe([OVER])
    now[0] = 1.0
    watch.observe([WITHIN])
    now[0] = 2.0
    assert watch.observe([OVER]) == [OVER]
    assert len(sink.written) == 2

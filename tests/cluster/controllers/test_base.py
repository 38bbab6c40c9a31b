"""The controllers' skeleton: the one timer a controller keeps per key."""

from __future__ import annotations

from runtimekit.cluster.controllers.base import Controller
from runtimekit.kube.http import KubeHttp
from runtimekit.kube.informers import Informers


class Timers:
    """Stands in for the work queue: records the delays asked for."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, float]] = []

    def add_after(self, key: str, delay: float) -> None:
        self.asked.append((key, delay))


def test_a_controller_keeps_the_earliest_timer_of_a_key() -> None:
    http = KubeHttp.connect(server="http://127.0.0.1:9")  # never called
    controller = Controller(http, Informers(http))
    timers = Timers()
    controller.queue = timers  # type: ignore[assignment]
    controller.requeue_after("a", 600)
    controller.requeue_after("a", 600)  # already due then: nothing new
    controller.requeue_after("a", 2)  # earlier: a new timer
    controller.requeue_after("a", 300)  # later than the 2 s one: nothing new
    controller.requeue_after("b", 5)
    assert timers.asked == [("a", 600), ("a", 2), ("b", 5)]
    http.close()

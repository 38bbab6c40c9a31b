"""The simulated containers' restarts (`cluster.kubelet.containers.PodContainers`): kubelet's
back-off (at once, then 10 s doubling up to 5 minutes) and which restartPolicy restarts what."""

from __future__ import annotations

from typing import Any

import pytest

from runtimekit.cluster.kubelet.containers import PodContainers
from runtimekit.cluster.kubelet.status import Terminated


def pod(policy: str) -> Any:
    container = {"name": "c", "image": "busybox", "command": ["sh", "-c", "exit 1"]}
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
        "spec": {"restartPolicy": policy, "containers": [container]},
    }


def test_back_off_doubles_up_to_five_minutes() -> None:
    runs = PodContainers(pod("Always"), {}, "p")
    delays = []
    for n in range(8):
        runs.start("c", float(n))
        runs.end("c", Terminated(1), float(n))
        delays.append(runs.restart_delay("c"))
    assert delays == [0.0, 10.0, 20.0, 40.0, 80.0, 160.0, 300.0, 300.0]
    [status] = runs.statuses()
    assert status["state"]["waiting"]["message"] == "back-off 5m0s restarting failed container=c pod=p_ns(u1)"
    assert (status["restartCount"], status["lastState"]["terminated"]["exitCode"]) == (7, 1)
    assert runs.phase_if_done() is None


@pytest.mark.parametrize(
    ("policy", "code", "restarts", "phase"),
    [
        ("Always", 0, True, None),
        ("Always", 1, True, None),
        ("OnFailure", 0, False, "Succeeded"),
        ("OnFailure", 1, True, None),
        ("Never", 0, False, "Succeeded"),
        ("Never", 3, False, "Failed"),
    ],
)
def test_restart_policy(policy: str, code: int, restarts: bool, phase: str | None) -> None:
    runs = PodContainers(pod(policy), {}, "p")
    runs.start("c", 0.0)
    runs.end("c", Terminated(code), 1.0)
    assert (runs.restart_delay("c") is not None, runs.phase_if_done()) == (restarts, phase)


def test_an_end_for_good_is_not_restarted() -> None:
    runs = PodContainers(pod("Always"), {}, "p")
    runs.start("c", 0.0)
    runs.end("c", Terminated(0), 1.0, final=True)
    assert (runs.restart_delay("c"), runs.phase_if_done()) == (None, "Succeeded")

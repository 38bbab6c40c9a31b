"""Why a pod bound to a simulated node has not started: kubelet admits the pods bound to it one at a
time, and an admission waits on the device plugins' Allocate, which waits on the node's GPU runtime
(a runtime that is restarting makes each call wait for its deadline). Meanwhile kubelet says nothing:
the pod shows only its `Scheduled` Event, and the pods bound after it wait behind it without a word.

`AdmissionWatch` gives each such pod one Warning Event once the admission in progress has taken
`slow_s`: `WaitingForDevices` on the pod being admitted (naming the device resources it asks for),
`WaitingForAdmission` on each pod bound to the node that waits behind it. Called by
`SimulatedKubelet`: `begin` and `end` around an admission on its worker thread, `overdue` from its
watch thread (with the pods waiting behind), `forget` when a pod leaves. Thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from runtimekit.kube.objects import Pod, meta

ADMISSION_SLOW_S = 2.0  # an admission taking this long is reported on the pods that wait for it
WAITING_FOR_DEVICES = "WaitingForDevices"
WAITING_FOR_ADMISSION = "WaitingForAdmission"


@dataclass(frozen=True)
class Notice:
    """An Event to record on `pod`."""

    pod: Pod
    reason: str
    message: str


def _name(pod: Pod) -> str:
    pod_meta = meta(pod)
    return f"{pod_meta.get('namespace', 'default')}/{pod_meta.get('name', '')}"


def _uid(pod: Pod) -> str:
    return str(meta(pod).get("uid", ""))


class AdmissionWatch:
    """See the module docstring."""

    def __init__(self, slow_s: float = ADMISSION_SLOW_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.slow_s, self.clock = slow_s, clock
        self._lock = threading.Lock()
        self._current: tuple[Pod, tuple[str, ...], float] | None = None
        self._told: set[str] = set()  # UIDs given their Event (one each)

    def begin(self, pod: Pod, resources: Iterable[str]) -> None:
        """The worker thread starts admitting `pod`, which asks for the device `resources`."""
        with self._lock:
            self._current = (pod, tuple(sorted(resources)), self.clock())

    def end(self) -> None:
        with self._lock:
            self._current = None

    def forget(self, uid: str) -> None:
        with self._lock:
            self._told.discard(uid)

    def overdue(self, behind: Iterable[Pod]) -> list[Notice]:
        """The Events to record now: none while no admission has taken `slow_s`; else one for the pod
        being admitted and one for each pod of `behind` (bound here, not admitted yet), each pod once."""
        with self._lock:
            if self._current is None:
                return []
            pod, resources, started = self._current
            waited = self.clock() - started
            if waited < self.slow_s:
                return []
            notices = []
            if _uid(pod) not in self._told:
                self._told.add(_uid(pod))
                asked = ", ".join(resources) or "its devices"
                notices.append(
                    Notice(
                        pod,
                        WAITING_FOR_DEVICES,
                        f"kubelet has waited {waited:.0f}s for the device plugins to allocate {asked}; "
                        "the node's device plugin or GPU runtime may be restarting",
                    )
                )
            for other in behind:
                uid = _uid(other)
                if uid and uid != _uid(pod) and uid not in self._told:
                    self._told.add(uid)
                    notices.append(
                        Notice(
                            other,
                            WAITING_FOR_ADMISSION,
                            f"kubelet admits one pod at a time and has waited {waited:.0f}s for the devices of "
                            f"{_name(pod)}; this pod is admitted after it",
                        )
                    )
            return notices

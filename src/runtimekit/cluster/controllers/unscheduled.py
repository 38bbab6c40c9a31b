"""A check of the embedded cluster: pods that no scheduler in it will ever take get an Event saying why.

Kubernetes leaves a pod whose `schedulerName` no scheduler answers to Pending forever, silently.
Here, `grace_s` after a pod is first seen unbound, if it is still unbound, not being deleted and its
`schedulerName` is none of the names the embedded scheduler answers to (`answered`; empty when the
cluster runs no scheduler), it gets one Warning Event `NoScheduler` naming the scheduler it asks for
and the names that are answered. The check only knows the embedded scheduler: a scheduler run beside
the cluster under another name makes these Events wrong for its pods.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from runtimekit.cluster.controllers.base import Controller
from runtimekit.cluster.controllers.pods import is_terminating, phase
from runtimekit.kube.http import KubeHttp
from runtimekit.kube.informers import Change, Informers
from runtimekit.kube.objects import Pod, meta, object_key
from runtimekit.protocol.peers import presets_answering

PODS_PATH = "/api/v1/pods"
REASON = "NoScheduler"


def message(wanted: str, answered: Iterable[str]) -> str:
    names = sorted(answered)
    if not names:
        return f'no scheduler runs in this cluster, so nothing will schedule this pod (schedulerName "{wanted}")'
    listed = ", ".join(names)
    presets = presets_answering(wanted)
    how = f"runtimekit up --scheduler-name {wanted} adds that name"
    if presets:
        how = f"runtimekit up --protocol {presets[0]} answers to it, with that system's names; {how}"
    return (
        f'no scheduler in this cluster answers to schedulerName "{wanted}", so this pod stays Pending; '
        f"the embedded scheduler answers to {listed} ({how})"
    )


class UnscheduledCheck(Controller):
    """See the module docstring."""

    name = "runtimekit-scheduling-check"

    def __init__(self, http: KubeHttp, informers: Informers, answered: Iterable[str], grace_s: float = 5.0) -> None:
        super().__init__(http, informers)
        self.answered = frozenset(answered)
        self.grace_s = grace_s
        self.pods = self.watch(PODS_PATH, Pod, self._on_pod).cache
        self._told: set[str] = set()  # UIDs already given the Event
        self._lock = threading.Lock()

    def _on_pod(self, change: Change[Pod]) -> None:
        if change.new is None:
            with self._lock:
                self._told.discard(str(meta(change.obj).get("uid", "")))
            return
        if change.old is None and not (change.new.get("spec") or {}).get("nodeName"):
            self.requeue_after(object_key(change.new), self.grace_s)

    def sync(self, key: str) -> None:
        pod = self.pods.get(key)
        if pod is None or (pod.get("spec") or {}).get("nodeName") or is_terminating(pod):
            return
        if phase(pod) in ("Succeeded", "Failed"):
            return
        wanted = str((pod.get("spec") or {}).get("schedulerName") or "default-scheduler")
        uid = str(meta(pod).get("uid", ""))
        with self._lock:
            if wanted in self.answered or uid in self._told:
                return
            self._told.add(uid)
        self.event(pod, "v1", "Pod", "Warning", REASON, message(wanted, self.answered))

"""The embedded cluster's controller manager: the workload controllers on shared informers.

`ControllerManager(http, default_controllers(...)).start()` builds the garbage collector, the
Deployment, ReplicaSet, StatefulSet, PersistentVolume, Endpoints/EndpointSlice, CronJob, ResourceClaim
and Volcano Job controllers and the
unscheduled-pod check on one
`Informers`, starts the informers and one worker per controller; `synced(timeout)` is True once every
informer listed; `stop()` ends them all. `informers` (the underlying `runtimekit.kube.informer`
informers) lets the embedded cluster signal them all to stop at once. Callers:
`runtimekit.cli.embedded`, tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from runtimekit.cluster.controllers.base import Controller
from runtimekit.cluster.controllers.cronjobs import CronJobController
from runtimekit.cluster.controllers.deployments import DeploymentController
from runtimekit.cluster.controllers.endpoints import EndpointsController
from runtimekit.cluster.controllers.garbagecollector import GarbageCollector
from runtimekit.cluster.controllers.persistentvolumes import PersistentVolumeController
from runtimekit.cluster.controllers.replicasets import ReplicaSetController
from runtimekit.cluster.controllers.resourceclaims import ResourceClaimController
from runtimekit.cluster.controllers.statefulsets import StatefulSetController
from runtimekit.cluster.controllers.unscheduled import UnscheduledCheck
from runtimekit.cluster.vcjob.controller import VolcanoJobController
from runtimekit.kube.http import KubeHttp
from runtimekit.kube.informer import Informer
from runtimekit.kube.informers import Informers

Factory = Callable[[KubeHttp, Informers], Controller]


def default_controllers(volcano_scheduler: str, answered: Iterable[str] | None = None) -> list[Factory]:
    """The controllers `runtimekit up` runs. Volcano Jobs without a `schedulerName` get
    `volcano_scheduler`; with `answered` (the scheduler names the cluster's scheduler answers to),
    the check that tells pods no scheduler will take runs too."""
    factories: list[Factory] = [
        GarbageCollector,
        ReplicaSetController,
        DeploymentController,
        StatefulSetController,
        PersistentVolumeController,
        EndpointsController,
        CronJobController,
        ResourceClaimController,
        lambda http, informers: VolcanoJobController(http, informers, volcano_scheduler),
    ]
    if answered is not None:
        names = frozenset(answered)
        factories.append(lambda http, informers: UnscheduledCheck(http, informers, names))
    return factories


class ControllerManager:
    """See the module docstring."""

    def __init__(self, http: KubeHttp, factories: Sequence[Factory]) -> None:
        self.http = http
        self.shared = Informers(http)
        self.controllers = [factory(http, self.shared) for factory in factories]

    @property
    def informers(self) -> list[Informer[Any]]:
        return list(self.shared.all)

    def start(self) -> ControllerManager:
        self.shared.start()
        for controller in self.controllers:
            controller.start()
        return self

    def synced(self, timeout_s: float) -> bool:
        return self.shared.synced(timeout_s)

    def stop(self) -> None:
        for controller in self.controllers:
            controller.queue.close()
        self.shared.stop(1.0)
        deadline = time.monotonic() + 5.0
        for controller in self.controllers:
            controller.stop(max(0.0, deadline - time.monotonic()))

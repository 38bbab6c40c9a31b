"""The controller process: informers on Nodes and on the controller's Jobs feed the reconciler's
work queue; one worker reconciles node by node; every `resync` seconds every node is looked at
again (TTL cleanup, missed events). With leader election only the Lease holder acts."""

from __future__ import annotations

import logging
from typing import Any

from runtimekit.base.threads import Workers
from runtimekit.controller.reconciler import NodeController, job_selector
from runtimekit.kube.http import KubeHttp, object_path
from runtimekit.kube.informer import Informer
from runtimekit.kube.lease import LeaderElector

log = logging.getLogger(__name__)


class ControllerServer:
    def __init__(
        self, http: KubeHttp, controller: NodeController, leader: LeaderElector | None = None, resync: float = 60.0
    ) -> None:
        self.http, self.controller, self.leader, self.resync = http, controller, leader, resync
        namespace = controller.options.namespace
        self.informers: list[Informer[Any]] = [
            Informer(http, "/api/v1/nodes", controller.on_node, name="nodes"),
            Informer(
                http,
                object_path("batch/v1", "jobs", namespace),
                controller.on_job,
                {"labelSelector": job_selector()},
                name="jobs",
            ),
        ]
        self._workers = Workers("controller")

    def leading(self) -> bool:
        return self.leader is None or self.leader.leading.is_set()

    def start(self) -> ControllerServer:
        for informer in self.informers:
            informer.start()
        if self.leader is not None:
            self.leader.start()
        self._workers.spawn("controller", self._work)
        self._workers.every("controller-resync", self.resync, self.controller.resync)
        return self

    def synced(self, timeout: float) -> bool:
        return all(i.synced.wait(timeout) for i in self.informers)

    def _work(self) -> None:
        while not self._workers.stopped and not self.synced(0.5):
            pass
        self.controller.run_worker(self._workers.stopping, self.leading)

    def stop(self) -> None:
        self._workers.stopping.set()
        self.controller.queue.close()
        self._workers.stop(5.0)
        for informer in self.informers:
            informer.stop(1.0)
        if self.leader is not None:
            self.leader.stop()
            self.leader.release()

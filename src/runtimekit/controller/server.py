"""The controller process: informers on Nodes and on the controller's Jobs feed the reconciler's
work queue; one worker reconciles node by node; every `resync` seconds every node is looked at
again (TTL cleanup, missed events). With leader election only the Lease holder acts."""

from __future__ import annotations

import logging
import threading

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
        self.informers = [
            Informer(http, "/api/v1/nodes", controller.on_node, name="nodes"),
            Informer(
                http,
                object_path("batch/v1", "jobs", namespace),
                controller.on_job,
                {"labelSelector": job_selector()},
                name="jobs",
            ),
        ]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def leading(self) -> bool:
        return self.leader is None or self.leader.leading.is_set()

    def start(self) -> ControllerServer:
        for informer in self.informers:
            informer.start()
        if self.leader is not None:
            self.leader.start()
        worker = threading.Thread(target=self._work, name="controller", daemon=True)
        ticker = threading.Thread(target=self._tick, name="controller-resync", daemon=True)
        self._threads = [worker, ticker]
        for thread in self._threads:
            thread.start()
        return self

    def synced(self, timeout: float) -> bool:
        return all(i.synced.wait(timeout) for i in self.informers)

    def _work(self) -> None:
        while not self._stop.is_set() and not self.synced(0.5):
            pass
        self.controller.run_worker(self._stop, self.leading)

    def _tick(self) -> None:
        while not self._stop.wait(self.resync):
            self.controller.resync()

    def stop(self) -> None:
        self._stop.set()
        self.controller.queue.close()
        for thread in self._threads:
            thread.join(5)
        for informer in self.informers:
            informer.stop(1.0)
        if self.leader is not None:
            self.leader.stop()
            self.leader.release()

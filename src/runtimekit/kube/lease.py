"""Leader election on a `coordination.k8s.io/v1` Lease, as client-go's leaderelection does it.

A candidate acquires the lease when it is free or expired (renewTime + leaseDurationSeconds in
the past), renews it every `renew_every` seconds, and updates only with the resourceVersion it
read, so two candidates can never both win. A leader that fails to renew before the lease expires
steps down. Callers: the scheduler and the controller (`--leader-elect`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from runtimekit.base.timestamps import parse_rfc3339, rfc3339
from runtimekit.kube.errors import KubeError
from runtimekit.kube.http import JSON, KubeHttp, object_path

log = logging.getLogger(__name__)


class LeaderElector:
    def __init__(
        self,
        http: KubeHttp,
        name: str,
        namespace: str,
        identity: str,
        lease_seconds: float = 15.0,
        renew_every: float = 2.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.http, self.name, self.namespace, self.identity = http, name, namespace, identity
        self.lease_seconds, self.renew_every, self.clock = lease_seconds, renew_every, clock
        self.leading = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._path = object_path("coordination.k8s.io/v1", "leases", namespace)

    def _body(self, transitions: int, acquire: str | None) -> JSON:
        now = rfc3339(micro=True)
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": round(self.lease_seconds),
                "acquireTime": acquire or now,
                "renewTime": now,
                "leaseTransitions": transitions,
            },
        }

    def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this candidate holds the lease afterwards."""
        try:
            lease = self.http.get(f"{self._path}/{self.name}")
        except KubeError as exc:
            if exc.code != 404:
                raise
            try:
                self.http.post(self._path, self._body(0, None))
                return True
            except KubeError as create_error:
                if create_error.code == 409:
                    return False
                raise
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        duration = float(spec.get("leaseDurationSeconds") or self.lease_seconds)
        expired = (parse_rfc3339(spec.get("renewTime")) or 0.0) + duration < self.clock()
        if holder and holder != self.identity and not expired:
            return False
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if holder == self.identity else 1)
        body = self._body(transitions, spec.get("acquireTime") if holder == self.identity else None)
        body["metadata"]["resourceVersion"] = (lease.get("metadata") or {}).get("resourceVersion")
        try:
            self.http.put(f"{self._path}/{self.name}", body)
        except KubeError as exc:
            if exc.code == 409:
                return False
            raise
        return True

    def run(self) -> None:
        last_renew = 0.0
        while not self._stop.is_set():
            try:
                held = self.try_acquire_or_renew()
            except KubeError as exc:
                log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
                # keep leading only while a renewal is still due well before the lease could expire
                held = self.leading.is_set() and self.clock() - last_renew < self.lease_seconds * 2 / 3
            if held:
                last_renew = self.clock()
                if not self.leading.is_set():
                    log.info("became leader of lease %s/%s as %s", self.namespace, self.name, self.identity)
                self.leading.set()
            elif self.leading.is_set():
                log.warning("lost lease %s/%s", self.namespace, self.name)
                self.leading.clear()
            self._stop.wait(self.renew_every)
        self.leading.clear()

    def start(self) -> LeaderElector:
        self._thread = threading.Thread(target=self.run, name=f"lease {self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def release(self) -> None:
        """Give the lease up at shutdown so a standby takes over at once."""
        try:
            lease = self.http.get(f"{self._path}/{self.name}")
            if (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                lease["spec"]["holderIdentity"] = ""
                lease["spec"]["renewTime"] = "1970-01-01T00:00:00.000000Z"
                self.http.put(f"{self._path}/{self.name}", lease)
        except KubeError as exc:
            log.info("could not release lease: %s", exc)

"""Leader election on a `coordination.k8s.io/v1` Lease, as client-go's `leaderelection` does it.

Expiry is judged by the local clock only, never by the times other candidates write: each candidate
remembers the lease record it last saw and the moment, on its own monotonic clock, at which it saw
that record change. The lease is free to take when it has no holder, or when the record has not
changed for `leaseDurationSeconds` by that clock. A holder whose wall clock is hours off therefore
neither loses its lease early nor keeps it late; `renewTime` and `acquireTime` are written for
people and `kubectl`, not read.

Every write carries the resourceVersion read, so of several candidates at most one wins a round
(the others get 409 Conflict). The leader renews every `renew_every` seconds. It steps down at once
when it sees another holder in the record, and after `renew_deadline` seconds (less than the lease
duration, so it is not leading by the time others may take over) without a successful renewal.
`step()` is one round (tests drive it with injected clocks); `start()` runs rounds on a thread.
Callers: the scheduler and the controller (`--leader-elect`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import cast

from runtimekit.base.threads import Workers
from runtimekit.base.timestamps import rfc3339
from runtimekit.kube.errors import ConflictError, KubeError, NotFoundError
from runtimekit.kube.http import KubeHttp, object_path
from runtimekit.kube.objects import Lease, LeaseSpec, ObjectMeta, meta

log = logging.getLogger(__name__)
LeaseRecord = tuple[str | None, int | None, str | None, str | None, int | None]
"""A Lease's holderIdentity, leaseDurationSeconds, acquireTime, renewTime and leaseTransitions."""


def lease_record(lease: Lease) -> LeaseRecord:
    """What of a Lease counts as its record: a change of any of it shows the holder is alive."""
    spec = lease.get("spec") or {}
    return (
        spec.get("holderIdentity"),
        spec.get("leaseDurationSeconds"),
        spec.get("acquireTime"),
        spec.get("renewTime"),
        spec.get("leaseTransitions"),
    )


class LeaderElector:
    def __init__(
        self,
        http: KubeHttp,
        name: str,
        namespace: str,
        identity: str,
        lease_seconds: float = 15.0,
        renew_every: float = 2.0,
        *,
        renew_deadline: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        on_lead: Callable[[], None] | None = None,
    ) -> None:
        """`clock` measures durations (monotonic); `wall` only stamps the times written in the Lease.
        `on_lead` is called on the election thread each time this candidate becomes leader, so its
        owner starts work at once instead of at its next poll of `leading`."""
        self.http, self.name, self.namespace, self.identity = http, name, namespace, identity
        self.lease_seconds, self.renew_every = lease_seconds, renew_every
        self.renew_deadline = lease_seconds * 2 / 3 if renew_deadline is None else renew_deadline
        if not 0 < self.renew_deadline < lease_seconds:
            raise ValueError("the renew deadline must be shorter than the lease duration")
        self.clock, self.wall, self.on_lead = clock, wall, on_lead
        self.leading = threading.Event()
        self.observed: LeaseRecord | None = None  # the record last seen ...
        self.observed_at = 0.0  # ... and when it was first seen as it is, by `clock`
        self._renewed_at = 0.0
        self._workers = Workers(f"lease {name}")
        self._path = object_path("coordination.k8s.io/v1", "leases", namespace)

    @property
    def renewed_at(self) -> float:
        """When this candidate last held the lease, by `clock` (0 before it ever did)."""
        return self._renewed_at

    @property
    def holder(self) -> str:
        """The holder in the record last seen ('' when none or not seen yet)."""
        return str(self.observed[0] or "") if self.observed else ""

    def _observe(self, lease: Lease) -> None:
        record = lease_record(lease)
        if record != self.observed:
            self.observed, self.observed_at = record, self.clock()

    def _body(self, spec: LeaseSpec, holding: bool, resource_version: str | None) -> Lease:
        now = rfc3339(self.wall(), micro=True)
        transitions = int(spec.get("leaseTransitions") or 0)
        metadata: ObjectMeta = {"name": self.name, "namespace": self.namespace}
        if resource_version is not None:
            metadata["resourceVersion"] = resource_version
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": round(self.lease_seconds),
                "acquireTime": spec.get("acquireTime") if holding else now,
                "renewTime": now,
                "leaseTransitions": transitions if holding or resource_version is None else transitions + 1,
            },
        }

    def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this candidate holds the lease afterwards. Raises KubeError when
        the API server cannot be asked (a conflict is an answer: False)."""
        try:
            lease = cast(Lease, self.http.get(f"{self._path}/{self.name}"))
        except NotFoundError:
            try:
                self._observe(cast(Lease, self.http.post(self._path, self._body({}, False, None))))
            except ConflictError:
                return False  # another candidate created it first
            return True
        self._observe(lease)
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        duration = float(spec.get("leaseDurationSeconds") or self.lease_seconds)
        if holder and holder != self.identity and self.clock() < self.observed_at + duration:
            return False
        version = str(meta(lease).get("resourceVersion", ""))
        try:
            written = self.http.put(f"{self._path}/{self.name}", self._body(spec, holder == self.identity, version))
        except ConflictError:
            return False  # someone wrote since we read: look again next round
        self._observe(cast(Lease, written))
        return True

    def step(self) -> bool:
        """One round: try to acquire or renew, then lead or not (see the module docstring)."""
        try:
            held = self.try_acquire_or_renew()
        except KubeError as exc:
            log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
            held = False
        now = self.clock()
        if held:
            self._renewed_at = now
            became = not self.leading.is_set()
            self.leading.set()
            if became:
                log.info("became leader of lease %s/%s as %s", self.namespace, self.name, self.identity)
                if self.on_lead is not None:
                    self.on_lead()
        elif self.leading.is_set():
            taken = self.holder not in ("", self.identity)
            if taken or now - self._renewed_at >= self.renew_deadline:
                why = f"now held by {self.holder}" if taken else f"not renewed for {now - self._renewed_at:.1f} s"
                log.warning("lost lease %s/%s: %s", self.namespace, self.name, why)
                self.leading.clear()
        return self.leading.is_set()

    def run(self) -> None:
        while not self._workers.stopped:
            self.step()
            self._workers.wait(self.renew_every)
        self.leading.clear()

    def start(self) -> LeaderElector:
        self._workers.spawn(f"lease {self.name}", self.run)
        return self

    def stop(self) -> None:
        self._workers.stop(5.0)
        self.leading.clear()

    def release(self) -> None:
        """Give the lease up at shutdown so a standby takes over at once (it sees no holder)."""
        try:
            lease = cast(Lease, self.http.get(f"{self._path}/{self.name}"))
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") == self.identity:
                lease["spec"] = {**spec, "holderIdentity": "", "leaseDurationSeconds": 1}
                self.http.put(f"{self._path}/{self.name}", lease)
        except KubeError as exc:
            log.info("could not release lease %s/%s: %s", self.namespace, self.name, exc)

"""A simulated kubelet's Node: registration, heartbeats, the node Lease, and resource updates.

`NodeReporter.register()` creates the Node (or, when it exists already, updates its labels,
annotations and status), then `run(stop)` keeps it current from a thread of the kubelet: every
`poll_s` it compares the advertised resources with what it last wrote and patches the status
subresource when they changed (a device plugin registered, a device turned unhealthy) or
`report_s` has passed (fresh heartbeat times in the conditions); every `heartbeat_s` it renews the
node's Lease in `kube-node-lease`. Like kubelet, it does not rewrite an unchanged status at every
heartbeat, so watchers of Nodes see few events. Errors are logged and retried on the next round.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from runtimekit.base.timestamps import rfc3339
from runtimekit.cluster.kubelet.admission import CPU, MEMORY, PODS, base_units
from runtimekit.cluster.kubelet.devices import NodeDevices
from runtimekit.cluster.kubelet.status import node_manifest, node_status
from runtimekit.kube.errors import KubeError
from runtimekit.kube.http import KubeHttp, object_path
from runtimekit.kube.objects import NodeStatus

log = logging.getLogger(__name__)
LEASE_NAMESPACE = "kube-node-lease"
LEASE_SECONDS = 40


@dataclass(frozen=True)
class NodeShape:
    """What a simulated node is besides its devices."""

    name: str
    cpu: str = "64"
    memory: str = "512Gi"
    max_pods: int = 110
    address: str = "127.0.0.1"
    labels: Mapping[str, str] = field(default_factory=dict)
    ephemeral_storage: str = "500Gi"

    def base(self) -> dict[str, str]:
        """What every kubelet reports besides devices (huge pages: none reserved, as on most nodes)."""
        return {
            CPU: self.cpu,
            MEMORY: self.memory,
            PODS: str(self.max_pods),
            "ephemeral-storage": self.ephemeral_storage,
            "hugepages-1Gi": "0",
            "hugepages-2Mi": "0",
        }


Resources = tuple[dict[str, int], dict[str, int]]  # capacity, allocatable (extended resources)


class NodeReporter:
    def __init__(
        self,
        http: KubeHttp,
        shape: NodeShape,
        devices: NodeDevices,
        heartbeat_s: float = 10.0,
        report_s: float = 60.0,
        poll_s: float = 0.25,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.http, self.shape, self.devices = http, shape, devices
        self.heartbeat_s, self.report_s, self.poll_s, self.clock = heartbeat_s, report_s, poll_s, clock
        self._path = object_path("v1", "nodes", name=shape.name)
        self.written: Resources | None = None
        self.heartbeats = 0

    def allocatable(self) -> dict[str, int]:
        """The node's allocatable in kubelet's units (cpu milli, memory bytes), for the fit check."""
        base = {name: base_units(name, value) for name, value in self.shape.base().items()}
        return {**base, **self.devices.allocatable()}

    def _status(self, resources: Resources) -> NodeStatus:
        capacity, allocatable = resources
        base = self.shape.base()
        return node_status(
            {**base, **{k: str(v) for k, v in capacity.items()}},
            {**base, **{k: str(v) for k, v in allocatable.items()}},
            rfc3339(self.clock()),
            self.shape.address,
            self.shape.name,
        )

    def _resources(self) -> Resources:
        return self.devices.capacity(), self.devices.allocatable()

    def register(self) -> None:
        """Create or update the Node object; raises KubeError when the API server refuses."""
        resources = self._resources()
        labels, annotations = self.devices.node_metadata()
        labels = {**self.shape.labels, **labels}
        manifest = node_manifest(self.shape.name, labels, annotations, self._status(resources))
        try:
            self.http.post(object_path("v1", "nodes"), manifest)
        except KubeError as exc:
            if exc.code != 409:
                raise
            metadata = manifest["metadata"]
            self.http.patch(
                self._path, {"metadata": {"labels": metadata["labels"], "annotations": metadata["annotations"]}}
            )
            self.http.patch(f"{self._path}/status", {"status": manifest["status"]}, "strategic")
        self.written = resources
        self._renew_lease()
        log.info("node %s registered: %s", self.shape.name, resources[0] or "no extended resources yet")

    def run(self, stop: threading.Event) -> None:
        """Until `stop`: the status when resources change or every `report_s`, the Lease every `heartbeat_s`."""
        next_report = next_lease = time.monotonic()
        while not stop.wait(self.poll_s):
            now = time.monotonic()
            resources = self._resources()
            try:
                if resources != self.written or now >= next_report + self.report_s:
                    self.http.patch(f"{self._path}/status", {"status": self._status(resources)}, "strategic")
                    if resources != self.written:
                        log.info("node %s: resources now %s", self.shape.name, resources[0])
                    self.written, next_report = resources, now
                if now >= next_lease + self.heartbeat_s:
                    self._renew_lease()
                    self.heartbeats += 1
                    next_lease = now
            except KubeError as exc:
                log.warning("node %s: status update failed (will retry): %s", self.shape.name, exc)

    def _renew_lease(self) -> None:
        now = rfc3339(self.clock(), micro=True)
        path = object_path("coordination.k8s.io/v1", "leases", LEASE_NAMESPACE, self.shape.name)
        try:
            self.http.patch(path, {"spec": {"renewTime": now}})
        except KubeError as exc:
            if exc.code != 404:
                raise
            lease = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.shape.name, "namespace": LEASE_NAMESPACE},
                "spec": {"holderIdentity": self.shape.name, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": now},
            }
            self.http.post(object_path("coordination.k8s.io/v1", "leases", LEASE_NAMESPACE), lease)

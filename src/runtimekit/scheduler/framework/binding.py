"""A placement on its way to its node: the `Binding` that PreBind plugins prepare and Bind plugins
carry out, `BindHooks`, the framework's side of a bind as a cache sees it, `BindGroup`, the members
of a gang committed together, and `VolumeAccess`, what a PreBind plugin may do with the cluster's
volumes (the live scheduler's; None where there is no API server).

The order is kube-scheduler's: after the statement places a task on a node, Reserve plugins hold
what they keep for it; on commit the cache books the placement ("assumes" it) and, on its own
time (a binder thread in a live scheduler), runs PreBind then Bind; any failure after Reserve —
a failed Reserve, PreBind or bind, a discarded statement, a session that ends with the task not
bound — calls every Reserve plugin's Unreserve, which is idempotent.

A gang's members committed by one statement bind as a group: none is bound until every member's
PreBind succeeded, and when one member's PreBind (or its assumption in the cache) fails, every
member is given back and unreserved, so a gang is never left partly bound for its volumes.

A leaf below the session: it imports only the framework's value modules.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from runtimekit.kube.objects import PersistentVolume, PersistentVolumeClaim, ResourceClaim
from runtimekit.model import Assignment, NodeInventory, NodeName, PodKey, Slot, shares_for
from runtimekit.scheduler.framework.info import TaskInfo
from runtimekit.scheduler.framework.status import Status
from runtimekit.scheduler.framework.values import DeviceChoice
from runtimekit.scheduler.kubesem.volumes import VolumeCatalog


class VolumeAccess(Protocol):
    """What a PreBind plugin may do with the cluster's volumes (kube-scheduler's volume binder holds
    a client and the informers' listers): write a volume or claim (raising an exception that says
    why when the API server refuses), and read the latest informer state to wait for the PV
    controller and provisioners."""

    def update_volume(self, volume: PersistentVolume) -> PersistentVolume:
        """PUT the volume; the API server's answer (raises on refusal, e.g. a conflict)."""

    def update_claim(self, claim: PersistentVolumeClaim) -> PersistentVolumeClaim:
        """PUT the claim; the API server's answer (raises on refusal)."""

    def catalog(self) -> VolumeCatalog:
        """The storage objects as the informers last saw them."""

    def node_labels(self, node: str) -> Mapping[str, str] | None:
        """The node's labels (None: the node is gone)."""

    def pod_exists(self, key: PodKey) -> bool:
        """Whether the pod being bound still exists."""

    def wait(self, version: int, timeout: float) -> bool:
        """Block until the catalog's version moves past `version`, or `timeout` seconds pass; False
        when the scheduler is stopping (a PreBind waiting for volumes gives up then)."""


class ClaimAccess(Protocol):
    """What PreBind may do with ResourceClaims (the live scheduler's; `cache/dra.py`): read the
    latest claim, and write its status (raising an exception that says why when refused)."""

    def claim(self, key: str) -> ResourceClaim | None:
        """The claim (namespace/name) as last seen or written; None when it is gone."""

    def update_status(self, claim: ResourceClaim) -> ResourceClaim:
        """PUT the claim's status; the API server's answer (raises on refusal, e.g. a conflict)."""


@dataclass(slots=True)
class Binding:
    """One pod's binding: the task (its `node` and `placement` set), the devices chosen for it in
    the session, the annotations the Binding will carry, and the device assignment PreBind plugins
    write (`assign`). The cache posts it after PreBind (or a Bind plugin binds it); the assignment
    becomes the protocol's assignment annotation there, with the node's GPU UUIDs."""

    task: TaskInfo
    node: NodeName
    choice: DeviceChoice
    annotations: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)  # labels written with it (HAMi's `hami.io/vgpu-node`)
    devices: list[tuple[str, tuple[Slot, ...]]] = field(default_factory=list)  # container -> its slots
    policies: list[str] = field(default_factory=list)
    volumes: VolumeAccess | None = None  # the cluster's volumes (a live scheduler's); None elsewhere
    claims: ClaimAccess | None = None  # the cluster's ResourceClaims (a live scheduler's); None elsewhere

    def assign(self, containers: Iterable[tuple[str, tuple[Slot, ...]]], policy: str) -> None:
        """Write devices into the binding's assignment: the slots of each container, and the policy
        that chose them (policies of several plugins are joined with `+`)."""
        self.devices.extend(containers)
        if policy:
            self.policies.append(policy)

    def assignment(self, inventory: NodeInventory) -> Assignment:
        """The assignment as the device plugin and the runtime read it (GPU UUIDs from `inventory`)."""
        return Assignment(
            self.node, {name: shares_for(slots, inventory) for name, slots in self.devices}, "+".join(self.policies)
        )


class BindGroup:
    """The members of one gang a statement committed together. The cache reports each member's
    PreBind (`done`); none is bound until all have succeeded, and once one failed every member is
    failed. Thread-safe: members report from binder threads."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._ready: list[PodKey] = []
        self._failed = False

    def done(self, key: PodKey, ok: bool) -> tuple[list[PodKey], list[PodKey]]:
        """A member's PreBind ended: (the members to bind now, the members to fail now). The members
        to bind are all of them, once the last succeeded; the members to fail are this one when it
        failed or the group already had, and, on the first failure, those that were waiting."""
        with self._lock:
            if ok and not self._failed:
                self._ready.append(key)
                if len(self._ready) < self.size:
                    return [], []
                ready, self._ready = self._ready, []
                return ready, []
            if self._failed:
                return [], [key]
            self._failed = True
            waiting, self._ready = self._ready, []
            return [], [key, *waiting]

    @property
    def failed(self) -> bool:
        with self._lock:
            return self._failed


class BindHooks(Protocol):
    """The plugins' part of a bind, as a cache calls it (outside the session; in a live scheduler on
    a binder thread, so plugins must not use the session there)."""

    def pre_bind(self, binding: Binding) -> Status:
        """Every PreBind plugin in order; the first failure (stamped with the plugin) or success."""

    def bind(self, binding: Binding) -> Status:
        """Bind plugins in order until one handles the pod: its status; SKIP when none did (the
        cache's own binder binds it then)."""

    def unreserve(self, task: TaskInfo) -> None:
        """Every Reserve plugin's Unreserve, in reverse order (idempotent)."""

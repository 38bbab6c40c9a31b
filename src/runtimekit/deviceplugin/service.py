"""The device plugin as a plain service: device lists per resource, preferred allocations, Allocate.

`DeviceState` mirrors the runtime's WatchDevices (a generation and a condition, so ListAndWatch
streams follow a health change within milliseconds). `DevicePluginService.allocate` finds the pod
(`matching.match`), forwards its assigned shares to the runtime (a MIG share with its GPU, profile and
start: the runtime finds the static device or makes the dynamic one), and marks the pod allocated with a
resourceVersion-guarded patch of `annotations.allocated` (under HAMi's names with HAMi's
`hami.io/bind-phase: success` once every GPU container has its devices, `runtimekit.model.hami`),
re-reading and retrying on a conflict. Every
refusal is a `ServiceError` whose message kubelet shows on the pod; nothing here raises anything else
for a bad request. Allocate calls are serialised (one lock), as kubelet itself does.

Which pod an Allocate is for: the one kubelet's PodResources shows it is admitting
(`admitting.py`), when the plugin has kubelet's PodResources socket — exact under any interleaving
of creations, deletions and bindings; without it, the oldest waiting pod of the size (two pods of
one size may then swap assignments). Only assignments the `AssignmentCheck` accepts count: signed
by the scheduler with a key of `PluginSettings.keys`, equal to the pod's requests.

The pods come from the watch-kept `PodView` when there is one: no list on the hot path. The view may
lag the server, so it is trusted only for a match; no match there, or a matched pod that turns out to
be gone or replaced, and the call is made again on a fresh list from the API server. What this plugin
allocated moments ago (`_recent`) is forgotten only against a fresh list, never against the view; so
are the pods whose Allocate it refused (`_refused`: kubelet rejects them, and a kubelet before 1.34
still lists them in PodResources).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

from runtimekit.api.podresources_client import ListedPod
from runtimekit.api.runtime_client import FeatureUnavailable, RuntimeApi, RuntimeCallError, Share
from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.base.keyring import KeyRing
from runtimekit.base.rpcerrors import Code, ServiceError
from runtimekit.deviceplugin.admitting import admitting
from runtimekit.deviceplugin.authority import AssignmentCheck
from runtimekit.deviceplugin.kubeapi import KubeletPods, NodeApi, PodView
from runtimekit.deviceplugin.matching import (
    AllocatedKey,
    Candidate,
    MatchCache,
    NoMatch,
    encode_allocated,
    match,
    parse_allocated,
    preferred_ids,
)
from runtimekit.deviceplugin.resources import (
    AdvertisedDevice,
    ResourceKind,
    ResourceSpec,
    advertised,
    gpu_of,
    resource_specs,
    target,
)
from runtimekit.kube.errors import ConflictError, KubeError, NotFoundError
from runtimekit.kube.objects import Pod, meta
from runtimekit.model import hami
from runtimekit.protocol import KitProtocol
from runtimekit.protocol.presets import speaks_hami

log = logging.getLogger(__name__)

PATCH_ATTEMPTS = 4


class DeviceState:
    """The runtime's devices as last seen. Thread-safe; `wait_change` wakes on every update."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._devices: tuple[pb.Device, ...] = ()
        self._generation = 0
        self._closed = False

    def update(self, devices: Sequence[pb.Device]) -> bool:
        """Replace the device list; True when it changed."""
        with self._cond:
            new = tuple(devices)
            if new == self._devices and self._generation:
                return False
            self._devices = new
            self._generation += 1
            self._cond.notify_all()
            return True

    def mark_all_unhealthy(self, reason: str) -> bool:
        with self._cond:
            devices = [self._unhealthy(d, reason) for d in self._devices]
        return self.update(devices)

    @staticmethod
    def _unhealthy(device: pb.Device, reason: str) -> pb.Device:
        copy = pb.Device()
        copy.CopyFrom(device)
        copy.health = pb.HEALTH_UNHEALTHY
        copy.health_reason = reason
        return copy

    def snapshot(self) -> tuple[int, tuple[pb.Device, ...]]:
        with self._cond:
            return self._generation, self._devices

    def wait_change(self, after: int, timeout_s: float) -> tuple[int, tuple[pb.Device, ...]] | None:
        """The devices once the generation is past `after`; None on timeout or close."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._generation > after or self._closed, timeout_s):
                return None
            return None if self._closed else (self._generation, self._devices)

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


@dataclass(frozen=True)
class PluginSettings:
    node_name: str
    protocol: KitProtocol
    memory_unit: int = 0  # MiB per gpu-memory device on this node (--memory-unit); 0: the protocol's memoryUnit
    keys: KeyRing | None = None  # verifies the scheduler's signatures; None: every assignment is refused

    @property
    def memory_unit_mib(self) -> int:
        """The size of one gpu-memory device this plugin advertises, and publishes on its node."""
        return self.memory_unit or self.protocol.memory_unit_mib


class DevicePluginService:
    """See the module docstring."""

    def __init__(
        self,
        settings: PluginSettings,
        runtime: RuntimeApi,
        kube: NodeApi,
        state: DeviceState,
        view: PodView | None = None,
        kubelet: KubeletPods | None = None,
    ) -> None:
        self.settings = settings
        self.state = state
        self._runtime = runtime
        self._kube = kube
        self._view = view
        self._kubelet = kubelet
        self._hami = speaks_hami(settings.protocol)  # HAMi's names: its bind phase is written too
        self._cache = MatchCache()
        self._check = AssignmentCheck(settings.keys, settings.protocol, self._gpu_memory, settings.memory_unit_mib)
        self._lock = threading.Lock()
        self._recent: set[AllocatedKey] = set()
        self._refused: set[str] = set()  # uids of pods whose Allocate this plugin refused
        self._admitting: set[str] = set()  # uids kubelet showed admitting during the current call

    @property
    def node(self) -> str:
        return self.settings.node_name

    def specs(self) -> list[ResourceSpec]:
        return resource_specs(self.state.snapshot()[1], self.settings.protocol)

    def spec(self, resource: str) -> ResourceSpec:
        found = next((s for s in self.specs() if s.name == resource), None)
        if found is None:
            raise ServiceError(Code.NOT_FOUND, f"this plugin does not serve resource {resource!r}")
        return found

    def devices(self, spec: ResourceSpec, devices: Sequence[pb.Device]) -> list[AdvertisedDevice]:
        return advertised(spec, devices, self.settings.memory_unit_mib)

    def _gpu_memory(self) -> dict[str, int]:
        return {d.uuid: d.memory_mib for d in self.state.snapshot()[1]}

    def _pods(self) -> Sequence[Pod]:
        try:
            return self._kube.list_node_pods(self.node)
        except KubeError as exc:
            raise ServiceError(Code.UNAVAILABLE, f"cannot list the pods of node {self.node}: {exc}") from None

    # -- GetPreferredAllocation ----------------------------------------------------------------
    def preferred(self, resource: str, available: Sequence[str], must_include: Sequence[str], size: int) -> list[str]:
        """Advice only: IDs on the GPUs assigned to the container kubelet is about to allocate."""
        spec = self.spec(resource)
        with self._lock:
            try:
                found = self._match(resource, size, self._listing())
            except ServiceError as exc:
                log.warning("preferred allocation without pods: %s", exc.message)
                found = NoMatch(exc.message)
        shares = found.candidate.shares if isinstance(found, _Found) else ()
        if spec.kind is ResourceKind.MIG:
            shares = tuple(s for s in shares if s.mig_profile == spec.mig_profile)
        return preferred_ids(spec.kind, shares, available, must_include, size)

    # -- Allocate ------------------------------------------------------------------------------
    def allocate(self, resource: str, device_ids: Sequence[str]) -> pb.AllocateResponse:
        """The runtime's answer for the container this Allocate is for. Raises ServiceError with why not."""
        self.spec(resource)
        with self._lock:
            self._admitting = set()
            try:
                return self._allocate_matched(resource, device_ids)
            except ServiceError:
                self._refused |= self._admitting  # kubelet rejects the pod it was admitting
                raise

    def _allocate_matched(self, resource: str, device_ids: Sequence[str]) -> pb.AllocateResponse:
        listing = self._listing()
        found = self._waiting(resource, len(device_ids), listing)
        try:
            return self._allocate(found, resource, device_ids)
        except ServiceError as exc:
            if found.fresh:
                raise
            # The view may show a pod deleted since (the runtime may even refuse it as over-committing):
            # whatever went wrong, the call is matched again on a fresh list before anything is refused.
            log.info("%s on the watch-kept view: %s; matching on a fresh list", found.candidate, exc.message)
        return self._allocate(self._waiting(resource, len(device_ids), listing, fresh=True), resource, device_ids)

    def _listing(self) -> Sequence[ListedPod] | None:
        """kubelet's PodResources now (None without the socket). Raises ServiceError when kubelet does not answer."""
        if self._kubelet is None:
            return None
        try:
            return self._kubelet.list()
        except Exception as exc:
            raise ServiceError(
                Code.UNAVAILABLE, f"cannot ask kubelet's PodResources which pod it is admitting: {exc}"
            ) from None

    def _waiting(self, resource: str, size: int, listing: Sequence[ListedPod] | None, fresh: bool = False) -> _Found:
        """`_match`, or the refusal kubelet shows on the pod."""
        found = self._match(resource, size, listing, fresh)
        if isinstance(found, NoMatch):
            raise ServiceError(Code.FAILED_PRECONDITION, found.reason)
        return found

    def _match(
        self, resource: str, size: int, listing: Sequence[ListedPod] | None, fresh: bool = False
    ) -> _Found | NoMatch:
        """The container this call is for: from the watch-kept view when it matches, else from a fresh list."""
        seen = None if fresh or self._view is None else self._view.pods()
        if seen is not None:
            found = self._match_in(seen, resource, size, listing, fresh=False)
            if isinstance(found, Candidate):
                return _Found(found, fresh=False)
        pods = self._pods()
        live = {str(meta(p).get("uid", "")) for p in pods}
        self._recent = {key for key in self._recent if key[0] in live}
        self._refused &= live
        found = self._match_in(pods, resource, size, listing, fresh=True)
        return found if isinstance(found, NoMatch) else _Found(found, fresh=True)

    def _match_in(
        self,
        pods: Sequence[Pod],
        resource: str,
        size: int,
        listing: Sequence[ListedPod] | None,
        fresh: bool,
    ) -> Candidate | NoMatch:
        pairs = None
        if listing is not None:
            rows = admitting(pods, listing, resource, size, self._refused)
            pairs = {(uid, container) for uid, _, _, container in rows}
            uids = {uid for uid, _ in pairs}
            self._admitting |= uids
            if len(uids) > 1 and not fresh:  # the view may still show pods since deleted
                return NoMatch("kubelet lists more than one pod being admitted in the watch-kept view")
            if len(uids) > 1:
                log.warning(
                    "kubelet lists %d pods without %s (an older kubelet lists pods it rejected): %s; "
                    "taking the oldest waiting one",
                    len(rows),
                    resource,
                    ", ".join(f"{ns}/{name}" for _, ns, name, _ in rows),
                )
        return match(
            pods, self.node, resource, size, self.settings.protocol, self._recent, self._cache, self._check, pairs
        )

    def _allocate(self, found: _Found, resource: str, device_ids: Sequence[str]) -> pb.AllocateResponse:
        candidate = found.candidate
        self._check_devices(candidate, resource, device_ids)
        answer = self._forward(candidate, resource, device_ids)
        self._mark_allocated(candidate, resource)
        self._recent.add((candidate.uid, candidate.container, resource))
        log.info("allocated %s for %s: %s", resource, candidate, ", ".join(s.uuid for s in candidate.shares))
        return answer

    def _check_devices(self, found: Candidate, resource: str, device_ids: Sequence[str]) -> None:
        assigned = {target(s) for s in found.shares}
        stray = sorted({gpu_of(i) for i in device_ids} - assigned)
        if stray:  # kubelet's IDs are only bookkeeping; the assignment decides. Say so for PodResources readers.
            log.warning("kubelet chose %s devices on %s for %s, assigned %s", resource, stray, found, sorted(assigned))

    def _forward(self, found: Candidate, resource: str, device_ids: Sequence[str]) -> pb.AllocateResponse:
        shares = [
            Share(s.uuid, s.core_milli, s.memory_mib, s.parent_uuid or "", s.mig_profile, s.mig_start)
            for s in found.shares
        ]
        try:
            return self._runtime.allocate(
                found.namespace, found.name, found.uid, found.container, shares, resource, device_ids
            )
        except RuntimeCallError as exc:
            code = Code.__members__.get(exc.code.name, Code.UNAVAILABLE)
            raise ServiceError(code, f"the node runtime refused {resource} for {found}: {exc.details}") from None
        except FeatureUnavailable as exc:
            raise ServiceError(Code.FAILED_PRECONDITION, str(exc)) from None

    def _mark_allocated(self, found: Candidate, resource: str) -> None:
        key = self.settings.protocol.annotations.allocated
        record = dict(found.allocated)
        version = found.resource_version or None
        for _ in range(PATCH_ATTEMPTS):
            record[found.container] = (*record.get(found.container, ()), resource)
            notes = {key: encode_allocated(record)}
            if self._hami and found.gpu_containers <= record.keys():  # every GPU container has its devices
                notes |= hami.allocated()
            try:
                pod = self._kube.patch_pod_annotations(found.namespace, found.name, notes, version)
            except ConflictError:
                pod = self._reread(found, resource)
                record = parse_allocated(meta(pod).get("annotations", {}).get(key))
                version = str(meta(pod).get("resourceVersion", "")) or None
            except NotFoundError:
                self._gone(found, resource, "deleted")
            except KubeError as exc:
                self._undo(found, resource, f"cannot mark the pod allocated: {exc}", Code.UNAVAILABLE)
            else:
                if self._view is not None:
                    self._view.remember(pod)
                return
        self._undo(found, resource, "cannot mark the pod allocated: it keeps changing", Code.UNAVAILABLE)

    def _reread(self, found: Candidate, resource: str) -> Pod:
        try:
            pod = self._kube.get_pod(found.namespace, found.name)
        except NotFoundError:
            self._gone(found, resource, "deleted")
        except KubeError as exc:
            self._undo(found, resource, f"cannot re-read the pod: {exc}", Code.UNAVAILABLE)
        if str(meta(pod).get("uid", "")) != found.uid:
            self._gone(found, resource, "replaced")
        return pod

    def _undo(self, found: Candidate, resource: str, why: str, code: Code) -> NoReturn:
        """Give the runtime allocation back (best effort) and refuse with `why`."""
        self._give_back(found)
        raise ServiceError(code, f"{resource} for {found}: {why}")

    def _gone(self, found: Candidate, resource: str, how: str) -> NoReturn:
        """`_undo` for a pod deleted or replaced meanwhile: a refusal worth matching again on a fresh list."""
        self._give_back(found)
        message = f"{resource} for {found}: the pod was {how} while it was being allocated"
        raise _Vanished(Code.FAILED_PRECONDITION, message)

    def _give_back(self, found: Candidate) -> None:
        if not found.allocated.get(found.container):
            try:
                self._runtime.release(found.uid, found.container, found.namespace, found.name)
            except (RuntimeCallError, FeatureUnavailable) as exc:
                log.warning("could not release %s after a failed Allocate: %s", found, exc)


@dataclass(frozen=True)
class _Found:
    """A matched container, and whether it was matched on a fresh list (else on the watch-kept view)."""

    candidate: Candidate
    fresh: bool


class _Vanished(ServiceError):
    """The matched pod is gone or replaced: worth matching again on a fresh list."""

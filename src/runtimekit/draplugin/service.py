"""NodePrepareResources and NodeUnprepareResources as a plain service, the runtime doing the work.

Preparing a claim: read it from the API server, check it is the claim kubelet means (same uid) and is
allocated, take the allocation results of this driver in this node's pool, turn each device name back
into a GPU, a MIG placement or a share of a GPU (`inventory.targets`; the share from the result's
`consumedCapacity`, capped by an MPS config), and ask the runtime to allocate, one call per request:
the claim stands for the pod and the request for the container, so the runtime books, isolates and
checkpoints a claim exactly as it does a pod's container on the device-plugin path, and its
over-commit check covers both paths. The runtime's answers become one CDI device per request
(`cdi.py`); kubelet gets, for each allocated device, its request, pool, name and (on the first
device of a request) the request's CDI device and the runtime's own CDI names. Any failure undoes
what the claim got and is reported in the claim's `error`, never raised: kubelet retries.

Unpreparing releases the claim's allocations in the runtime and removes its CDI spec; unknown claims
are released too (the runtime's release of nothing is a no-op), so a plugin that lost its record
still frees what kubelet asks it to. Both are idempotent: a claim already prepared is answered from
the checkpoint (`checkpoint.py`). Calls are serialised by one lock, as kubelet serialises its own.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from runtimekit.api import kubelet_dra
from runtimekit.api.runtime_client import FeatureUnavailable, RuntimeApi, RuntimeCallError, Share
from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.draplugin.cdi import CdiWriter
from runtimekit.draplugin.checkpoint import Checkpoint, PreparedClaim, PreparedDevice
from runtimekit.draplugin.config import ConfigError, Sharing, sharing_for
from runtimekit.draplugin.inventory import Target, targets
from runtimekit.kube.errors import KubeError, NotFoundError
from runtimekit.kube.objects.dra import DeviceRequestAllocationResult, ResourceClaim
from runtimekit.kube.semantics.quantity import memory_mib, whole_number

log = logging.getLogger(__name__)


class ClaimApi(Protocol):
    def get_claim(self, namespace: str, name: str) -> ResourceClaim: ...


class DeviceSource(Protocol):
    """The runtime's devices as last seen."""

    def current(self) -> Sequence[pb.Device]: ...


@dataclass(frozen=True)
class ClaimRef:
    namespace: str
    uid: str
    name: str


@dataclass(frozen=True)
class Prepared:
    """A claim's answer: its devices, or why it could not be prepared."""

    devices: tuple[PreparedDevice, ...] = ()
    error: str = ""


class PrepareError(Exception):
    """Why one claim cannot be prepared: the message kubelet puts on the pod's event."""


class DraService:
    """See the module docstring."""

    def __init__(
        self,
        driver: str,
        node: str,
        runtime: RuntimeApi,
        claims: ClaimApi,
        devices: DeviceSource,
        cdi: CdiWriter,
        checkpoint: Checkpoint,
    ) -> None:
        self.driver = driver
        self.node = node
        self._runtime = runtime
        self._claims = claims
        self._devices = devices
        self._cdi = cdi
        self._checkpoint = checkpoint
        self._lock = threading.Lock()

    def prepare(self, claims: Sequence[ClaimRef]) -> dict[str, Prepared]:
        with self._lock:
            return {ref.uid: self._prepare_one(ref) for ref in claims}

    def unprepare(self, claims: Sequence[ClaimRef]) -> dict[str, str]:
        """The error of each claim ("" when released)."""
        with self._lock:
            return {ref.uid: self._unprepare_one(ref) for ref in claims}

    # -- prepare -------------------------------------------------------------------------------
    def _prepare_one(self, ref: ClaimRef) -> Prepared:
        done = self._checkpoint.get(ref.uid)
        if done is not None:
            return Prepared(done.devices)
        try:
            devices = self._prepare_new(ref)
        except PrepareError as exc:
            log.warning("cannot prepare claim %s/%s (%s): %s", ref.namespace, ref.name, ref.uid, exc)
            return Prepared(error=str(exc))
        self._checkpoint.add(PreparedClaim(ref.namespace, ref.name, ref.uid, devices))
        log.info("prepared claim %s/%s: %s", ref.namespace, ref.name, ", ".join(d.device for d in devices))
        return Prepared(devices)

    def _read(self, ref: ClaimRef) -> ResourceClaim:
        try:
            claim = self._claims.get_claim(ref.namespace, ref.name)
        except NotFoundError:
            raise PrepareError(f"ResourceClaim {ref.namespace}/{ref.name} not found") from None
        except KubeError as exc:
            raise PrepareError(f"cannot read ResourceClaim {ref.namespace}/{ref.name}: {exc}") from None
        uid = claim.get("metadata", {}).get("uid", "")
        if uid != ref.uid:
            raise PrepareError(f"ResourceClaim {ref.namespace}/{ref.name} has uid {uid}, kubelet asked for {ref.uid}")
        return claim

    def _prepare_new(self, ref: ClaimRef) -> tuple[PreparedDevice, ...]:
        claim = self._read(ref)
        allocation = claim.get("status", {}).get("allocation")
        if allocation is None:
            raise PrepareError(f"ResourceClaim {ref.namespace}/{ref.name} is not allocated")
        results = [r for r in allocation.get("devices", {}).get("results", []) if r.get("driver") == self.driver]
        if not results:
            raise PrepareError(f"ResourceClaim {ref.namespace}/{ref.name} has no device of driver {self.driver}")
        foreign = sorted({r.get("pool", "") for r in results} - {self.node})
        if foreign:
            raise PrepareError(f"devices of pool(s) {', '.join(foreign)} are not on node {self.node}")
        configs = allocation.get("devices", {}).get("config", [])
        named = targets(self._devices.current())
        by_request: dict[str, list[DeviceRequestAllocationResult]] = defaultdict(list)
        for result in results:
            by_request[result.get("request", "").split("/")[0]].append(result)
        answers: dict[str, pb.AllocateResponse] = {}
        try:
            for request, picked in by_request.items():
                try:
                    sharing = sharing_for(request, configs, self.driver)
                except ConfigError as exc:
                    raise PrepareError(f"request {request}: {exc}") from None
                for note in sharing.notes:
                    log.info("claim %s/%s request %s: %s", ref.namespace, ref.name, request, note)
                shares = [_share(_target(named, r), r, sharing) for r in picked]
                answers[request] = self._allocate(ref, request, shares, [r.get("device", "") for r in picked])
            self._cdi.write(ref.uid, answers)
        except BaseException:
            self._release(ref)
            raise
        return tuple(
            PreparedDevice(
                request=request,
                pool=result.get("pool", ""),
                device=result.get("device", ""),
                cdi_ids=(self._cdi.device_id(ref.uid, request), *answers[request].cdi_devices) if i == 0 else (),
            )
            for request, picked in by_request.items()
            for i, result in enumerate(picked)
        )

    def _allocate(self, ref: ClaimRef, request: str, shares: list[Share], names: list[str]) -> pb.AllocateResponse:
        try:
            return self._runtime.allocate(
                ref.namespace, ref.name, ref.uid, request, shares, kubelet_dra.CLAIM_RESOURCE, names
            )
        except RuntimeCallError as exc:
            raise PrepareError(f"the node runtime refused request {request}: {exc.details}") from None
        except FeatureUnavailable as exc:
            raise PrepareError(str(exc)) from None

    # -- unprepare -----------------------------------------------------------------------------
    def _unprepare_one(self, ref: ClaimRef) -> str:
        try:
            self._release(ref)
        except PrepareError as exc:
            return str(exc)
        self._checkpoint.remove(ref.uid)
        log.info("unprepared claim %s/%s (%s)", ref.namespace, ref.name, ref.uid)
        return ""

    def _release(self, ref: ClaimRef) -> None:
        try:
            self._runtime.release(ref.uid, "", ref.namespace, ref.name)
        except (RuntimeCallError, FeatureUnavailable) as exc:
            raise PrepareError(f"the node runtime did not release claim {ref.namespace}/{ref.name}: {exc}") from None
        self._cdi.remove(ref.uid)


def _target(named: dict[str, Target], result: DeviceRequestAllocationResult) -> Target:
    device = result.get("device", "")
    target = named.get(device)
    if target is None:
        raise PrepareError(f"device {device} is not (or no longer) on this node, or not healthy")
    return target


def _share(target: Target, result: DeviceRequestAllocationResult, sharing: Sharing) -> Share:
    """The runtime share of one allocated device: the consumed capacity of a shared GPU (the whole
    device otherwise), capped by the request's MPS limits."""
    consumed = result.get("consumedCapacity", {})
    try:
        core = whole_number(consumed["core"]) if "core" in consumed else 100
        memory = memory_mib(consumed["memory"]) if "memory" in consumed else target.memory_mib
    except ValueError as exc:
        raise PrepareError(f"device {target.name}: bad consumedCapacity: {exc}") from None
    if sharing.core_percent:
        core = min(core, sharing.core_percent)
    if sharing.memory_mib:
        memory = min(memory, sharing.memory_mib)
    if target.is_mig:
        return Share(target.uuid, 0, 0, target.gpu_uuid, target.mig_profile, target.mig_start)  # the whole MIG device
    return Share(target.uuid, core * 10, memory)

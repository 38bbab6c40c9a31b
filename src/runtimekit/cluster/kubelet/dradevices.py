"""A simulated kubelet's Dynamic Resource Allocation: a pod's ResourceClaims prepared by their drivers.

`DraDevices` wraps a kubelet's `NodeDevices` (extended resources stay with it) as kubelet's DRA manager
sits beside its device manager: at admission it finds the pod's claims (`spec.resourceClaims`, by name
or, for a template, through `status.resourceClaimStatuses`), reads each one, groups them by the
drivers of their allocation results, and calls each driver's NodePrepareResources through the plugin
watcher (`draplugins.py`); a container gets, for every claim (or request of one) it names in
`resources.claims`, the CDI devices kubelet would hand the container runtime, applied as the runtime
would: their `env` edits, read from the CDI specs in `cdi_dir`. A claim stays prepared while any
admitted pod uses it (a claim may be shared by pods, NVIDIA's gpu-test3); the last pod's release
unprepares it. A claim that cannot be prepared (not made or not allocated yet, its driver not
registered, the driver's error) does not reject the pod: as kubelet's pod worker does, `admit` raises
`PrepareFailed`, the pod keeps what it holds and the kubelet retries after a back-off
(`FailedPrepareDynamicResources` Events) until the claims are prepared or the pod goes.
Once a driver has registered, its health stream is watched (`drahealth.py`); `health(pod)` reports
each claim a container names with its devices' health (`allocatedResourcesStatus`, KEP-4680), and a
change of a prepared device's health tells the `watch_health` listeners which pods hold it.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from runtimekit.cluster.kubelet.devicemanager import AdmissionError
from runtimekit.cluster.kubelet.devices import FAILED_PREPARE, ContainerEnv, NodeDevices, PrepareFailed
from runtimekit.cluster.kubelet.drahealth import DeviceKey, DraHealthWatch, HealthCache
from runtimekit.cluster.kubelet.draplugins import (
    ClaimKey,
    ClaimResult,
    DraPluginWatcher,
    PreparedDevice,
    cdi_ids_for,
)
from runtimekit.kube.errors import KubeError
from runtimekit.kube.objects import Pod, ResourceHealth, ResourceStatus, meta
from runtimekit.kube.objects.dra import ResourceClaim
from runtimekit.kube.semantics.podclaims import pod_claims

log = logging.getLogger(__name__)
REASON = FAILED_PREPARE


class ClaimReader(Protocol):
    def get_claim(self, namespace: str, name: str) -> ResourceClaim: ...


@dataclass(frozen=True)
class _Prepared:
    key: ClaimKey
    driver: str


def cdi_env(cdi_dir: Path, ids: Sequence[str]) -> dict[str, str]:
    """The environment the CDI devices `ids` (`kind=name`) set, in order, from the specs in `cdi_dir`."""
    devices: dict[str, list[str]] = {}
    for path in sorted(cdi_dir.glob("*.json")):
        spec = json.loads(path.read_text())
        for device in spec.get("devices", []):
            devices[f"{spec.get('kind')}={device.get('name')}"] = device.get("containerEdits", {}).get("env", [])
    env: dict[str, str] = {}
    for cdi_id in ids:
        for entry in devices.get(cdi_id, []):
            name, _, value = entry.partition("=")
            env[name] = value
    return env


class DraDevices:
    """See the module docstring. Thread-safe."""

    def __init__(self, inner: NodeDevices, watcher: DraPluginWatcher, claims: ClaimReader, cdi_dir: Path) -> None:
        self.inner = inner
        self.watcher = watcher
        self._claims = claims
        self._cdi_dir = cdi_dir
        self._lock = threading.Lock()
        self._pods: dict[str, list[_Prepared]] = {}  # pod uid -> the claims it holds
        self._users: dict[str, int] = defaultdict(int)  # claim uid -> admitted pods using it
        self._devices: dict[str, tuple[tuple[str, PreparedDevice], ...]] = {}  # claim uid -> (driver, device)
        self._listeners: list[Callable[[set[str]], None]] = []
        self.health_cache = HealthCache()
        self._health = DraHealthWatch(self.health_cache, self._health_changed)

    def capacity(self) -> dict[str, int]:
        return self.inner.capacity()

    def allocatable(self) -> dict[str, int]:
        return self.inner.allocatable()

    def node_metadata(self) -> tuple[dict[str, str], dict[str, str]]:
        return self.inner.node_metadata()

    def health(self, pod: Pod) -> dict[str, list[ResourceStatus]]:
        """The inner devices' health, and per container `claim:<claim>[/<request>]` for every claim it
        names: each device of the claim (its first CDI device ID, else `<driver>/<pool>/<device>`) with
        the health its driver last reported (Unknown without one), as kubelet's DRA manager has it."""
        out = self.inner.health(pod)
        named = pod_claims(pod)
        with self._lock:
            held = {p.key.name: p.key.uid for p in self._pods.get(str(meta(pod).get("uid", "")), [])}
            devices = {uid: self._devices.get(uid, ()) for uid in held.values()}
        for container in pod.get("spec", {}).get("containers", []):
            statuses: list[ResourceStatus] = []
            for ref in container.get("resources", {}).get("claims", []):
                uid = held.get(named.get(str(ref.get("name", ""))) or "")
                resources: dict[str, ResourceHealth] = {}
                for driver, device in devices.get(uid or "", ()):
                    resource_id = device.cdi_ids[0] if device.cdi_ids else f"{driver}/{device.pool}/{device.device}"
                    health = self.health_cache.get(driver, device.pool, device.device)
                    resources.setdefault(resource_id, {"resourceID": resource_id, "health": health})
                if resources:
                    request = ref.get("request")
                    name = f"claim:{ref.get('name', '')}" + (f"/{request}" if request else "")
                    statuses.append({"name": name, "resources": list(resources.values())})
            if statuses:
                out[str(container.get("name", ""))] = [*out.get(str(container.get("name", "")), []), *statuses]
        return out

    def watch_health(self, listener: Callable[[set[str]], None]) -> None:
        self.inner.watch_health(listener)
        self._listeners.append(listener)

    def _health_changed(self, changed: set[DeviceKey]) -> None:
        """Some drivers' devices changed health: tell the listeners which admitted pods' claims hold them."""
        with self._lock:
            claims = {
                uid
                for uid, devices in self._devices.items()
                if any((driver, d.pool, d.device) in changed for driver, d in devices)
            }
            pods = {pod for pod, held in self._pods.items() if any(p.key.uid in claims for p in held)}
        if pods:
            for listener in list(self._listeners):
                listener(pods)

    def close(self) -> None:
        """Stop watching the drivers' health."""
        self._health.stop()

    def admit(self, pod: Pod) -> ContainerEnv:
        env = self.inner.admit(pod)
        if not pod_claims(pod):
            return env
        uid = str(meta(pod).get("uid", ""))

        def with_claims(latest: Pod) -> ContainerEnv:
            try:
                return self._with_claims(latest, uid, env)
            except AdmissionError as exc:
                raise PrepareFailed(f"Failed to prepare dynamic resources: {exc.message}", with_claims) from None

        return with_claims(pod)

    def _with_claims(self, pod: Pod, uid: str, env: ContainerEnv) -> ContainerEnv:
        """`env` with the CDI edits of the claims each container names; raises AdmissionError."""
        results = self._prepare(pod, uid, pod_claims(pod))
        out = {name: dict(values) for name, values in env.items()}
        for container in pod.get("spec", {}).get("containers", []):
            ids = [
                cdi
                for ref in container.get("resources", {}).get("claims", [])
                for cdi in cdi_ids_for(results[str(ref.get("name", ""))], str(ref.get("request", "")))
            ]
            if ids:
                name = container.get("name", "")
                out[name] = {**out.get(name, {}), **cdi_env(self._cdi_dir, ids)}
        return out

    def _prepare(self, pod: Pod, uid: str, named: dict[str, str]) -> dict[str, ClaimResult]:
        namespace = str(meta(pod).get("namespace", ""))
        keys: dict[str, ClaimKey] = {}
        by_driver: dict[str, list[ClaimKey]] = defaultdict(list)
        for pod_name, claim_name in named.items():
            if not claim_name:
                raise AdmissionError(REASON, f"the ResourceClaim of {pod_name!r} has not been made yet")
            try:
                claim = self._claims.get_claim(namespace, claim_name)
            except KubeError as exc:
                raise AdmissionError(REASON, f"ResourceClaim {namespace}/{claim_name}: {exc}") from None
            key = keys[pod_name] = ClaimKey(namespace, str(claim["metadata"].get("uid", "")), claim_name)
            drivers = {
                r.get("driver", "")
                for r in claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results", [])
            }
            if not drivers:
                raise AdmissionError(REASON, f"ResourceClaim {namespace}/{claim_name} is not allocated")
            for driver in sorted(drivers):
                by_driver[driver].append(key)
        self.watcher.scan()
        for registered in list(self.watcher.plugins.values()):
            self._health.watch(registered.driver, registered.endpoint)  # as kubelet does once a driver registers
        results: dict[str, ClaimResult] = {}
        prepared: dict[str, list[tuple[str, PreparedDevice]]] = defaultdict(list)
        for driver, claims in by_driver.items():
            plugin = self.watcher.plugins.get(driver)
            if plugin is None:
                raise AdmissionError(REASON, f"DRA driver {driver} is not registered")
            with self._lock:
                held = self._pods.setdefault(uid, [])
                for key in claims:
                    if _Prepared(key, driver) not in held:
                        held.append(_Prepared(key, driver))
                        self._users[key.uid] += 1
            answers = plugin.prepare(claims)
            for key in claims:
                answer = answers.get(key.uid, ClaimResult(error="no answer"))
                if answer.error:
                    raise AdmissionError(
                        REASON, f"{driver} could not prepare {key.namespace}/{key.name}: {answer.error}"
                    )
                previous = results.get(key.uid)
                results[key.uid] = ClaimResult((*(previous.devices if previous else ()), *answer.devices))
                prepared[key.uid] += [(driver, device) for device in answer.devices]
        with self._lock:
            for claim_uid, devices in prepared.items():
                if claim_uid in self._users:  # not released meanwhile
                    self._devices[claim_uid] = tuple(devices)
        return {pod_name: results[key.uid] for pod_name, key in keys.items()}

    def release(self, pod_uid: str) -> None:
        self.inner.release(pod_uid)
        with self._lock:
            held = self._pods.pop(pod_uid, [])
            done = []
            for prepared in held:
                self._users[prepared.key.uid] -= 1
                if self._users[prepared.key.uid] <= 0:
                    del self._users[prepared.key.uid]
                    self._devices.pop(prepared.key.uid, None)
                    done.append(prepared)
        for prepared in done:
            plugin = self.watcher.plugins.get(prepared.driver)
            if plugin is None:
                continue
            error = plugin.unprepare([prepared.key]).get(prepared.key.uid, "")
            if error:
                log.warning(
                    "%s could not unprepare %s/%s: %s",
                    prepared.driver,
                    prepared.key.namespace,
                    prepared.key.name,
                    error,
                )

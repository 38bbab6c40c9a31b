"""The node runtime as a plain service: devices and health, allocations, the on/off switch, raw data.

`NodeRuntime` holds the logic behind every RPC of `runtimekit.v1` (the gRPC adapters in
`grpc_api.py` only translate messages). Guarantees:
- it never over-commits a GPU, whatever it is asked (`AllocationBook`), and refuses with a
  `ServiceError` whose code says why;
- Allocate is idempotent per (pod uid, container); Release is idempotent;
- every change of the allocations is in the checkpoint before the call returns; a corrupt
  checkpoint is reported (log + status) and rebuilt from the node's pods, never silently emptied:
  until it is rebuilt, new allocations are refused with UNAVAILABLE;
- at start and at every reconciliation the allocations are compared with the node's pods (API
  server and kubelet's PodResources): containers that hold devices without an allocation (a
  deleted checkpoint, a lost or torn journal) get one rebuilt, reported in the log, the status,
  the exporter's counters and an Event on the pod; the status is never OK while such a container
  remains unaccounted (`runtimekit.runtime.recovery`);
- Disable refuses new allocations and keeps running ones; the switch persists across restarts;
- on a GPU in dynamic MIG mode, Allocate makes the container's MIG devices (a repeat returns the same
  ones), Release destroys them, and start and reconciliation destroy any that no allocation holds
  (`MigDevices`); the devices' changes reach WatchDevices.
Thread-safe: one lock around allocation state; device health has its own (see `DeviceTable`).
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from runtimekit.api.podresources_client import ListedPod
from runtimekit.api.runtime_features import API_LEVEL, FEATURES
from runtimekit.base.rpcerrors import Code, ServiceError
from runtimekit.kube.objects import Pod, meta
from runtimekit.model import GpuUUID
from runtimekit.runtime.allocations import Allocation, AllocationBook
from runtimekit.runtime.backend import (
    DeviceInfo,
    EventKind,
    Fault,
    FaultInjector,
    GpuBackend,
    GpuLoad,
    HealthEvent,
    MigControl,
)
from runtimekit.runtime.claimusers import as_consumers
from runtimekit.runtime.devices import DeviceSnapshot, DeviceTable, DeviceView, offered
from runtimekit.runtime.isolation import Isolation, owner_name
from runtimekit.runtime.migdevices import Made, MigDevices
from runtimekit.runtime.mps import MpsDaemon, MpsState
from runtimekit.runtime.names import check_allocate, check_release
from runtimekit.runtime.overshare import OverShare
from runtimekit.runtime.pods import EventSink, PodResourcesSource, PodSource, stale_allocations
from runtimekit.runtime.rebuild import Missing
from runtimekit.runtime.recovery import Recovery
from runtimekit.runtime.state import CheckpointCorrupt, ConfigState, StateDir
from runtimekit.runtime.usage import UsageReading, UsageSource, per_gpu, remainders
from runtimekit.runtime.values import (
    AllocateInput,
    AllocateResult,
    CheckpointStatus,
    ExporterData,
    GpuData,
    RuntimeSettings,
    RuntimeStatus,
    VersionInfo,
)

log = logging.getLogger(__name__)


class NodeRuntime:
    """See the module docstring. Call `start()` once before anything else, `close()` at the end."""

    def __init__(
        self,
        settings: RuntimeSettings,
        backend: GpuBackend,
        isolation: Isolation,
        mps: MpsDaemon | None = None,
        pods: PodSource | None = None,
        kubelet: PodResourcesSource | None = None,
        injector: FaultInjector | None = None,
        clock: Callable[[], float] = time.time,
        mig: MigControl | None = None,
        events: EventSink | None = None,
        usage: UsageSource | None = None,
    ) -> None:
        self.settings = settings
        self._backend = backend
        self._isolation = isolation
        self._mps = mps
        self._pods = pods
        self._kubelet = kubelet
        self._injector = injector
        self._clock = clock
        self._events = events
        self._state = StateDir(settings.state_dir)
        self._lock = threading.RLock()
        self._config = ConfigState()
        self._recovery = Recovery(sources=pods is not None or kubelet is not None)
        self._reconciled = (0, "not yet")
        self.devices = DeviceTable(())
        self._book = AllocationBook(settings.node_name, ())
        self._infos: dict[str, DeviceInfo] = {}
        self._migs = MigDevices(mig, backend.devices)
        self._usage = usage
        self._pod_index: dict[str, Pod] = {}  # the node's pods by uid, as the API server last listed them
        self._over_share = OverShare(events, settings.node_name, clock, settings.share_event_interval_s)

    # -- life cycle ----------------------------------------------------------------------------
    def start(self) -> None:
        devices = offered(self._backend.devices(), self.settings.protocol.rules.memory_scaling)
        self._infos = {d.uuid: d for d in devices}
        self.devices = DeviceTable(devices)
        self.devices.on_health_change(self._log_health)
        self._book = AllocationBook(self.settings.node_name, devices)
        with self._lock:
            self._load_config()
            self._load_allocations()
        self.reconcile()  # compare with the node's pods before serving anything
        if self._mps is not None and self._config.enabled:
            self._mps.start()
        self._backend.start_events(self._on_event)
        log.info(
            "runtime %s on node %s: %d GPUs, backend %s, isolation %s, protocol %s, %s, %d allocations (%s)",
            self.settings.runtime_version,
            self.settings.node_name,
            len(devices),
            self._backend.name,
            self._isolation.name,
            self.settings.protocol.fingerprint,
            "enabled" if self._config.enabled else "disabled",
            len(self._book),
            self._recovery.message,
        )

    def close(self) -> None:
        self.devices.close()
        self._backend.close()
        with self._lock:
            self._state.close()

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _load_config(self) -> None:
        try:
            self._config = self._state.load_config()
        except CheckpointCorrupt as exc:
            log.error("the on/off state is unreadable, so the node stays disabled until enabled again: %s", exc)
            self._config = ConfigState(False, f"on/off state unreadable: {exc}", self._now_ms())

    def _load_allocations(self) -> None:
        self._recovery.load(self._state, self._book, self.node)
        if self._recovery.base is CheckpointStatus.UNRECOVERED and self._pods is None:
            self._recovery.note("no pod source to rebuild from: new allocations are refused")
            log.error("no pod source (API server) configured; allocations stay refused until one answers")

    def _save(self) -> None:
        self._state.save_allocations(self.node, self._book.all())

    def _refresh_devices(self) -> None:
        """After MIG devices were made or destroyed: every view of the GPUs takes their current state."""
        devices = offered(self._backend.devices(), self.settings.protocol.rules.memory_scaling)
        self._infos = {d.uuid: d for d in devices}
        self._book.update_devices(devices)
        self.devices.update_infos(devices)

    def _collect_migs(self) -> None:
        """Destroy the MIG devices of dynamic GPUs that no allocation holds. Holds the lock. Not while the
        allocations are not known to cover the node (corrupt, unverified, incomplete): they may hold any."""
        if not self._recovery.effective.trusted:
            return
        if self._migs.collect(self._book.held_migs()):
            self._refresh_devices()

    @property
    def node(self) -> str:
        return self.settings.node_name

    @property
    def backend(self) -> GpuBackend:
        return self._backend

    # -- events and health ---------------------------------------------------------------------
    def _on_event(self, event: HealthEvent) -> None:
        log.info(
            "GPU event %s on %s%s", event.kind, event.uuid or "every GPU", f" XID {event.xid}" if event.xid else ""
        )
        self.devices.apply(event)

    def _log_health(self, view: DeviceView) -> None:
        state = "healthy" if view.healthy else "UNHEALTHY"
        log.warning("GPU %d (%s) is %s: %s", view.info.index, view.info.uuid, state, view.reason)

    def device_snapshot(self) -> DeviceSnapshot:
        return self.devices.snapshot()

    def set_device_health(self, uuid: str, healthy: bool, reason: str, source: str) -> DeviceView:
        if not uuid:
            raise ServiceError(Code.INVALID_ARGUMENT, "SetDeviceHealth needs a GPU UUID")
        text = (reason or ("healthy" if healthy else "unhealthy")) + (f" (by {source})" if source else "")
        try:
            return self.devices.set_health(uuid, healthy, text)
        except KeyError:
            raise ServiceError(Code.NOT_FOUND, f"this node has no GPU {uuid!r}") from None

    def inject_fault(self, fault: Fault) -> DeviceView:
        if self._injector is None:
            raise ServiceError(
                Code.FAILED_PRECONDITION,
                f"fault injection needs the simulated backend; this runtime runs {self._backend.name}",
            )
        try:
            event = self._injector.inject(fault)
        except ValueError as exc:
            raise ServiceError(Code.INVALID_ARGUMENT, str(exc)) from None
        view = self.devices.get(event.uuid or "")
        if view is None:  # cannot happen: the injector only reports this node's GPUs
            raise ServiceError(Code.NOT_FOUND, f"no GPU {event.uuid}")
        return view

    # -- version -------------------------------------------------------------------------------
    def version(self) -> VersionInfo:
        features = tuple(f for f in FEATURES if f != "fault-injection" or self._injector is not None)
        return VersionInfo(
            self.settings.runtime_version,
            API_LEVEL,
            features,
            self._backend.name,
            self._isolation.name,
            self.node,
            self.settings.protocol.fingerprint,
        )

    # -- allocations ---------------------------------------------------------------------------
    def allocate(self, request: AllocateInput) -> AllocateResult:
        pod = request.pod
        if not (pod.uid and pod.name and pod.namespace and request.container):
            raise ServiceError(
                Code.INVALID_ARGUMENT, "Allocate needs the pod's namespace, name and uid and a container"
            )
        check_allocate(request)
        try:
            return self._allocate(request)
        except ServiceError as exc:
            # The scheduler books a deleted pod's GPU as soon as the pod is gone from the API server,
            # which can be before this runtime's next reconcile: release what has ended, judged by lists
            # asked for now (as kubelet frees a terminated pod's devices at admission), then try once more.
            if exc.code is not Code.RESOURCE_EXHAUSTED or not self.reconcile(prompt=True):
                raise
        return self._allocate(request)

    def _allocate(self, request: AllocateInput) -> AllocateResult:
        pod = request.pod
        with self._lock:
            refusal = self._recovery.refusal()
            if refusal:
                raise ServiceError(Code.UNAVAILABLE, refusal)
            grants = self._book.grants_for(request.shares)
            owner = owner_name(pod.uid, request.container)
            self._make_folders(self._isolation.host_folders(grants, owner))
            names = (request.resource_name,) if request.resource_name else ()
            wanted = Allocation(pod, request.container, grants, self._now_ms(), request.device_ids, names)
            held = self._book.get(pod.uid, request.container)
            if held is not None:  # a repeat only adds device IDs and resource names: not worth an fsync
                allocation, _ = self._book.book(wanted)  # different shares: FAILED_PRECONDITION
            else:
                allocation = self._allocate_new(wanted)
            infos = self._infos
        edits = self._isolation.edits(allocation.grants, infos, owner)
        if held is None:
            log.info("allocated %s to %s/%s", _describe(allocation), pod, request.container)
        return AllocateResult(allocation, edits)

    def _allocate_new(self, wanted: Allocation) -> Allocation:
        """Admit, make the dynamic MIG devices, book and checkpoint a new allocation: all or nothing."""
        self._admit(wanted)
        grants, made = self._migs.materialise(wanted.grants, self._book.mig_holder)
        try:
            allocation, _ = self._book.book(replace(wanted, grants=grants))
            self._persist(allocation)
        except ServiceError:
            self._undo_migs(made)
            raise
        if made:
            self._refresh_devices()
        return allocation

    def _undo_migs(self, made: list[Made]) -> None:
        if made:
            self._migs.undo(made)
            self._refresh_devices()

    def _admit(self, wanted: Allocation) -> None:
        """Refusals that apply to new allocations only (a repeated one is always answered)."""
        if not self._config.enabled:
            raise ServiceError(
                Code.FAILED_PRECONDITION,
                f"the runtime on node {self.node} is disabled ({self._config.reason or 'no reason given'}): "
                "new GPU allocations are refused; running containers keep theirs",
            )
        for grant in wanted.grants:
            view = self.devices.get(grant.gpu_uuid)
            if view is not None and not view.healthy:
                raise ServiceError(Code.FAILED_PRECONDITION, f"GPU {grant.gpu_uuid} is unhealthy: {view.reason}")

    def _persist(self, allocation: Allocation) -> None:
        """Checkpoint a new allocation; if that fails it is given back, so memory never runs ahead of disk."""
        try:
            self._save()
        except OSError as exc:
            self._book.release(allocation.pod.uid, allocation.container)
            raise ServiceError(Code.UNAVAILABLE, f"cannot write the checkpoint: {exc}") from None

    def release(self, uid: str, container: str = "") -> list[Allocation]:
        if not uid:
            raise ServiceError(Code.INVALID_ARGUMENT, "Release needs the pod's uid")
        check_release(container)
        with self._lock:
            released = self._book.release(uid, container)
            if released:
                self._save()
                self._after_release(released)
        for allocation in released:
            log.info("released %s of %s/%s", _describe(allocation), allocation.pod, allocation.container)
        return released

    @staticmethod
    def _make_folders(folders: Sequence[str]) -> None:
        """Make the host folders a container's edits mount (HAMi-core's per-container folder), open to
        whatever user the container runs as, as HAMi's device plugin makes them."""
        for folder in folders:
            try:
                Path(folder).mkdir(parents=True, exist_ok=True)
                os.chmod(folder, 0o777)  # the container's user, unknown here, writes its region there
            except OSError as exc:
                raise ServiceError(Code.UNAVAILABLE, f"cannot make the container's folder {folder}: {exc}") from None

    def _after_release(self, released: Sequence[Allocation]) -> None:
        """Once the checkpoint has forgotten released allocations: remove the host folders their edits
        mounted, and destroy their dynamic MIG devices (a crash in between leaves a device no allocation
        holds, which `_collect_migs` destroys)."""
        for a in released:
            for folder in self._isolation.host_folders(a.grants, owner_name(a.pod.uid, a.container)):
                shutil.rmtree(folder, ignore_errors=True)
        dynamic = [g for a in released for g in a.grants if g.mig_dynamic]
        if dynamic:
            self._migs.destroy(dynamic)
            self._refresh_devices()

    def allocations(self) -> list[Allocation]:
        with self._lock:
            return self._book.all()

    # -- exporter data -------------------------------------------------------------------------
    def exporter_data(self) -> ExporterData:
        with self._lock:
            allocations = tuple(self._book.all())
            used = self._book.used()
            pods = self._pod_index
        # a claim prepared by the DRA plugin is booked under the claim; its users are the pod's containers
        users = as_consumers(allocations, pods, shared=True)
        containers = self._usage.containers(users, pods) if self._usage is not None else []
        using = per_gpu(containers)
        load = {
            GpuUUID(u): GpuLoad(core, mem, *using.get(u, (0.0, 0))) if self._usage is not None else GpuLoad(core, mem)
            for u, (core, mem) in used.items()
        }
        samples = self._backend.sample(load)
        gpus = []
        for sample in samples:
            view = self.devices.get(sample.uuid)
            if view is None:
                continue
            if sample.lost and view.healthy:
                self.devices.apply(HealthEvent(EventKind.LOST, sample.uuid, self._now_ms(), detail="cannot be read"))
                view = self.devices.get(sample.uuid) or view
            xids, count = self.devices.xids(sample.uuid)
            gpus.append(GpuData(view, sample, xids, count))
        with self._lock:
            state = self._recovery.state()
        usage = UsageReading()
        if self._usage is not None:
            readings = {g.sample.uuid: (g.sample.memory_used_mib, g.sample.utilization_percent) for g in gpus}
            rest = remainders({u: r for u, r in readings.items() if not self._lost(gpus, u)}, containers)
            usage = UsageReading(tuple(containers), tuple(rest), self._usage.name)
            self._over_share.observe(containers)
        held = tuple(as_consumers(allocations, pods, shared=False))
        return ExporterData(self.node, self._now_ms(), tuple(gpus), held, state, usage)

    @staticmethod
    def _lost(gpus: Sequence[GpuData], uuid: str) -> bool:
        return any(g.sample.lost for g in gpus if g.sample.uuid == uuid)

    # -- the switch ----------------------------------------------------------------------------
    def enable(self, reason: str) -> RuntimeStatus:
        return self._switch(True, reason)

    def disable(self, reason: str) -> RuntimeStatus:
        return self._switch(False, reason)

    def _switch(self, enabled: bool, reason: str) -> RuntimeStatus:
        with self._lock:
            self._config = ConfigState(enabled, reason, self._now_ms())
            try:
                self._state.save_config(self._config)
            except OSError as exc:
                raise ServiceError(Code.UNAVAILABLE, f"cannot write the on/off state: {exc}") from None
            log.warning("runtime %s: %s", "enabled" if enabled else "disabled", reason or "no reason given")
            if self._mps is not None and enabled:
                self._mps.start()
            elif self._mps is not None:
                self._mps.stop()
        return self.status()

    def status(self) -> RuntimeStatus:
        with self._lock:
            return RuntimeStatus(
                enabled=self._config.enabled,
                reason=self._config.reason,
                changed_unix_ms=self._config.changed_unix_ms,
                isolation=self._isolation.name,
                mps_state=self._mps.state if self._mps is not None else MpsState.NOT_USED,
                mps_message=self._mps.message if self._mps is not None else "",
                checkpoint=self._recovery.effective,
                checkpoint_message=self._recovery.message,
                allocation_count=len(self._book),
                version=self.version(),
                last_reconcile_unix_ms=self._reconciled[0],
                last_reconcile_message=self._reconciled[1],
                state=self._recovery.state(),
            )

    # -- reconciliation ------------------------------------------------------------------------
    def reconcile(self, prompt: bool = False) -> list[tuple[Allocation, str]]:
        """Compare the allocations with the node's pods: release those of pods that are gone, rebuild those
        running containers hold without one, retry a pending rebuild of a corrupt checkpoint. Returns
        what it released. `prompt`: an allocation made before the lists were asked for is released on
        their word at once, without the grace period (an Allocate would otherwise over-commit)."""
        with self._lock:  # what exists before the lists are asked for is judged by them
            settled = {a.key for a in self._book.all()} if prompt else None
        api_pods, listing, notes = self._ask_sources()
        rebuilt: list[Missing] = []
        with self._lock:
            if self._recovery.base is CheckpointStatus.UNRECOVERED and api_pods is not None:
                self._recovery.rebuild_corrupt(
                    api_pods, self._book, self._state, self.node, self.settings.protocol, self._now_ms()
                )
                self._save()
            if api_pods is not None:
                self._pod_index = {str(meta(p).get("uid") or ""): p for p in api_pods}
            kubelet_pods = {p.key for p in listing} if listing is not None else None
            grace_ms = int(self.settings.reconcile_grace_s * 1000)
            stale = stale_allocations(self._book.all(), api_pods, kubelet_pods, self._now_ms(), grace_ms, settled)
            for allocation, _why in stale:
                self._book.release(allocation.pod.uid, allocation.container)
            if self._recovery.base is not CheckpointStatus.UNRECOVERED and (api_pods, listing) != (None, None):
                devices = list(self._infos.values())
                rebuilt = self._recovery.rebuild_missing(
                    self._book, api_pods, listing, devices, self.node, self.settings.protocol, self._now_ms()
                )
            if stale or rebuilt or self._state.torn_bytes:
                self._save()
                self._state.torn_bytes = 0  # the rewrite left the torn line behind
                self._after_release([a for a, _ in stale])
            self._collect_migs()
            message = f"released {len(stale)}" + (f", rebuilt {len(rebuilt)}" if rebuilt else "")
            self._reconciled = (self._now_ms(), message + (f"; could not ask {', '.join(notes)}" if notes else ""))
        for allocation, why in stale:
            log.info("released %s of %s/%s: %s", _describe(allocation), allocation.pod, allocation.container, why)
        self._report_rebuilt(rebuilt)
        return stale

    def _ask_sources(self) -> tuple[Sequence[Pod] | None, Sequence[ListedPod] | None, list[str]]:
        """The API server's pods of this node and kubelet's listing (None for one not configured or not
        answering), and what could not be asked."""
        notes: list[str] = []
        api_pods = listing = None
        if self._pods is not None:
            try:
                api_pods = self._pods.list_node_pods(self.node)
            except Exception as exc:
                notes.append(f"API server: {exc}")
        if self._kubelet is not None:
            try:
                listing = self._kubelet.list()
            except Exception as exc:
                notes.append(f"PodResources: {exc}")
        return api_pods, listing, notes

    def _report_rebuilt(self, rebuilt: Sequence[Missing]) -> None:
        """A log line and an Event on the pod for each allocation rebuilt."""
        for item in rebuilt:
            a = item.allocation
            message = (
                f"the node runtime on {self.node} had no record of the GPUs of container {a.container} (its "
                f"checkpoint: {self._recovery.message or 'missing'}); rebuilt from {item.source}: {_describe(a)}"
            )
            log.warning("rebuilt the allocation of %s/%s from %s: %s", a.pod, a.container, item.source, _describe(a))
            if self._events is not None:
                self._events.record_pod_event(
                    a.pod.namespace, a.pod.name, a.pod.uid, "Warning", "GPUAllocationRebuilt", message
                )


def _describe(allocation: Allocation) -> str:
    return ", ".join(f"{g.uuid} ({g.core_milli} milli, {g.memory_mib} MiB)" for g in allocation.grants)

"""The kubelet side of the device plugin API v1beta1, for the embedded cluster's simulated kubelets.

`DeviceManager` behaves as kubelet's device manager does (protocols.md §1.5-1.6):
- serves `Registration` on `<plugin-dir>/kubelet.sock`; on Register it checks the version and the
  resource name, dials the plugin back, calls GetDevicePluginOptions and starts ListAndWatch; a new
  registration of the same resource replaces the old one;
- keeps, per resource, the healthy and unhealthy device IDs of the latest ListAndWatch answer; when
  the stream ends every device of the resource turns unhealthy;
- at admission (`admit_pod`), per container (spec order) and resource a plugin serves (others are
  not the device manager's, as kubelet's isDevicePluginResource has it): takes free healthy IDs,
  asks GetPreferredAllocation when the plugin offers it and there are more candidates than needed,
  calls Allocate, records the IDs and checkpoints them (`kubelet_internal_checkpoint`); failures raise
  `AdmissionError` with kubelet's wording (`Allocate failed due to …, which is unexpected`); the pod
  is `pending_admission()` meanwhile (kubelet's `setPodPendingAdmission`), and a container's devices
  of a resource are recorded only once that resource's Allocate has returned, as in kubelet, so a
  PodResources listing taken during an Allocate shows the pod without them;
- `restart()` simulates a kubelet restart: plugins are dropped, every socket in the folder is
  removed (not the checkpoint, not folders), a new `kubelet.sock` is served, allocations come back
  from the checkpoint;
- the health of the devices a pod holds (`container_health`), for kubelet's `allocatedResourcesStatus`
  (KEP-4680, beta and on by default since 1.36): per container and resource, each held ID's health in
  the latest answer (`Healthy` for an ID no longer listed, as kubelet has it); when a ListAndWatch answer
  (or the end of the stream) changes the health of held devices, the `on_health` listeners get the
  UIDs of the pods holding them (kubelet's resource-update channel).
It must not import the device plugin or the runtime; both sides share only `runtimekit.api`.
Thread-safe; `wait_for(predicate)` lets tests await a state without sleeping.
"""

from __future__ import annotations

import json
import logging
import stat
import threading
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from runtimekit.api import kubelet
from runtimekit.api.v1beta1 import deviceplugin_pb2 as dp
from runtimekit.api.v1beta1 import deviceplugin_pb2_grpc as dp_grpc
from runtimekit.kube.objects import Container, Pod, meta
from runtimekit.kube.semantics.quantity import whole_number
from runtimekit.protocol.names import check_extended_resource_name

log = logging.getLogger(__name__)


class AdmissionError(Exception):
    """A pod cannot be admitted; the message is what kubelet would put on the pod."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class PodIdentity:
    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class ContainerDevices:
    pod: PodIdentity
    container: str
    resource: str
    device_ids: tuple[str, ...]


@dataclass
class ContainerOptions:
    """What kubelet hands the container runtime, merged over a container's resources as kubelet does."""

    envs: dict[str, str] = field(default_factory=dict)
    mounts: dict[str, dp.Mount] = field(default_factory=dict)
    devices: dict[str, dp.DeviceSpec] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    cdi_devices: list[str] = field(default_factory=list)

    def merge(self, response: dp.ContainerAllocateResponse) -> None:
        for key, value in response.envs.items():
            self.envs.setdefault(key, value)
        for mount in response.mounts:
            self.mounts.setdefault(mount.container_path, mount)
        for device in response.devices:
            self.devices.setdefault(device.container_path, device)
        for key, value in response.annotations.items():
            self.annotations.setdefault(key, value)
        for cdi in response.cdi_devices:
            if cdi.name not in self.cdi_devices:
                self.cdi_devices.append(cdi.name)


class _Endpoint:
    """A registered plugin: its client, options and the devices of its latest ListAndWatch answer."""

    def __init__(self, resource: str, socket: Path, options: dp.DevicePluginOptions) -> None:
        self.resource = resource
        self.socket = socket
        self.options = options
        self.channel = grpc.insecure_channel(kubelet.unix_target(str(socket)))
        self.stub = dp_grpc.DevicePluginStub(self.channel)
        self.devices: dict[str, str] = {}  # ID -> Healthy | Unhealthy
        self.updates = 0
        self.call: Any = None
        self.connected = False

    def close(self) -> None:
        if self.call is not None:
            self.call.cancel()
        self.channel.close()


class _Registration(dp_grpc.RegistrationServicer):
    def __init__(self, manager: DeviceManager) -> None:
        self._manager = manager

    def Register(self, request: dp.RegisterRequest, context: grpc.ServicerContext) -> dp.Empty:
        problem = self._manager.register(request)
        if problem:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, problem)
        return dp.Empty()


def _health(devices: dict[str, str], device_id: str) -> str:
    return kubelet.UNHEALTHY if devices.get(device_id, kubelet.HEALTHY) != kubelet.HEALTHY else kubelet.HEALTHY


def _resource_amounts(container: Container) -> dict[str, int]:
    resources = container.get("resources") or {}
    amounts = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
    out = {}
    for name, value in amounts.items():
        if "/" in str(name) and "kubernetes.io/" not in str(name):
            try:
                count = whole_number(value)  # a quantity, as the API server writes it: 3000 reads back as 3k
            except ValueError:
                raise AdmissionError("UnexpectedAdmissionError", f"{name}: {value!r} is not a whole number") from None
            if count > 0:
                out[str(name)] = count
    return out


class DeviceManager:
    """See the module docstring."""

    def __init__(self, plugin_dir: Path, dial_timeout_s: float = 10.0, rpc_timeout_s: float = 10.0) -> None:
        self.plugin_dir = plugin_dir
        self.socket = plugin_dir / kubelet.KUBELET_SOCKET_NAME
        self.checkpoint_path = plugin_dir / kubelet.CHECKPOINT_NAME
        self._dial_timeout = dial_timeout_s
        self._rpc_timeout = rpc_timeout_s
        self._cond = threading.Condition()
        self._endpoints: dict[str, _Endpoint] = {}
        self._allocated: dict[tuple[str, str, str], ContainerDevices] = {}  # (uid, container, resource)
        self._server: grpc.Server | None = None
        self._admit_lock = threading.Lock()
        self._pending: tuple[PodIdentity, tuple[str, ...]] | None = None
        self.registrations: list[str] = []  # resource names, in order of successful Register calls
        self.on_health: list[Callable[[set[str]], None]] = []  # pod UIDs whose held devices changed health

    # -- life cycle ----------------------------------------------------------------------------
    def start(self) -> DeviceManager:
        self.plugin_dir.mkdir(parents=True, exist_ok=True)
        self._cleanup_sockets()
        self._load_checkpoint()
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="kubelet-registration"))
        dp_grpc.add_RegistrationServicer_to_server(_Registration(self), server)
        if server.add_insecure_port(kubelet.unix_target(str(self.socket))) == 0:
            raise OSError(f"cannot listen on {self.socket}")
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(0).wait()
            self._server = None
        with self._cond:
            endpoints, self._endpoints = list(self._endpoints.values()), {}
            self._cond.notify_all()
        for endpoint in endpoints:
            endpoint.close()

    def restart(self) -> None:
        """A kubelet restart: drop every plugin, remove the sockets, serve a new kubelet.sock."""
        self.stop()
        with self._cond:
            self._allocated.clear()
        self.start()

    def _cleanup_sockets(self) -> None:
        for path in self.plugin_dir.iterdir():
            try:
                if stat.S_ISSOCK(path.lstat().st_mode):
                    path.unlink()
            except FileNotFoundError:
                continue

    # -- registration and device lists ---------------------------------------------------------
    def register(self, request: dp.RegisterRequest) -> str | None:
        """Handle a Register call; returns why it is refused, or None."""
        if request.version not in kubelet.SUPPORTED_VERSIONS:
            return f"unsupported device plugin API version {request.version!r}"
        problem = check_extended_resource_name(request.resource_name)
        if problem:
            return f"invalid resource name {request.resource_name!r}: {problem}"
        endpoint_path = self.plugin_dir / request.endpoint
        try:
            options = self._dial(endpoint_path)
        except grpc.RpcError as exc:
            return f"cannot reach the plugin at {endpoint_path}: {exc}"
        endpoint = _Endpoint(request.resource_name, endpoint_path, options)
        with self._cond:
            old = self._endpoints.get(request.resource_name)
            self._endpoints[request.resource_name] = endpoint
            self.registrations.append(request.resource_name)
            self._cond.notify_all()
        if old is not None:
            old.close()
        threading.Thread(target=self._list_and_watch, args=(endpoint,), name="kubelet-law", daemon=True).start()
        log.info("registered device plugin %s at %s", request.resource_name, endpoint_path)
        return None

    def _dial(self, socket: Path) -> dp.DevicePluginOptions:
        with grpc.insecure_channel(kubelet.unix_target(str(socket))) as channel:
            stub = dp_grpc.DevicePluginStub(channel)
            options: dp.DevicePluginOptions = stub.GetDevicePluginOptions(
                dp.Empty(), timeout=self._dial_timeout, wait_for_ready=True
            )
        return options

    def _list_and_watch(self, endpoint: _Endpoint) -> None:
        try:
            endpoint.call = endpoint.stub.ListAndWatch(dp.Empty())
            for reply in endpoint.call:
                self._set_devices(endpoint, {d.ID: d.health for d in reply.devices}, connected=True)
        except grpc.RpcError as exc:
            log.info(
                "ListAndWatch of %s ended: %s", endpoint.resource, exc.code() if isinstance(exc, grpc.Call) else exc
            )
        self._set_devices(endpoint, dict.fromkeys(endpoint.devices, kubelet.UNHEALTHY), connected=False)

    def _set_devices(self, endpoint: _Endpoint, devices: dict[str, str], connected: bool) -> None:
        """Take a device list; tell the health listeners which pods hold devices whose health changed."""
        with self._cond:
            before = endpoint.devices
            endpoint.devices = devices
            endpoint.connected = connected
            if connected:
                endpoint.updates += 1
            changed = {i for i in devices.keys() | before.keys() if _health(devices, i) != _health(before, i)}
            pods = {
                held.pod.uid
                for held in self._allocated.values()
                if held.resource == endpoint.resource and changed.intersection(held.device_ids)
            }
            self._cond.notify_all()
        if pods:
            for listener in list(self.on_health):
                try:
                    listener(pods)
                except Exception:  # one listener's failure must not stop the stream
                    log.exception("device health listener")

    def wait_for(self, predicate: Callable[[DeviceManager], bool], timeout_s: float = 30.0) -> bool:
        """Wait until `predicate(self)` holds (checked after every change); False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self), timeout_s)

    def resources(self) -> list[str]:
        with self._cond:
            return sorted(self._endpoints)

    def devices(self, resource: str) -> dict[str, str]:
        """Device ID -> health of a registered resource (empty when not registered)."""
        with self._cond:
            endpoint = self._endpoints.get(resource)
            return dict(endpoint.devices) if endpoint else {}

    def updates(self, resource: str) -> int:
        """How many ListAndWatch answers the current registration of `resource` has sent."""
        with self._cond:
            endpoint = self._endpoints.get(resource)
            return endpoint.updates if endpoint else 0

    def capacity(self) -> dict[str, int]:
        with self._cond:
            return {r: len(e.devices) for r, e in self._endpoints.items()}

    def allocatable(self) -> dict[str, int]:
        with self._cond:
            return {r: sum(1 for h in e.devices.values() if h == kubelet.HEALTHY) for r, e in self._endpoints.items()}

    def allocations(self) -> list[ContainerDevices]:
        with self._cond:
            return list(self._allocated.values())

    def container_health(self, pod_uid: str) -> dict[str, dict[str, dict[str, str]]]:
        """Container -> resource -> held device ID -> `Healthy` or `Unhealthy` (kubelet's
        UpdateAllocatedResourcesStatus: an ID the plugin no longer lists counts as healthy)."""
        out: dict[str, dict[str, dict[str, str]]] = {}
        with self._cond:
            for held in self._allocated.values():
                if held.pod.uid != pod_uid:
                    continue
                endpoint = self._endpoints.get(held.resource)
                listed = endpoint.devices if endpoint is not None else {}
                out.setdefault(held.container, {})[held.resource] = {i: _health(listed, i) for i in held.device_ids}
        return out

    # -- admission -----------------------------------------------------------------------------
    def admit_pod(self, pod: Pod) -> dict[str, ContainerOptions]:
        """Allocate the devices of every container of a pod manifest, in container order.

        Returns the container options per container. Raises AdmissionError; devices of a pod that
        fails admission are freed again.
        """
        pod_meta = meta(pod)
        identity = PodIdentity(
            str(pod_meta.get("namespace", "default")), str(pod_meta.get("name", "")), str(pod_meta.get("uid", ""))
        )
        spec = pod.get("spec") or {}
        out: dict[str, ContainerOptions] = {}
        names = tuple(str(c.get("name", "")) for c in spec.get("containers") or [])
        with self._admit_lock:
            with self._cond:
                self._pending = (identity, names)
            try:
                for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
                    name = str(container.get("name", ""))
                    options = out.setdefault(name, ContainerOptions())
                    for resource, count in sorted(_resource_amounts(container).items()):
                        if not self._is_plugin_resource(resource):
                            continue  # kubelet's isDevicePluginResource: no plugin's, nothing to allocate
                        options.merge(self._allocate_container(identity, name, resource, count))
            except AdmissionError:
                self.remove_pod(identity.uid)
                raise
            finally:
                with self._cond:
                    self._pending = None
        return out

    def _is_plugin_resource(self, resource: str) -> bool:
        """Whether a device plugin serves (or served, and devices of it are still held) `resource`."""
        with self._cond:
            return resource in self._endpoints or any(r == resource for (_, _, r) in self._allocated)

    def pending_admission(self) -> tuple[PodIdentity, tuple[str, ...]] | None:
        """The pod being admitted now, with its container names (None between admissions)."""
        with self._cond:
            return self._pending

    def _allocate_container(
        self, pod: PodIdentity, container: str, resource: str, count: int
    ) -> dp.ContainerAllocateResponse:
        with self._cond:
            endpoint = self._endpoints.get(resource)
            held = {i for (_, _, r), a in self._allocated.items() if r == resource for i in a.device_ids}
            healthy = [] if endpoint is None else [i for i, h in endpoint.devices.items() if h == kubelet.HEALTHY]
        if endpoint is None:
            raise AdmissionError(
                f"OutOf{resource}",
                f"Node didn't have enough resource: {resource}, requested: {count}, used: 0, capacity: 0",
            )
        available = sorted(i for i in healthy if i not in held)
        if count > len(available):
            raise AdmissionError(
                "UnexpectedAdmissionError",
                f"requested number of devices unavailable for {resource}. Requested: {count}, "
                f"Available: {len(available)}",
            )
        chosen = self._choose(endpoint, available, count)
        try:
            reply: dp.AllocateResponse = endpoint.stub.Allocate(
                dp.AllocateRequest(container_requests=[dp.ContainerAllocateRequest(devices_ids=chosen)]),
                timeout=self._rpc_timeout,
            )
        except grpc.RpcError as exc:
            code = exc.code().name if isinstance(exc, grpc.Call) else "Unknown"
            details = exc.details() if isinstance(exc, grpc.Call) else str(exc)
            raise AdmissionError(
                "UnexpectedAdmissionError",
                f"Allocate failed due to rpc error: code = {code} desc = {details}, which is unexpected",
            ) from None
        if not reply.container_responses:
            raise AdmissionError("UnexpectedAdmissionError", f"Allocate of {resource} returned no container response")
        with self._cond:
            self._allocated[(pod.uid, container, resource)] = ContainerDevices(pod, container, resource, tuple(chosen))
            self._save_checkpoint()
            self._cond.notify_all()
        return reply.container_responses[0]

    def _choose(self, endpoint: _Endpoint, available: list[str], count: int) -> list[str]:
        if count == len(available) or not endpoint.options.get_preferred_allocation_available:
            return available[:count]
        request = dp.PreferredAllocationRequest(
            container_requests=[
                dp.ContainerPreferredAllocationRequest(available_deviceIDs=available, allocation_size=count)
            ]
        )
        try:
            reply: dp.PreferredAllocationResponse = endpoint.stub.GetPreferredAllocation(
                request, timeout=self._rpc_timeout
            )
            preferred = list(reply.container_responses[0].deviceIDs) if reply.container_responses else []
        except grpc.RpcError as exc:
            log.warning("GetPreferredAllocation of %s failed, choosing myself: %s", endpoint.resource, exc)
            preferred = []
        allowed = set(available)
        chosen = list(dict.fromkeys(i for i in preferred if i in allowed))[:count]
        chosen += [i for i in available if i not in chosen][: count - len(chosen)]
        return chosen

    def start_containers(self, pod_uid: str) -> None:
        """PreStartContainer for every device a pod holds, where the plugin asked for it."""
        for held in [a for a in self.allocations() if a.pod.uid == pod_uid]:
            with self._cond:
                endpoint = self._endpoints.get(held.resource)
            if endpoint is not None and endpoint.options.pre_start_required:
                endpoint.stub.PreStartContainer(
                    dp.PreStartContainerRequest(devices_ids=list(held.device_ids)), timeout=kubelet.PRE_START_TIMEOUT_S
                )

    def remove_pod(self, pod_uid: str) -> None:
        """Free the devices of a pod that finished or was deleted."""
        with self._cond:
            for key in [k for k in self._allocated if k[0] == pod_uid]:
                del self._allocated[key]
            self._save_checkpoint()
            self._cond.notify_all()

    # -- checkpoint ----------------------------------------------------------------------------
    def _save_checkpoint(self) -> None:
        entries = [
            {
                "podUID": a.pod.uid,
                "namespace": a.pod.namespace,
                "name": a.pod.name,
                "container": a.container,
                "resource": a.resource,
                "deviceIDs": list(a.device_ids),
            }
            for a in self._allocated.values()
        ]
        tmp = self.checkpoint_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"data": {"podDeviceEntries": entries}}, indent=1))
        tmp.replace(self.checkpoint_path)

    def _load_checkpoint(self) -> None:
        try:
            data = json.loads(self.checkpoint_path.read_text())
        except FileNotFoundError:
            return
        except json.JSONDecodeError as exc:
            log.error("kubelet checkpoint %s unreadable, starting empty: %s", self.checkpoint_path, exc)
            return
        with self._cond:
            for e in data.get("data", {}).get("podDeviceEntries", []):
                pod = PodIdentity(e["namespace"], e["name"], e["podUID"])
                held = ContainerDevices(pod, e["container"], e["resource"], tuple(e["deviceIDs"]))
                self._allocated[(pod.uid, held.container, held.resource)] = held

    def pods(self) -> list[tuple[PodIdentity, dict[str, list[tuple[str, tuple[str, ...]]]]]]:
        """Pods holding devices: per container, (resource, device IDs) pairs (PodResources' view)."""
        grouped: dict[PodIdentity, dict[str, list[tuple[str, tuple[str, ...]]]]] = {}
        for held in self.allocations():
            grouped.setdefault(held.pod, {}).setdefault(held.container, []).append((held.resource, held.device_ids))
        return sorted(grouped.items(), key=lambda item: (item[0].namespace, item[0].name))

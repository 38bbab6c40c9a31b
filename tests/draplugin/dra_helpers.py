"""Helpers for the DRA plugin tests: a simulated runtime on a socket, claims in memory, allocated claims."""

from __future__ import annotations

import copy
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.cluster.kubelet.draplugins import DraPluginWatcher
from runtimekit.draplugin.cdi import CdiWriter
from runtimekit.draplugin.checkpoint import Checkpoint
from runtimekit.draplugin.manager import Devices
from runtimekit.draplugin.names import KIT_NAMES
from runtimekit.draplugin.server import PluginServer
from runtimekit.draplugin.service import DraService
from runtimekit.kube.errors import NotFoundError
from runtimekit.kube.objects.dra import ResourceClaim
from runtimekit.model import MigMode
from runtimekit.protocol import KitProtocol
from runtimekit.runtime.daemon import RuntimeDaemon
from runtimekit.runtime.isolation import make_isolation
from runtimekit.runtime.service import NodeRuntime
from runtimekit.runtime.simulated import SimulatedBackend, parse_gpu_spec
from runtimekit.runtime.values import RuntimeSettings

NODE = "node-a"
DRIVER = KIT_NAMES.driver
PROTOCOL = KitProtocol.default()


class FakeClaims:
    """ResourceClaims in memory, counting reads (a prepared claim must not be read again)."""

    def __init__(self) -> None:
        self.claims: dict[tuple[str, str], ResourceClaim] = {}
        self.reads = 0

    def add(self, claim: ResourceClaim) -> ResourceClaim:
        meta = claim["metadata"]
        self.claims[(meta.get("namespace", ""), meta.get("name", ""))] = copy.deepcopy(claim)
        return claim

    def get_claim(self, namespace: str, name: str) -> ResourceClaim:
        self.reads += 1
        try:
            return copy.deepcopy(self.claims[(namespace, name)])
        except KeyError:
            raise NotFoundError(f'resourceclaims "{name}" not found') from None


def claim(
    name: str,
    uid: str,
    results: Sequence[Mapping[str, Any]],
    config: Sequence[Mapping[str, Any]] = (),
    namespace: str = "default",
) -> ResourceClaim:
    """An allocated claim: results are (request, device[, consumedCapacity]) on this node's pool."""
    filled = [{"driver": DRIVER, "pool": NODE, **r} for r in results]
    body: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "spec": {"devices": {"requests": [{"name": r["request"]} for r in results]}},
        "status": {"allocation": {"devices": {"results": filled, "config": list(config)}}},
    }
    return cast(ResourceClaim, body)


@dataclass
class DraStack:
    dir: Path
    daemon: RuntimeDaemon
    client: RuntimeClient
    claims: FakeClaims
    devices: Devices
    service: DraService
    server: PluginServer | None = None
    watcher: DraPluginWatcher | None = None
    closers: list[Any] = field(default_factory=list)

    @property
    def cdi_dir(self) -> Path:
        return self.dir / "cdi"

    def new_service(self) -> DraService:
        """The plugin as it comes back after a restart: its checkpoint read from the same file."""
        return _service(self.dir, self.client, self.claims, self.devices)

    def serve(self, services: tuple[str, ...] | None = None, health: bool = False) -> DraPluginWatcher:
        """Serve the plugin's sockets (with `health`, the health stream too) and register it with a
        simulated kubelet's watcher."""
        devices = self.devices if health else None
        self.server = PluginServer(self.service, self.dir / "plugins", self.dir / "registry", devices)
        self.server.start()
        self.closers.append(self.server.stop)
        watcher = (
            DraPluginWatcher(self.dir / "registry", services) if services else DraPluginWatcher(self.dir / "registry")
        )
        self.closers.append(watcher.close)
        watcher.scan()
        self.watcher = watcher
        return watcher

    def close(self) -> None:
        for close in reversed(self.closers):
            close()
        self.client.close()
        self.daemon.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def make_stack(
    gpus: str = "2xH200",
    isolation: str = "mps",
    mig_layouts: Mapping[int, Sequence[str]] | None = None,
    mig_modes: Mapping[int, MigMode] | None = None,
) -> DraStack:
    root = Path(tempfile.mkdtemp(prefix="dra-"))
    backend = SimulatedBackend(NODE, parse_gpu_spec(gpus), mig_layouts=mig_layouts, mig_modes=mig_modes)
    runtime = NodeRuntime(
        RuntimeSettings(NODE, root / "rt-state", PROTOCOL, "0.1.0"),
        backend,
        make_isolation(isolation),
        injector=backend,
        mig=backend,
    )
    daemon = RuntimeDaemon(runtime, str(root / "rt.sock"), reconcile_interval_s=0).start()
    client = RuntimeClient(str(root / "rt.sock"))
    devices = Devices()
    devices.update(client.list_devices())
    claims = FakeClaims()
    return DraStack(root, daemon, client, claims, devices, _service(root, client, claims, devices))


def _service(root: Path, client: RuntimeClient, claims: FakeClaims, devices: Devices) -> DraService:
    return DraService(
        DRIVER,
        NODE,
        client,
        claims,
        devices,
        CdiWriter(root / "cdi", KIT_NAMES.cdi_kind),
        Checkpoint(root / "state" / "prepared-claims.json"),
    )

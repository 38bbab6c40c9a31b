"""Fixtures for the runtime: a NodeRuntime on simulated GPUs, and the same served over gRPC on a unix socket."""

from __future__ import annotations

import itertools
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import pytest
from runtime_helpers import NODE, FakeClock, RuntimeFactory

from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.model import MigMode
from runtimekit.protocol import KitProtocol
from runtimekit.runtime.daemon import SIMULATED_MIG_STATE, RuntimeDaemon
from runtimekit.runtime.isolation import make_isolation
from runtimekit.runtime.mps import MpsDaemon
from runtimekit.runtime.pods import PodResourcesSource, PodSource
from runtimekit.runtime.service import NodeRuntime
from runtimekit.runtime.simulated import SimulatedBackend, parse_gpu_spec
from runtimekit.runtime.values import RuntimeSettings


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A short temp folder: unix socket paths must stay under 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="rk-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_runtime(short_dir: Path, clock: FakeClock) -> Iterator[RuntimeFactory]:
    """Build (and start) a NodeRuntime; the same state dir is reused, so a second call is a restart."""
    made: list[NodeRuntime] = []

    def factory(
        gpus: str = "2xH200",
        isolation: str = "none",
        pods: PodSource | None = None,
        kubelet: PodResourcesSource | None = None,
        mps: MpsDaemon | None = None,
        injector: bool = True,
        mig_layouts: Mapping[int, Sequence[str]] | None = None,
        start: bool = True,
        grace_s: float = 30.0,
        mig_modes: Mapping[int, MigMode] | None = None,
        protocol: KitProtocol | None = None,
    ) -> NodeRuntime:
        backend = SimulatedBackend(
            NODE,
            parse_gpu_spec(gpus),
            mig_layouts=mig_layouts,
            clock=clock,
            mig_modes=mig_modes,
            state_file=short_dir / "gpus" / SIMULATED_MIG_STATE,  # the simulated GPUs outlive a restart
        )
        protocol = protocol or KitProtocol.default()
        settings = RuntimeSettings(NODE, short_dir / "state", protocol, "0.1.0", grace_s)
        runtime = NodeRuntime(
            settings,
            backend,
            make_isolation(
                isolation, hami_lib_dir=str(short_dir / "vgpu"), memory_scaling=protocol.rules.memory_scaling
            ),
            mps=mps,
            pods=pods,
            kubelet=kubelet,
            injector=backend if injector else None,
            clock=clock,
            mig=backend,
        )
        if start:
            runtime.start()
        made.append(runtime)
        return runtime

    yield factory
    for runtime in made:
        runtime.close()


_served = itertools.count()


@pytest.fixture
def serve_runtime(short_dir: Path) -> Iterator[Callable[[NodeRuntime], tuple[RuntimeDaemon, RuntimeClient]]]:
    """Serve a built (not yet started) runtime on a fresh socket; returns the daemon and a client."""
    daemons: list[RuntimeDaemon] = []
    clients: list[RuntimeClient] = []

    def serve(runtime: NodeRuntime) -> tuple[RuntimeDaemon, RuntimeClient]:
        socket = str(short_dir / f"rt{next(_served)}.sock")
        daemon = RuntimeDaemon(runtime, socket, reconcile_interval_s=0).start()
        client = RuntimeClient(socket, timeout_s=5.0)
        daemons.append(daemon)
        clients.append(client)
        return daemon, client

    yield serve
    for client in clients:
        client.close()
    for daemon in daemons:
        daemon.stop()

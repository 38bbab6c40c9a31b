"""Fixtures for the device plugin: a simulated runtime served on a socket, the plugin service over a fake
API server, and (for kubelet-level tests) the plugin manager registered with a simulated kubelet."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest
from dp_helpers import KEYS, NODE, PROTOCOL, FakeNodeApi, Stack, StackFactory

from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.deviceplugin.service import DevicePluginService, DeviceState, PluginSettings
from runtimekit.model import MigMode, simulated_uuid
from runtimekit.protocol import KitProtocol
from runtimekit.runtime.daemon import RuntimeDaemon
from runtimekit.runtime.isolation import make_isolation
from runtimekit.runtime.service import NodeRuntime
from runtimekit.runtime.simulated import SimulatedBackend, parse_gpu_spec
from runtimekit.runtime.values import RuntimeSettings


@pytest.fixture
def make_stack() -> Iterator[StackFactory]:
    stacks: list[Stack] = []

    def factory(
        gpus: str = "2xH200",
        isolation: str = "mps",
        mig_layouts: Mapping[int, Sequence[str]] | None = None,
        mig_modes: Mapping[int, MigMode] | None = None,
        memory_unit: int = 0,
        protocol: KitProtocol = PROTOCOL,
    ) -> Stack:
        root = Path(tempfile.mkdtemp(prefix="dp-"))
        backend = SimulatedBackend(NODE, parse_gpu_spec(gpus), mig_layouts=mig_layouts, mig_modes=mig_modes)
        runtime = NodeRuntime(
            RuntimeSettings(NODE, root / "state", protocol, "0.1.0"),
            backend,
            make_isolation(isolation, hami_lib_dir=str(root / "vgpu")),
            injector=backend,
            mig=backend,
        )
        daemon = RuntimeDaemon(runtime, str(root / "rt.sock"), reconcile_interval_s=0).start()
        client = RuntimeClient(str(root / "rt.sock"))
        kube = FakeNodeApi()
        state = DeviceState()
        state.update(client.list_devices())
        service = DevicePluginService(PluginSettings(NODE, protocol, memory_unit, keys=KEYS), client, kube, state)
        count = len(backend.devices())
        stack = Stack(root, daemon, client, kube, service, [simulated_uuid(NODE, i) for i in range(count)])
        stacks.append(stack)
        return stack

    yield factory
    for stack in stacks:
        for close in reversed(stack.closers):
            close()
        stack.client.close()
        stack.daemon.stop()
        shutil.rmtree(stack.dir, ignore_errors=True)

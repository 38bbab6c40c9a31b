"""MIG in the peers' names: a container on a MIG device shows on its GPU's dcgm-exporter series with
the device's GPU instance (`GPU_I_PROFILE`, `GPU_I_ID`, as dcgm-exporter labels a GPU instance), its own
use per MIG device, and HAMi counts it among the card's users. A simulated A100-80GB in static MIG mode."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.conftest import Node
from exporter.test_compat_dcgm import scrape
from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.protocol import KitProtocol
from runtimekit.runtime.daemon import RuntimeDaemon
from runtimekit.runtime.isolation import make_isolation
from runtimekit.runtime.service import NodeRuntime
from runtimekit.runtime.simulated import SimulatedBackend
from runtimekit.runtime.simusage import SimulatedUsage, usage_annotations
from runtimekit.runtime.values import RuntimeSettings


@pytest.fixture
def mig_node() -> Iterator[tuple[Node, SimulatedBackend]]:
    folder = Path(tempfile.mkdtemp(prefix="rkm-"))
    backend = SimulatedBackend("node-a", [("A100-80GB", 1)], seed=3, mig_layouts={0: ["3g.40gb", "3g.40gb"]})
    protocol = KitProtocol.default()
    service = NodeRuntime(
        RuntimeSettings("node-a", folder / "state", protocol, "0.1.0", 30.0),
        backend,
        make_isolation("none"),
        injector=backend,
        usage=SimulatedUsage(usage_annotations(protocol.annotations.simulated_runtime)),
    )
    sock = str(folder / "runtime.sock")
    daemon = RuntimeDaemon(service, sock, reconcile_interval_s=0).start()
    client = RuntimeClient(sock, timeout_s=2.0)
    yield Node(sock, daemon, client), backend
    client.close()
    daemon.stop()
    shutil.rmtree(folder, ignore_errors=True)


def test_a_container_on_a_mig_device_is_labelled_with_its_gpu_instance(
    mig_node: tuple[Node, SimulatedBackend],
) -> None:
    node, backend = mig_node
    gpu = backend.devices()[0]
    upper = gpu.mig_devices[1]
    share = pb.GpuShare(uuid=upper.uuid, parent_uuid=gpu.uuid, mig_profile="3g.40gb", mig_start=upper.start)
    node.client.allocate("default", "m", "uid-m", "main", [share])
    got: dict[str, list[Any]] = {
        f.name: f.samples for f in text_string_to_metric_families(scrape(node, ("dcgm", "hami")))
    }
    (temp,) = got["DCGM_FI_DEV_GPU_TEMP"]
    assert (temp.labels["pod"], temp.labels["UUID"]) == ("m", gpu.uuid)  # the physical GPU's series
    assert (temp.labels["GPU_I_PROFILE"], temp.labels["GPU_I_ID"]) == ("3g.40gb", str(upper.gpu_instance_id))
    own = [s for s in got["DCGM_FI_DEV_FB_USED"] if s.labels["pod"] == "m"]
    assert [(s.labels["GPU_I_PROFILE"], s.labels["GPU_I_ID"]) for s in own] == [("3g.40gb", str(upper.gpu_instance_id))]
    (device,) = [s for s in got["DCGM_FI_DEV_FB_USED"] if s.labels["pod"] == ""]
    assert device.labels["GPU_I_PROFILE"] == ""
    (shared,) = got["hami_gpu_shared_count"]
    assert (shared.labels["device_uuid"], shared.value) == (gpu.uuid, 1)  # counted on its card

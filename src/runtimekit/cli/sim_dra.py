"""The DRA plugin's view of simulated GPUs, for `runtimekit simulate --through-claims`: the simulator
may not import the node plugins (import-linter's `sim` contract), so the command line hands it what
the plugin would publish, built by the plugin's own code: its DeviceClasses (`DraNames`) and a
node's ResourceSlices (`publisher.desired_specs` over the GPUs as the node runtime reports them),
pool generation 1, as the plugin's first publication writes them. Callers: `runtimekit simulate`,
benchmarks, tests.
"""

from __future__ import annotations

from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.draplugin.names import KIT_NAMES
from runtimekit.draplugin.publisher import desired_specs
from runtimekit.kube.objects import ResourceSlice
from runtimekit.model import NodeInventory
from runtimekit.sim.claims import DraPublication


def node_slices(inventory: NodeInventory) -> list[ResourceSlice]:
    """The ResourceSlices the DRA plugin publishes for a node with these GPUs (MIG off)."""
    devices = [
        pb.Device(
            index=gpu.index,
            uuid=gpu.uuid,
            model=gpu.model,
            product=gpu.model,
            memory_mib=gpu.memory_mib,
            health=pb.HEALTH_HEALTHY,
            mig_mode=pb.MIG_MODE_OFF,
        )
        for gpu in inventory.gpus
    ]
    node = str(inventory.node)
    specs = desired_specs(KIT_NAMES.driver, node, devices)
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": name},
            "spec": {**spec, "pool": {"name": node, "generation": 1, "resourceSliceCount": len(specs)}},
        }
        for name, spec in specs.items()
    ]


def kit_publication() -> DraPublication:
    """The kit's DRA driver (`gpu.runtimekit.aliyun.com`) publishing every simulated node's GPUs."""
    return DraPublication(KIT_NAMES.driver, KIT_NAMES.gpu_class, tuple(KIT_NAMES.device_classes()), node_slices)

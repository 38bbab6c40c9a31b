"""Nodes in MIG mode in a replayed cluster: their inventories, which pods ask for a MIG slice, and the
most GPU milli the slices can hold (docs/results/cluster-shapes.md, "A third in MIG mode").

A trace node with a `mig` layout (model/trace.py) has every GPU in static MIG mode with the listed
instances. The pods keep the trace's form except for this rule, the one users follow with NVIDIA's
mixed strategy (a `nvidia.com/mig-<profile>` resource per profile) or HAMi's MIG mode: a pod of one
GPU share (not a whole GPU, and not several GPUs) asks first for the smallest profile the cluster's
layouts offer that holds its share of the GPU, compute and memory alike (k/7 of the compute slices
and the profile's memory over the GPU's, both at least the share); where no instance of that
profile is free it asks for the share on a GPU not in MIG mode (`runtimekit.sim.replay`). A pod
asking a profile takes only that profile (a resource per profile). Whole-GPU pods never take MIG.
Callers: sim/replay.py (inventories and the rule), sim/bound.py (the slices' capacity).
"""

from __future__ import annotations

from collections.abc import Sequence

from runtimekit.model import NodeInventory, NodeName
from runtimekit.model.gpu import Gpu, MigInstance, MigMode, gpu_model, simulated_uuid
from runtimekit.model.mig import MigProfile, geometry, layout_from_names
from runtimekit.model.trace import TraceNode, TracePod

MILLI = 1000


def mig_inventory(node: TraceNode) -> NodeInventory:
    """The node's GPUs in static MIG mode with the instances of its layout (deterministic UUIDs)."""
    geo = geometry(node.model)
    assert geo is not None, "model/trace.py checked the model has MIG"
    assert len(node.mig) == node.gpus, "model/trace.py checked a layout per GPU"
    memory = gpu_model(node.model).memory_mib
    gpus = []
    for i, layout in enumerate(node.mig):
        uuid = simulated_uuid(node.name, i)
        instances = tuple(
            MigInstance(f"MIG-{uuid[4:]}-{start}", profile, start) for profile, start in layout_from_names(geo, layout)
        )
        gpus.append(Gpu(i, uuid, node.model, memory, mig_mode=MigMode.STATIC, mig_devices=instances))
    return NodeInventory(NodeName(node.name), tuple(gpus))


def fits(profile: MigProfile, slices: int, gpu_memory_mib: int, milli: int) -> bool:
    """Whether a share of `milli` of a GPU fits the profile: its compute slices and its memory."""
    return milli * slices <= MILLI * profile.compute_slices and milli * gpu_memory_mib <= MILLI * profile.memory_mib


class MigRule:
    """Which profile a pod asks for on a cluster, by the profiles the cluster's layouts offer."""

    def __init__(self, nodes: Sequence[TraceNode]) -> None:
        offered: dict[str, tuple[MigProfile, int, int]] = {}  # name -> profile, compute slices, GPU memory
        self.instances: dict[str, int] = {}  # profile -> instances in the cluster
        for node in nodes:
            geo = geometry(node.model)
            if not node.mig or geo is None:
                continue
            compute = 7 if geo.slices == 8 else 4
            for layout in node.mig:
                for name in layout:
                    profile = geo.profile(name)
                    assert profile is not None
                    offered[name] = (profile, compute, gpu_model(node.model).memory_mib)
                    self.instances[name] = self.instances.get(name, 0) + 1
        self._offered = sorted(offered.values(), key=lambda o: (o[0].compute_slices, o[0].memory_mib, o[0].name))
        self._cache: dict[int, str | None] = {}

    def __bool__(self) -> bool:
        return bool(self._offered)

    def profile(self, pod: TracePod) -> str | None:
        """The profile the pod asks for first, or None: it asks for what the trace says."""
        if pod.num_gpu != 1 or not 0 < pod.gpu_milli < MILLI or not self._offered:
            return None
        if pod.gpu_milli not in self._cache:
            self._cache[pod.gpu_milli] = next(
                (p.name for p, slices, memory in self._offered if fits(p, slices, memory, pod.gpu_milli)), None
            )
        return self._cache[pod.gpu_milli]

    def capacity(self, pods: Sequence[TracePod]) -> int:
        """The most GPU milli the cluster's MIG instances can hold of these pods: per profile, the
        largest shares of the pods asking for it, as many as it has instances (an upper bound: CPU
        and memory of the MIG nodes are left out)."""
        asking: dict[str, list[int]] = {}
        for pod in pods:
            name = self.profile(pod)
            if name is not None:
                asking.setdefault(name, []).append(pod.gpu_milli)
        return sum(sum(sorted(m, reverse=True)[: self.instances[name]]) for name, m in asking.items())

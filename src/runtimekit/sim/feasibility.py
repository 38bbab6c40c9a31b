"""An independent check of an offline packing: plain loops over the placements, sharing no code with
the model or the packer, so that a packing's value can be trusted as a lower bound.

A packing is a list of (pod index, node index, GPU indices). It is feasible when every pod is placed
at most once and is one of the given pods; a GPU pod names exactly `num_gpu` distinct GPUs of its
node; a CPU-only pod names none; the node's GPU model is one the pod allows; on every node the pods'
CPU and memory fit its capacity and their count its pod limit; on every GPU the shares sum to at
most 1000 milli, and a GPU given whole to a pod (a share of 1000) holds nothing else.
Callers: sim/bound.py, tests.
"""

from __future__ import annotations

from collections.abc import Sequence

from runtimekit.model.trace import TraceNode, TracePod

GPU_MILLI = 1000
POD_LIMIT = 1001  # the simulator's per-node pod limit


class InfeasiblePacking(ValueError):
    """The packing breaks a constraint; the message names the first one found."""


def check(
    nodes: Sequence[TraceNode], pods: Sequence[TracePod], packing: Sequence[tuple[int, int, tuple[int, ...]]]
) -> int:
    """The GPU milli the packing places; raises InfeasiblePacking when it is not feasible."""
    seen: set[int] = set()
    cpu = [0] * len(nodes)
    mem = [0] * len(nodes)
    count = [0] * len(nodes)
    gpu_used: dict[tuple[int, int], int] = {}
    gpu_whole: set[tuple[int, int]] = set()
    total = 0
    for pod_index, node_index, gpus in packing:
        if not 0 <= pod_index < len(pods):
            raise InfeasiblePacking(f"pod index {pod_index} is not one of the {len(pods)} pods")
        if pod_index in seen:
            raise InfeasiblePacking(f"pod {pod_index} is placed twice")
        seen.add(pod_index)
        if not 0 <= node_index < len(nodes):
            raise InfeasiblePacking(f"node index {node_index} is not one of the {len(nodes)} nodes")
        pod, node = pods[pod_index], nodes[node_index]
        wants_gpu = pod.num_gpu > 0 and pod.gpu_milli > 0
        if len(gpus) != (pod.num_gpu if wants_gpu else 0) or len(set(gpus)) != len(gpus):
            raise InfeasiblePacking(f"pod {pod_index} asks {pod.num_gpu} GPU(s) but is given {list(gpus)}")
        if wants_gpu and pod.gpu_spec:
            allowed = [m for m in pod.gpu_spec.split("|") if m]
            if node.model not in allowed:
                raise InfeasiblePacking(f"pod {pod_index} may not use model {node.model}")
        share = min(pod.gpu_milli, GPU_MILLI)
        for g in gpus:
            if not 0 <= g < node.gpus:
                raise InfeasiblePacking(f"pod {pod_index}: node {node_index} has no GPU {g}")
            key = (node_index, g)
            if key in gpu_whole or (share == GPU_MILLI and key in gpu_used):
                raise InfeasiblePacking(f"pod {pod_index}: GPU {g} of node {node_index} is taken whole")
            gpu_used[key] = gpu_used.get(key, 0) + share
            if share == GPU_MILLI:
                gpu_whole.add(key)
            if gpu_used[key] > GPU_MILLI:
                raise InfeasiblePacking(f"GPU {g} of node {node_index} holds more than {GPU_MILLI} milli")
        cpu[node_index] += pod.cpu_milli
        mem[node_index] += pod.memory_mib
        count[node_index] += 1
        if cpu[node_index] > node.cpu_milli:
            raise InfeasiblePacking(f"node {node_index} is given more CPU than its {node.cpu_milli} milli")
        if mem[node_index] > node.memory_mib:
            raise InfeasiblePacking(f"node {node_index} is given more memory than its {node.memory_mib} MiB")
        if count[node_index] > POD_LIMIT:
            raise InfeasiblePacking(f"node {node_index} is given more than {POD_LIMIT} pods")
        if wants_gpu:
            total += pod.num_gpu * share
    return total

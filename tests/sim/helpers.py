"""Small trace pods and the exact optimum of a tiny packing instance, for the offline bound's tests."""

from __future__ import annotations

from collections.abc import Sequence

from runtimekit.model.trace import TraceNode, TracePod


def share(name: str, milli: int, cpu: int = 1000, mem: int = 1024, spec: str = "") -> TracePod:
    return TracePod(name, cpu, mem, 1, milli, spec)


def whole(name: str, count: int, cpu: int = 1000, mem: int = 1024) -> TracePod:
    return TracePod(name, cpu, mem, count, 1000)


def optimum(nodes: Sequence[TraceNode], pods: Sequence[TracePod]) -> int:
    """The best packing by exhaustive search (tiny instances only)."""
    cpu = [n.cpu_milli for n in nodes]
    mem = [n.memory_mib for n in nodes]
    free = [[1000] * n.gpus for n in nodes]
    best = 0

    def go(i: int, value: int, left: int) -> None:
        nonlocal best
        best = max(best, value)
        if i == len(pods) or value + left <= best:
            return
        pod = pods[i]
        rest = left - pod.total_gpu_milli
        models = pod.allowed_models()
        if pod.total_gpu_milli:
            for n, node in enumerate(nodes):
                if cpu[n] < pod.cpu_milli or mem[n] < pod.memory_mib or (models and node.model not in models):
                    continue
                cpu[n] -= pod.cpu_milli
                mem[n] -= pod.memory_mib
                if pod.gpu_milli >= 1000:
                    fully = [g for g, f in enumerate(free[n]) if f == 1000]
                    if len(fully) >= pod.num_gpu:
                        for g in fully[: pod.num_gpu]:
                            free[n][g] = 0
                        go(i + 1, value + pod.total_gpu_milli, rest)
                        for g in fully[: pod.num_gpu]:
                            free[n][g] = 1000
                else:
                    for g in sorted(set(range(len(free[n]))), key=lambda g: free[n][g]):
                        if free[n][g] >= pod.gpu_milli:
                            free[n][g] -= pod.gpu_milli
                            go(i + 1, value + pod.total_gpu_milli, rest)
                            free[n][g] += pod.gpu_milli
                cpu[n] += pod.cpu_milli
                mem[n] += pod.memory_mib
        go(i + 1, value, rest)

    go(0, 0, sum(p.total_gpu_milli for p in pods))
    return best

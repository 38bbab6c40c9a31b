"""Small trace pods and the exact optimum of a tiny packing instance, for the offline bound's tests."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st

from runtimekit.model.trace import TraceNode, TracePod


def share(name: str, milli: int, cpu: int = 1000, mem: int = 1024, spec: str = "") -> TracePod:
    return TracePod(name, cpu, mem, 1, milli, spec)


def whole(name: str, count: int, cpu: int = 1000, mem: int = 1024) -> TracePod:
    return TracePod(name, cpu, mem, count, 1000)


def optimum(
    nodes: Sequence[TraceNode], pods: Sequence[TracePod], kept: frozenset[int] = frozenset(), floor: int = 0
) -> int:
    """The best packing by exhaustive search (tiny instances only); with `kept` (pod indices) only the
    packings whose placed pods of `kept` are worth at least `floor` milli count (-1: none does)."""
    cpu = [n.cpu_milli for n in nodes]
    mem = [n.memory_mib for n in nodes]
    free = [[1000] * n.gpus for n in nodes]
    best = -1

    def go(i: int, value: int, left: int, held: int) -> None:
        nonlocal best
        if held >= floor:  # the pods not yet decided dropped: a packing of its own
            best = max(best, value)
        if i == len(pods) or value + left <= best:
            return
        pod = pods[i]
        rest = left - pod.total_gpu_milli
        gain = pod.total_gpu_milli if i in kept else 0
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
                        go(i + 1, value + pod.total_gpu_milli, rest, held + gain)
                        for g in fully[: pod.num_gpu]:
                            free[n][g] = 1000
                else:
                    for g in sorted(set(range(len(free[n]))), key=lambda g: free[n][g]):
                        if free[n][g] >= pod.gpu_milli:
                            free[n][g] -= pod.gpu_milli
                            go(i + 1, value + pod.total_gpu_milli, rest, held + gain)
                            free[n][g] += pod.gpu_milli
                cpu[n] += pod.cpu_milli
                mem[n] += pod.memory_mib
        go(i + 1, value, rest, held)

    go(0, 0, sum(p.total_gpu_milli for p in pods), 0)
    return best


SIZES = st.sampled_from([110, 230, 320, 470, 650, 810, 1000])


@st.composite
def instances(draw: st.DrawFn) -> tuple[list[TraceNode], list[TracePod]]:
    nodes = [
        TraceNode(f"n{i}", draw(st.sampled_from([4000, 16000])), 65536, draw(st.sampled_from([1, 2, 4])), model)
        for i, model in enumerate(draw(st.lists(st.sampled_from(["T4", "P100"]), min_size=1, max_size=2)))
    ]
    pods = []
    for i in range(draw(st.integers(1, 7))):
        milli, count = draw(SIZES), 1
        if milli == 1000:
            count = draw(st.sampled_from([1, 2, 4]))
        spec = draw(st.sampled_from(["", "", "P100"]))
        pods.append(TracePod(f"p{i}", draw(st.sampled_from([1000, 3000, 9000])), 1024, count, milli, spec))
    return nodes, pods

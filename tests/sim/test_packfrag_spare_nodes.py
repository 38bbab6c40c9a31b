"""packfrag sends a pod that asks for no GPU to a node with no usable GPU (a node in MIG mode, a CPU
node) before a GPU node, where its memory and CPU would leave GPUs idle (packfrag.NO_GPU_BONUS;
docs/results/cluster-shapes.md, "A third in MIG mode")."""

from __future__ import annotations

import pytest

from runtimekit.model.trace import TraceNode, TracePod
from runtimekit.sim.arrivals import Arrivals
from runtimekit.sim.replay import replay, target_workload

BALANCED = ("1g.18gb", "1g.18gb", "2g.35gb", "3g.71gb")  # NVIDIA's all-balanced on an H200
PLAIN = TraceNode("p", 64_000, 65_536, 1, "H200")
SPARE = {
    "mig": TraceNode("m", 64_000, 65_536, 1, "H200", mig=(BALANCED,)),
    "cpu": TraceNode("c", 64_000, 65_536, 0, ""),
}
# a CPU pod taking most of a node's memory, then a share no MIG profile of the layout holds
PODS = [TracePod("cpu", 1000, 60_000, 0, 0), TracePod("share", 1000, 10_000, 1, 500)]


def _first_fit(nodes: list[TraceNode]) -> Arrivals:
    """The pods in order, ties to the nodes in list order (the plain node first)."""
    return Arrivals(PODS, {n.name: i for i, n in enumerate(nodes)}, sum(p.total_gpu_milli for p in PODS))


@pytest.mark.parametrize("spare", ["mig", "cpu"])
def test_a_cpu_pod_goes_to_a_node_without_usable_gpus_and_leaves_the_gpu_node_its_memory(spare: str) -> None:
    nodes = [PLAIN, SPARE[spare]]
    packed = replay(nodes, _first_fit(nodes), "packfrag", 42, target_workload(PODS), record=True)
    assert [(w.index, w.node) for w in packed.where] == [(0, SPARE[spare].name), (1, "p")]
    assert (packed.used_milli[-1], packed.failed_pods) == (500, 0)
    # fgd scores both nodes alike for the CPU pod (no GPU fragmentation either way) and fills the
    # first: the share then finds 5,536 MiB of memory where it asks 10,000
    first = replay(nodes, _first_fit(nodes), "fgd", 42, target_workload(PODS), record=True)
    assert [(w.index, w.node) for w in first.where] == [(0, "p")]
    assert (first.used_milli[-1], first.failed_pods) == (0, 1)


def test_with_a_usable_gpu_on_every_node_a_cpu_pod_goes_by_its_loss_and_first_fit_as_before() -> None:
    other = TraceNode("q", 64_000, 65_536, 1, "H200")
    nodes = [PLAIN, other]
    packed = replay(nodes, _first_fit(nodes), "packfrag", 42, target_workload(PODS), record=True)
    # no node to spare: the CPU pod takes the first node and the share, with no memory there, the other
    assert [(w.index, w.node) for w in packed.where] == [(0, "p"), (1, "q")]


def test_a_cpu_pod_leaves_a_mig_node_the_cpu_its_free_slices_need() -> None:
    # s (900 milli, 8 cores; no profile of the layout holds it) fills the plain GPU: the learned GPU
    # pods ask 8,000 / 900 CPU milli per GPU milli. The MIG node's free slices (a whole GPU's worth)
    # keep 8.9 of its 16 cores, so the CPU pod (12 cores) does not take its CPU but goes to the
    # plain node, where it costs no usable capacity; the 200-milli pod after it then finds CPU
    # beside a free 2g.35gb slice (its share no longer fits the plain GPU). Sent to the MIG node
    # with the spare-node bonus, the CPU pod would leave 4 cores there and the 200-milli pod would fail.
    nodes = [
        TraceNode("p", 64_000, 65_536, 1, "H200"),
        TraceNode("m", 16_000, 65_536, 1, "H200", mig=(BALANCED,)),
    ]
    pods = [TracePod("s", 8000, 1000, 1, 900), TracePod("cpu", 12_000, 1000, 0, 0), TracePod("q", 8000, 1000, 1, 200)]
    arrivals = Arrivals(pods, {n.name: i for i, n in enumerate(nodes)}, sum(p.total_gpu_milli for p in pods))
    packed = replay(nodes, arrivals, "packfrag", 42, target_workload(pods), record=True)
    assert [(w.index, w.node) for w in packed.where] == [(0, "p"), (1, "p"), (2, "m")]
    assert packed.failed_pods == 0

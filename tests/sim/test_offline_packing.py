"""Laying out a relaxation's plan on real nodes: what the plan says is placed where it fits, what
no node can hold is shed and reported, and pods added later go where they still fit."""

from __future__ import annotations

from runtimekit.model.trace import TraceNode, TracePod
from runtimekit.sim.bound_model import Plan, Relaxation, build_instance
from runtimekit.sim.feasibility import check
from runtimekit.sim.offline_packing import Filler, extend, pack


def share(name: str, milli: int, cpu: int = 1000) -> TracePod:
    return TracePod(name, cpu, 1024, 1, milli)


def test_a_plan_is_laid_out_as_a_checked_packing_of_its_value() -> None:
    nodes = [TraceNode(f"n{i}", 32000, 65536, 2, "T4") for i in range(2)]
    pods = [share("a", 600), share("b", 400), share("c", 500), share("d", 500), TracePod("w", 1000, 1024, 2, 1000)]
    relaxation = Relaxation(build_instance(nodes, pods))
    relaxation.solve_lp()
    plan = relaxation.solve_milp()
    packing = pack(nodes, pods, relaxation.instance, plan)
    assert check(nodes, pods, packing) == plan.value == relaxation.upper == 4000


def test_what_no_node_can_hold_is_shed_and_reported() -> None:
    """The plan counts CPU over a class: four 6-core pods fit three 8-core nodes in sum (24 of 24
    cores) but no node holds two of them, so each GPU the plan fills with two sheds one; the final
    fill finds one of the two a node, the other none."""
    nodes = [TraceNode(f"n{i}", 8000, 65536, 2, "T4") for i in range(3)]
    pods = [share(f"p{i}", 500, cpu=6000) for i in range(4)]
    instance = build_instance(nodes, pods)
    plan = Plan({0: {(2,): 2}}, {0: {0: 4}}, 2000)  # both shares of two GPUs: two pods a node
    shed: dict[int, int] = {}
    packing = pack(nodes, pods, instance, plan, shed)
    assert shed == {0: 1000}  # two pods did not fit where the plan put them
    assert check(nodes, pods, packing) == 1500  # and one of them found room on the third node


def test_pods_added_later_go_where_they_still_fit() -> None:
    nodes = [TraceNode("n", 8000, 65536, 1, "T4")]
    pods = [share("a", 700), share("b", 300), share("c", 100)]
    filler = Filler(nodes, pods, [(0, 0, (0,))])
    filler.add([2])
    filler.add([1])
    assert filler.value == 800  # c fits beside a; b then does not
    assert check(nodes, pods, filler.packing) == 800
    assert check(nodes, pods, extend(nodes, pods, [], [1, 0, 2])) == 1000  # largest first: a and b

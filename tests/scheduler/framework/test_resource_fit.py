"""The session's resource check against kube-scheduler's NodeResourcesFit: CPU, memory, pod count,
extended resources, ephemeral storage and huge pages; init containers, sidecars and pod overhead.

The cases are the facts of kube-scheduler's `noderesources/fit_test.go` (node allocatable, what the
node's pods already use, the incoming pod, the expected reasons), written as our own data. Memory is
counted in bytes, as in kube-scheduler's table (20 bytes on the node, pods of 1 and 19 bytes): the
scheduler keeps a pod's and a node's memory exact, so decimal units add up as they do there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from runtimekit.model import NodeName, Placement, PodKey, parse_pod_request
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.actions import allocate
from runtimekit.scheduler.cache import StaticCache
from runtimekit.scheduler.cache.objects import node_state
from runtimekit.scheduler.framework import BuildContext, Framework, Registry, parse_conf
from runtimekit.scheduler.framework.info import JobInfo, JobKey, TaskInfo
from runtimekit.scheduler.framework.interfaces import DeviceChoice
from runtimekit.scheduler.framework.session import Session

P = KitProtocol.default()
A, B = "example.com/aaa", "example.com/bbb"
HUGE = "hugepages-2Mi"
Amounts = Mapping[str, Any]


def node(pods: int = 32) -> dict[str, Any]:
    """The upstream table's node: 10m CPU, 20 bytes of memory, 5 of extended resource A, 20 of storage, 5 of
    huge pages."""
    allocatable = {"cpu": "10m", "memory": "20", "pods": pods, A: 5, "ephemeral-storage": "20Mi", HUGE: 5}
    return {"metadata": {"name": "n1"}, "status": {"allocatable": allocatable, "capacity": allocatable}}


def c(cpu: int = 0, mem: int = 0, restart: str = "", **scalars: int) -> dict[str, Any]:
    """A container asking `cpu` milli-CPU, `mem` bytes and scalar resources (keyword names: a, b, huge, storage)."""
    names = {"a": A, "b": B, "huge": HUGE, "storage": "ephemeral-storage", "k8s": "kubernetes.io/something"}
    names["sub"] = "subdomain.kubernetes.io/something"
    requests: dict[str, Any] = {names[k]: (f"{v}Mi" if k == "storage" else v) for k, v in scalars.items()}
    if cpu:
        requests["cpu"] = f"{cpu}m"
    if mem:
        requests["memory"] = str(mem)
    container: dict[str, Any] = {"name": "c", "image": "x", "resources": {"requests": requests}}
    if restart:
        container["restartPolicy"] = restart
    return container


def pod(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = (), overhead: Amounts | None = None) -> dict:
    spec: dict[str, Any] = {"containers": list(containers) or [c()]}
    if init:
        spec["initContainers"] = list(init)
    if overhead:
        spec["overhead"] = dict(overhead)
    return {"metadata": {"name": "p", "namespace": "default"}, "spec": spec}


def session_with(used: dict[str, Any] | None, pods: int = 32) -> Session:
    state = node_state(node(pods), P)
    cache = StaticCache([(state.inventory, state.capacity, state.meta)])
    if used is not None:
        request = parse_pod_request(used, P)
        held = Placement(NodeName("n1"), request.cpu_milli, request.memory_bytes, (), request.scalars)
        cache.ledger.reserve(PodKey("running"), held)
    registry = Registry()
    registry.register_action("allocate", allocate.build)
    return Framework(parse_conf('actions: "allocate"\ntiers: []\n'), registry, BuildContext()).open_session(cache)


def reasons_for(incoming: dict[str, Any], used: dict[str, Any] | None, pods: int = 32) -> set[str]:
    ssn = session_with(used, pods)
    job = JobInfo(JobKey("j"), "default", "j")
    task = TaskInfo(PodKey("p"), "default", "p", job.key, parse_pod_request(incoming, P))
    rows, errors = ssn.feasible(task)
    assert (rows.size == 1) == (not errors.reasons)
    return set(errors.reasons)


CPU, MEM = "Insufficient cpu", "Insufficient memory"
FIT_CASES = [
    pytest.param(pod(), pod(c(10, 20)), set(), id="no resources requested always fits"),
    pytest.param(pod(c(1, 1)), pod(c(10, 20)), {CPU, MEM}, id="too many resources fails"),
    pytest.param(pod(c(1, 1), init=(c(3, 1),)), pod(c(8, 19)), {CPU}, id="init container cpu"),
    pytest.param(pod(c(1, 1), init=(c(3, 1), c(2, 1))), pod(c(8, 19)), {CPU}, id="highest init container cpu"),
    pytest.param(pod(c(1, 1), init=(c(1, 3),)), pod(c(9, 19)), {MEM}, id="init container memory"),
    pytest.param(pod(c(1, 1), init=(c(1, 3), c(1, 2))), pod(c(9, 19)), {MEM}, id="highest init container memory"),
    pytest.param(pod(c(1, 1), init=(c(1, 1),)), pod(c(9, 19)), set(), id="init container is the max not the sum"),
    pytest.param(pod(c(1, 1), init=(c(1, 1), c(1, 1))), pod(c(9, 19)), set(), id="init containers are the max"),
    pytest.param(pod(c(1, 1)), pod(c(5, 5)), set(), id="both resources fit"),
    pytest.param(pod(c(2, 1)), pod(c(9, 5)), {CPU}, id="memory fits cpu does not"),
    pytest.param(pod(c(1, 2)), pod(c(5, 19)), {MEM}, id="cpu fits memory does not"),
    pytest.param(pod(c(5, 1)), pod(c(5, 19)), set(), id="equal edge case"),
    pytest.param(pod(c(4, 1), init=(c(5, 1),)), pod(c(5, 19)), set(), id="equal edge case for init container"),
    pytest.param(pod(c(a=1)), pod(c()), set(), id="extended resource fits"),
    pytest.param(pod(init=(c(a=1),)), pod(c()), set(), id="extended resource fits for init container"),
    pytest.param(pod(c(1, 1, a=10)), pod(c()), {f"Insufficient {A}"}, id="extended resource capacity enforced"),
    pytest.param(pod(init=(c(1, 1, a=10),)), pod(c()), {f"Insufficient {A}"}, id="extended capacity, init container"),
    pytest.param(pod(c(1, 1, a=1)), pod(c(a=5)), {f"Insufficient {A}"}, id="extended resource allocatable enforced"),
    pytest.param(pod(init=(c(1, 1, a=1),)), pod(c(a=5)), {f"Insufficient {A}"}, id="extended allocatable, init"),
    pytest.param(pod(c(1, 1, a=3), c(1, 1, a=3)), pod(c(a=2)), {f"Insufficient {A}"}, id="extended, two containers"),
    pytest.param(pod(init=(c(1, 1, a=3), c(1, 1, a=3))), pod(c(a=2)), set(), id="extended admits two init containers"),
    pytest.param(pod(init=(c(1, 1, a=6), c(1, 1, a=3))), pod(c(a=2)), {f"Insufficient {A}"}, id="extended, two inits"),
    pytest.param(pod(c(1, 1, b=1)), pod(c()), {f"Insufficient {B}"}, id="unknown extended resource"),
    pytest.param(pod(init=(c(1, 1, b=1),)), pod(c()), {f"Insufficient {B}"}, id="unknown extended resource, init"),
    pytest.param(pod(c(1, 1, k8s=10)), pod(c()), {"Insufficient kubernetes.io/something"}, id="kubernetes.io resource"),
    pytest.param(
        pod(init=(c(1, 1, sub=10),)), pod(c()), {"Insufficient subdomain.kubernetes.io/something"}, id="subdomain, init"
    ),
    pytest.param(pod(c(1, 1, huge=10)), pod(c()), {f"Insufficient {HUGE}"}, id="hugepages capacity enforced"),
    pytest.param(pod(init=(c(1, 1, huge=10),)), pod(c()), {f"Insufficient {HUGE}"}, id="hugepages capacity, init"),
    pytest.param(pod(c(1, 1, huge=3), c(1, 1, huge=3)), pod(c(huge=2)), {f"Insufficient {HUGE}"}, id="hugepages, two"),
    pytest.param(pod(c(1, 1), overhead={"cpu": "3m", "memory": "13"}), pod(c(5, 5)), set(), id="overhead fits"),
    pytest.param(pod(c(1, 1), overhead={"cpu": "1m", "memory": "15"}), pod(c(5, 5)), {MEM}, id="overhead too much"),
    pytest.param(pod(c(1, 1)), pod(c(10, 10)), {CPU}, id="storage table: cpu"),
    pytest.param(pod(c(1, 1)), pod(c(2, 10)), set(), id="storage table: pod fits"),
    pytest.param(pod(c(storage=25)), pod(c(2, 2)), {"Insufficient ephemeral-storage"}, id="storage exceeds"),
    pytest.param(pod(c(storage=10)), pod(c(2, 2)), set(), id="storage fits"),
    # restartable init containers (sidecars) run beside the app containers: their requests add up
    pytest.param(pod(c(1, 1), init=(c(2, 1, "Always"),)), pod(c(8, 5)), {CPU}, id="sidecar adds to the containers"),
    pytest.param(pod(c(1, 1), init=(c(1, 1, "Always"), c(2, 1))), pod(c(7, 5)), set(), id="init after sidecar fits"),
    pytest.param(pod(c(1, 1), init=(c(1, 1, "Always"), c(3, 1))), pod(c(7, 5)), {CPU}, id="init after sidecar adds"),
]


@pytest.mark.parametrize(("incoming", "used", "expected"), FIT_CASES)
def test_node_resources_fit(incoming: dict[str, Any], used: dict[str, Any], expected: set[str]) -> None:
    assert reasons_for(incoming, used) == expected


@pytest.mark.parametrize(
    "incoming",
    [
        pytest.param(pod(), id="empty pod"),
        pytest.param(pod(c(1, 1)), id="both resources fit"),
        pytest.param(pod(c(5, 1)), id="equal edge case"),
        pytest.param(pod(c(5, 1), init=(c(5, 1),)), id="equal edge case due to init container"),
    ],
)
def test_no_room_for_another_pod_is_reported_whatever_else_fits(incoming: dict[str, Any]) -> None:
    assert reasons_for(incoming, pod(c(5, 5)), pods=1) == {"Too many pods"}


def test_every_insufficient_resource_of_a_node_is_counted() -> None:
    ssn = session_with(pod(c(10, 20)))
    task = TaskInfo(PodKey("p"), "default", "p", JobKey("j"), parse_pod_request(pod(c(1, 1, b=1)), P))
    _, errors = ssn.feasible(task)
    assert errors.message == "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient example.com/bbb, " + (
        "1 Insufficient memory."
    )


def test_a_placement_books_the_scalars_so_the_next_pod_sees_them_taken() -> None:
    ssn = session_with(None)
    first = TaskInfo(PodKey("p1"), "default", "p1", JobKey("j"), parse_pod_request(pod(c(1, 1, a=3)), P))
    second = TaskInfo(PodKey("p2"), "default", "p2", JobKey("j"), parse_pod_request(pod(c(1, 1, a=3)), P))
    job = JobInfo(JobKey("j"), "default", "j")
    job.add(first)
    job.add(second)
    row, _ = ssn.select(first)
    assert row is not None
    choice = ssn.allocate_devices(first, row)
    assert isinstance(choice, DeviceChoice)
    stmt = ssn.statement()
    stmt.allocate(first, row, choice)
    assert ssn.table.scalar_free[A][row] == 2
    _, errors = ssn.feasible(second)
    assert errors.reasons == {f"Insufficient {A}": 1}
    stmt.discard()
    assert ssn.table.scalar_free[A][row] == 5


@pytest.mark.parametrize(
    ("allocatable", "held", "incoming", "expected"),
    [
        pytest.param("5G", ("1G", "2G"), "2G", set(), id="decimal units add up: 1G + 2G + 2G fit 5G"),
        pytest.param("5G", ("1G", "2G"), "2000000001", {MEM}, id="one byte more does not fit"),
        pytest.param("3Gi", ("1Gi", "1536Mi"), "0.5Gi", set(), id="binary units add up"),
        pytest.param("1500M", ("500M", "500M"), "500M", set(), id="three thirds fill the node exactly"),
    ],
)
def test_memory_is_counted_exactly_in_bytes(
    allocatable: str, held: tuple[str, ...], incoming: str, expected: set[str]
) -> None:
    """Rounded up to whole MiB per pod, 954 + 1908 + 1908 MiB was more than a 5G node's 4769 MiB; kube-scheduler
    counts bytes, and so does the kit's fit."""
    state = node_state(
        {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "8", "memory": allocatable, "pods": 110}}}, P
    )
    cache = StaticCache([(state.inventory, state.capacity, state.meta)])
    for i, memory in enumerate(held):
        request = parse_pod_request(pod({"name": "c", "image": "x", "resources": {"requests": {"memory": memory}}}), P)
        cache.ledger.reserve(PodKey(f"held-{i}"), Placement(NodeName("n1"), request.cpu_milli, request.memory_bytes))
    registry = Registry()
    registry.register_action("allocate", allocate.build)
    ssn = Framework(parse_conf('actions: "allocate"\ntiers: []\n'), registry, BuildContext()).open_session(cache)
    asked = pod({"name": "c", "image": "x", "resources": {"requests": {"memory": incoming}}})
    task = TaskInfo(PodKey("p"), "default", "p", JobKey("j"), parse_pod_request(asked, P))
    _, errors = ssn.feasible(task)
    assert set(errors.reasons) == expected

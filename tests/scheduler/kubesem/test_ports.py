"""Host port conflicts against kube-scheduler's NodePorts tables (`node_cases.py`)."""

from __future__ import annotations

import pytest

from runtimekit.scheduler.kubesem.ports import PortsInUse, host_ports
from scheduler.kubesem.builders import pod
from scheduler.kubesem.node_cases import PORT_CASES


@pytest.mark.parametrize(("wanted", "held", "fits"), PORT_CASES)
def test_host_port_conflicts(wanted: list[tuple[str, str, int]], held: list[tuple[str, str, int]], fits: bool) -> None:
    used = PortsInUse(host_ports(pod(ports=held)["spec"]))
    assert used.any_conflict(host_ports(pod(ports=wanted)["spec"])) is not fits


def test_only_host_ports_of_app_containers_count() -> None:
    spec = {
        "containers": [{"name": "a", "ports": [{"containerPort": 80}, {"containerPort": 81, "hostPort": 8081}]}],
        "initContainers": [{"name": "i", "ports": [{"containerPort": 82, "hostPort": 8082}]}],
    }
    assert [p.port for p in host_ports(spec)] == [8081]


def test_removing_a_port_frees_it_once_per_holder() -> None:
    (port,) = host_ports(pod(ports=[("TCP", "", 9000)])["spec"])
    used = PortsInUse([port, port])
    used.remove(port)
    assert used.conflicts(port)
    used.remove(port)
    assert not used.conflicts(port)
    assert not used

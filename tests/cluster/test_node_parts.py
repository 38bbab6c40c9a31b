"""The simulated kubelet's pure parts, as tables: durations, command-line path mapping, the resource fit
check with kubelet's wording, pod status shapes, what a direct node advertises; and per-thread output
capture."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from runtimekit.cluster.kubelet.admission import check_fit, pod_requests
from runtimekit.cluster.kubelet.containers import PodContainers
from runtimekit.cluster.kubelet.devices import DirectDevices
from runtimekit.cluster.kubelet.runner import NodeContext, capture_output, map_paths, parse_duration, runtimekit_argv
from runtimekit.cluster.kubelet.status import Terminated, lifecycle_status
from runtimekit.model import NodeInventory
from runtimekit.protocol.loader import parse_protocol_mapping
from runtimekit.protocol.presets import preset_protocol


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30.0), ("1m30s", 90.0), ("500ms", 0.5), ("2h", 7200.0), ("1.5", 1.5), (" 0 ", 0.0)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "30x", "-1", "1m 30s", "inf"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(text)


NODE = NodeContext("n1", "/tmp/rk/n1/runtime.sock", "/run/lj-runtimekit/runtime.sock", Path("/w"))
LOG = Path("/w/uid-c.log")


@pytest.mark.parametrize(
    ("argv", "node", "mapped"),
    [
        (
            ["job-agent", "--action", "enable", "--socket", "/run/lj-runtimekit/runtime.sock"],
            NODE,
            ["job-agent", "--socket", NODE.runtime_socket, "--termination-log", str(LOG), "--action", "enable"],
        ),
        (
            ["job-agent", "--action=disable", "--socket=/x.sock", "--termination-log", "/dev/termination-log"],
            NODE,
            ["job-agent", "--socket", NODE.runtime_socket, "--termination-log", str(LOG), "--action=disable"],
        ),
        (["runtime-admin", "status"], NODE, ["runtime-admin", "--socket", NODE.runtime_socket, "status"]),
        (["protocol", "show"], NODE, ["protocol", "show"]),
        (
            ["job-agent", "--action", "enable"],
            NodeContext("n2", None, "/run/x.sock", Path("/w")),
            ["job-agent", "--termination-log", str(LOG), "--action", "enable"],
        ),
    ],
    ids=["job-agent", "job-agent-equals-forms", "runtime-admin-default-socket", "no-paths", "direct-mode-no-socket"],
)
def test_node_paths_are_mapped(argv: list[str], node: NodeContext, mapped: list[str]) -> None:
    assert map_paths(argv, node, LOG) == mapped


@pytest.mark.parametrize(
    ("container", "argv"),
    [
        ({"command": ["runtimekit", "job-agent"], "args": ["--action", "enable"]}, ["job-agent", "--action", "enable"]),
        ({"command": ["/usr/local/bin/runtimekit", "protocol", "show"]}, ["protocol", "show"]),
        ({"command": ["python", "-m", "runtimekit"]}, None),
        ({"command": ["runtimekit"]}, None),
        ({}, None),
    ],
)
def test_runtimekit_commands_are_recognised(container: dict[str, Any], argv: list[str] | None) -> None:
    assert runtimekit_argv(container) == argv


def container(name: str, **resources: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "resources": resources}


@pytest.mark.parametrize(
    ("spec", "requests"),
    [
        ({"containers": [container("a", limits={"cpu": "500m", "memory": "1Gi"})]}, {"cpu": 500, "memory": 1 << 30}),
        (
            {
                "containers": [container("a", requests={"cpu": "1"}), container("b", requests={"cpu": "250m"})],
                "initContainers": [container("i", requests={"cpu": "2"})],
            },
            {"cpu": 2000},
        ),
        (
            {"containers": [container("a", limits={"aliyun.com/gpu": "2"})], "overhead": {"cpu": "100m"}},
            {"aliyun.com/gpu": 2, "cpu": 100},
        ),
        ({"containers": [container("a", requests={"cpu": "0"})]}, {}),
    ],
    ids=["limits-default-requests", "largest-init-container", "extended-plus-overhead", "zero-is-no-request"],
)
def test_pod_requests(spec: dict[str, Any], requests: dict[str, int]) -> None:
    assert pod_requests({"spec": spec}) == requests


ALLOCATABLE = {"cpu": 8000, "memory": 32 << 30, "pods": 3, "aliyun.com/gpu": 2}


@pytest.mark.parametrize(
    ("requests", "used", "active", "reason", "message"),
    [
        ({"cpu": 1000, "aliyun.com/gpu": 1}, {"cpu": 7000, "aliyun.com/gpu": 1}, 2, None, None),
        (
            {"aliyun.com/gpu": 1},
            {"aliyun.com/gpu": 2},
            1,
            "OutOfaliyun.com/gpu",
            "Node didn't have enough resource: aliyun.com/gpu, requested: 1, used: 2, capacity: 2",
        ),
        ({}, {}, 3, "OutOfpods", "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3"),
        (
            {"memory": 40 << 30, "cpu": 9000},
            {},
            0,
            "OutOfcpu",
            "Node didn't have enough resource: cpu, requested: 9000, used: 0, capacity: 8000",
        ),
        ({"nvidia.com/gpumem": 3000, "aliyun.com/gpu": 1}, {}, 0, None, None),
        (
            {"hugepages-2Mi": 2 << 20},
            {},
            0,
            "OutOfhugepages-2Mi",
            f"Node didn't have enough resource: hugepages-2Mi, requested: {2 << 20}, used: 0, capacity: 0",
        ),
    ],
    ids=[
        "fits-exactly",
        "gpus-taken",
        "too-many-pods",
        "cpu-reported-before-memory",
        "an-extended-resource-the-node-lacks-is-let-through",
        "a-native-resource-the-node-lacks-is-not",
    ],
)
def test_fit(
    requests: dict[str, int], used: dict[str, int], active: int, reason: str | None, message: str | None
) -> None:
    problem = check_fit(requests, ALLOCATABLE, used, active)
    got = (problem.reason, problem.message) if problem else (None, None)
    assert got == (reason, message)


POD = {
    "metadata": {"uid": "0123456789"},
    "spec": {"restartPolicy": "Never", "containers": [{"name": "a", "image": "x"}, {"name": "b"}]},
}


@pytest.mark.parametrize(
    ("ends", "phase"),
    [
        ({"a": Terminated(0)}, None),
        ({"a": Terminated(0), "b": Terminated(0)}, "Succeeded"),
        ({"a": Terminated(0), "b": Terminated(2, "boom")}, "Failed"),
    ],
)
def test_terminated_status(ends: dict[str, Terminated], phase: str | None) -> None:
    containers = PodContainers(POD, {}, "p")
    for name in ("a", "b"):
        containers.start(name, 0.0)
    for name, end in ends.items():
        containers.end(name, end, 60.0)
    status = lifecycle_status(containers.statuses(), containers.phase_if_done(), "2025-01-01T00:01:00Z")
    assert status.get("phase") == phase
    states = {s["name"]: s["state"] for s in status["containerStatuses"]}
    for name, end in ends.items():
        assert states[name]["terminated"]["exitCode"] == end.exit_code
        assert states[name]["terminated"]["containerID"] == f"simulated://01234567-{name}"
    assert all("running" in states[n] for n in states if n not in ends)


def test_output_is_captured_per_thread(capsys: pytest.CaptureFixture[str]) -> None:
    other_done = threading.Event()
    with capture_output() as captured:
        print("mine")
        print("also mine", file=sys.stderr)

        def other() -> None:
            print("not mine")
            other_done.set()

        threading.Thread(target=other).start()
        assert other_done.wait(5)
    print("after")
    assert captured.getvalue() == "mine\nalso mine\n"
    assert capsys.readouterr().out == "not mine\nafter\n"


@pytest.mark.parametrize(
    ("preset", "capacity"),
    [
        pytest.param(
            "hami",
            {"nvidia.com/gpu": 20, "nvidia.com/gpucores": 200, "nvidia.com/gpumem-percentage": 200},
            id="hami-ten-per-card-no-mib",
        ),
        pytest.param(
            "volcano-vgpu",
            {
                "volcano.sh/vgpu-number": 20,
                "volcano.sh/gpu-number": 20,
                "volcano.sh/vgpu-cores": 200,
                "volcano.sh/vgpu-memory-percentage": 200,
            },
            id="volcano-with-aliases",
        ),
        pytest.param(
            "gpushare",
            {"aliyun.com/gpu-count": 2, "aliyun.com/gpu-core.percentage": 200, "aliyun.com/gpu-mem": 30},
            id="gpushare-gib",
        ),
    ],
)
def test_a_direct_node_advertises_what_the_device_plugin_would_under_a_preset(
    preset: str, capacity: dict[str, int]
) -> None:
    devices = DirectDevices(NodeInventory.simulated("n1", "T4", 2), preset_protocol(preset))
    assert devices.capacity() == capacity


def test_a_direct_node_offers_scaled_memory_as_the_runtime_would() -> None:
    protocol = parse_protocol_mapping({"rules.memoryScaling": 1.5}, "test")  # memory in GiB units: advertised
    devices = DirectDevices(NodeInventory.simulated("n1", "T4", 2), protocol)
    assert devices.capacity()[protocol.resources.memory] == 2 * (15360 * 3 // 2 // 1024)
    _, annotations = devices.node_metadata()
    inventory = NodeInventory.from_annotation("n1", annotations[protocol.annotations.node_devices])
    assert [g.memory_mib for g in inventory.gpus] == [23040, 23040]

"""The simulated kubelet in direct mode (it advertises the GPUs itself; no runtime, no device plugin),
built by hand on the embedded API server: registration, admission in creation order, container
runners, and graceful deletion through the API server's kubelet hook."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from fixtures.waiting import wait_for
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.cluster.kubelet.devices import DirectDevices
from runtimekit.cluster.kubelet.kubelet import ENV_ANNOTATION, KubeletOptions, SimulatedKubelet
from runtimekit.cluster.kubelet.nodestatus import NodeShape
from runtimekit.cluster.kubelet.runner import ContainerRunner, NodeContext
from runtimekit.kube.http import KubeHttp
from runtimekit.model import Assignment, GpuShare, NodeInventory, NodeName, simulated_uuid
from runtimekit.protocol import KitProtocol

P = KitProtocol.default()
NODE = "direct-1"
PODS = "/api/v1/namespaces/default/pods"


class Clock:
    """The API server's clock: real time shifted by `offset`, so tests can order creation timestamps."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def server(clock: Clock) -> Iterator[ApiServer]:
    with ApiServer(bookmark_interval=0.5, seed=7, clock=clock) as started:
        yield started


@pytest.fixture
def http(server: ApiServer) -> Iterator[KubeHttp]:
    client = KubeHttp.connect(server=server.url)
    yield client
    client.close()


class Kubelets:
    """Starts direct-mode kubelets registered as the server's kubelet hook; stops them at the end."""

    def __init__(self, server: ApiServer, tmp_path: Path) -> None:
        self.server, self.tmp_path = server, tmp_path
        self.started: list[tuple[SimulatedKubelet, KubeHttp]] = []

    def __call__(self, gpus: int = 2, runner: ContainerRunner | None = None) -> SimulatedKubelet:
        http = KubeHttp.connect(server=self.server.url)
        devices = DirectDevices(NodeInventory.simulated(NODE, "A100-80GB", gpus), P)
        options = KubeletOptions(NodeShape(NODE, cpu="8", memory="32Gi"), P, "/tmp/rt.sock", self.tmp_path, 3)
        kubelet = SimulatedKubelet(http, devices, options, runner)
        self.server.add_kubelet_hook(kubelet)
        kubelet.start()
        assert kubelet.synced(10)
        self.started.append((kubelet, http))
        return kubelet

    def stop(self) -> None:
        for kubelet, http in self.started:
            self.server.remove_kubelet_hook(kubelet)
            kubelet.stop()
            http.close()


@pytest.fixture
def kubelets(server: ApiServer, tmp_path: Path) -> Iterator[Kubelets]:
    made = Kubelets(server, tmp_path)
    yield made
    made.stop()


def pod(
    name: str,
    limits: Mapping[str, str] | None = None,
    gpu: int | None = None,
    command: list[str] | None = None,
    extra_container: bool = False,
) -> dict[str, Any]:
    annotations = {}
    if gpu is not None:
        share = GpuShare(simulated_uuid(NODE, gpu), gpu, 1000, 81920)
        annotations[P.annotations.assignment] = Assignment(NodeName(NODE), {"main": (share,)}).to_annotation()
    main: dict[str, Any] = {"name": "main", "image": "x", "resources": {"limits": dict(limits or {})}}
    if command:
        main["command"] = command
    containers = [main, {"name": "sidecar", "image": "y"}] if extra_container else [main]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"nodeName": NODE, "restartPolicy": "Never", "containers": containers},
    }


def phase_of(http: KubeHttp, name: str, wanted: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        got = http.get(f"{PODS}/{name}")
        return got if got.get("status", {}).get("phase") == wanted else None

    return dict(wait_for(check, what=f"pod {name} {wanted}"))


def test_a_direct_node_advertises_its_gpus_itself(http: KubeHttp, kubelets: Kubelets) -> None:
    kubelets(gpus=2)
    node = http.get(f"/api/v1/nodes/{NODE}")
    inventory = NodeInventory.from_annotation(NODE, node["metadata"]["annotations"][P.annotations.node_devices])
    assert [g.uuid for g in inventory.gpus] == [simulated_uuid(NODE, 0), simulated_uuid(NODE, 1)]
    assert node["metadata"]["labels"][P.labels.gpu_model] == "A100-80GB"
    assert node["metadata"]["labels"][P.labels.gpu_count] == "2"
    capacity = node["status"]["capacity"]
    assert (capacity[P.resources.gpu], capacity[P.resources.core], capacity[P.resources.memory]) == ("2", "200", "160")


def test_a_direct_node_runs_an_assigned_pod_with_its_visible_gpus(http: KubeHttp, kubelets: Kubelets) -> None:
    kubelets(gpus=2)
    http.post(PODS, pod("whole", {P.resources.gpu: "1"}, gpu=1))
    running = phase_of(http, "whole", "Running")
    env = json.loads(running["metadata"]["annotations"][ENV_ANNOTATION])
    assert env == {"main": {"NVIDIA_VISIBLE_DEVICES": simulated_uuid(NODE, 1)}}
    assert running["status"]["podIP"] == "10.244.3.2"


def test_pods_are_admitted_in_creation_order(
    server: ApiServer, http: KubeHttp, kubelets: Kubelets, clock: Clock
) -> None:
    clock.offset = 100.0
    http.post(PODS, pod("zz-created-first", {P.resources.gpu: "1"}))
    clock.offset = 0.0
    http.post(PODS, pod("aa-created-second", {P.resources.gpu: "1"}))
    kubelets(gpus=1)  # both are waiting when the kubelet starts; only one fits
    wait_for(lambda: all(p.get("status", {}).get("phase") != "Pending" for p in http.list(PODS)[0]), what="admission")
    assert phase_of(http, "aa-created-second", "Running")
    rejected = phase_of(http, "zz-created-first", "Failed")
    assert rejected["status"]["reason"] == f"OutOf{P.resources.gpu}"


class RecordingRunner:
    def __init__(self, answer: Callable[[list[str]], tuple[int, str]]) -> None:
        self.answer = answer
        self.calls: list[tuple[str, list[str], NodeContext]] = []
        self.lock = threading.Lock()

    def __call__(self, pod: Mapping[str, Any], container: Mapping[str, Any], node: NodeContext) -> tuple[int, str]:
        argv = [*container.get("command", []), *container.get("args", [])]
        with self.lock:
            self.calls.append((pod["metadata"]["name"], argv, node))
        return self.answer(argv)


def fail(_argv: list[str]) -> tuple[int, str]:
    raise RuntimeError("the runner broke")


@pytest.mark.parametrize(
    ("answer", "phase", "code", "message"),
    [
        (lambda argv: (0, "switched"), "Succeeded", 0, "switched"),
        (lambda argv: (3, "no runtime here"), "Failed", 3, "no runtime here"),
        (fail, "Failed", 1, "RuntimeError: the runner broke"),
    ],
    ids=["exit-0-succeeds", "exit-3-fails", "a-raising-runner-is-exit-1"],
)
def test_a_runtimekit_container_is_handed_to_the_runner(
    http: KubeHttp,
    kubelets: Kubelets,
    tmp_path: Path,
    answer: Callable[[list[str]], tuple[int, str]],
    phase: str,
    code: int,
    message: str,
) -> None:
    runner = RecordingRunner(answer)
    kubelets(runner=runner)
    command = ["runtimekit", "job-agent", "--action", "enable"]
    http.post(PODS, pod("agent", command=command))
    done = phase_of(http, "agent", phase)
    terminated = done["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["message"]) == (code, message)
    assert terminated["reason"] == ("Completed" if code == 0 else "Error")
    [(name, argv, context)] = runner.calls
    assert (name, argv) == ("agent", command)
    assert (context.node, context.runtime_socket, context.protocol_socket) == (NODE, "/tmp/rt.sock", P.sockets.runtime)
    assert context.work_dir == tmp_path


def test_other_containers_keep_running_and_so_does_the_pod(http: KubeHttp, kubelets: Kubelets) -> None:
    runner = RecordingRunner(lambda argv: (0, ""))
    kubelets(runner=runner)
    http.post(PODS, pod("mixed", command=["runtimekit", "protocol", "show"], extra_container=True))

    def one_ended() -> dict[str, Any] | None:
        got = http.get(f"{PODS}/mixed")
        states = [s["state"] for s in got.get("status", {}).get("containerStatuses", [])]
        return got if any("terminated" in s for s in states) else None

    got = wait_for(one_ended, what="the runtimekit container ended")
    assert got["status"]["phase"] == "Running"
    assert [sorted(s["state"]) for s in got["status"]["containerStatuses"]] == [["terminated"], ["running"]]


def test_without_a_runner_a_runtimekit_container_just_runs(http: KubeHttp, kubelets: Kubelets) -> None:
    kubelets(runner=None)
    http.post(PODS, pod("agent", command=["runtimekit", "job-agent", "--action", "enable"]))
    assert phase_of(http, "agent", "Running")["status"]["containerStatuses"][0]["ready"]


def test_deleting_a_running_pod_goes_through_its_kubelet(http: KubeHttp, kubelets: Kubelets) -> None:
    kubelet = kubelets()
    http.post(PODS, pod("web"))
    phase_of(http, "web", "Running")
    assert [p.name for p, _ in kubelet.running_pods()] == ["web"]
    marked = http.delete(f"{PODS}/web")
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 30
    wait_for(lambda: not http.list(PODS)[0], timeout=10, what="the kubelet finishing the deletion")
    assert kubelet.running_pods() == []

"""A bound pod whose admission waits on the device plugins (the node's GPU runtime restarting) says
why within seconds, and so does each pod bound after it that waits behind it; a quick admission
says nothing of the kind."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fixtures.waiting import wait_for
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.cluster.kubelet.devices import ContainerEnv, DirectDevices
from runtimekit.cluster.kubelet.kubelet import KubeletOptions, SimulatedKubelet
from runtimekit.cluster.kubelet.nodestatus import NodeShape
from runtimekit.kube.http import KubeHttp
from runtimekit.kube.objects import Pod
from runtimekit.model import NodeInventory
from runtimekit.protocol import KitProtocol

P = KitProtocol.default()
NODE = "slow-node"
PODS = "/api/v1/namespaces/default/pods"
WAITING_FOR_DEVICES, WAITING_FOR_ADMISSION = "WaitingForDevices", "WaitingForAdmission"  # the Events' reasons


class StalledDevices(DirectDevices):
    """Devices whose Allocate waits until `resume` is set, as a device plugin waits on a runtime
    that is restarting."""

    def __init__(self) -> None:
        super().__init__(NodeInventory.simulated(NODE, "H200", 2), P)
        self.resume = threading.Event()

    def admit(self, pod: Pod) -> ContainerEnv:
        self.resume.wait(30)
        return super().admit(pod)


@pytest.fixture
def http(apiserver: ApiServer) -> Iterator[KubeHttp]:
    client = KubeHttp.connect(server=apiserver.url)
    yield client
    client.close()


@pytest.fixture
def devices(apiserver: ApiServer, tmp_path: Path) -> Iterator[StalledDevices]:
    stalled = StalledDevices()
    kube = KubeHttp.connect(server=apiserver.url)
    options = KubeletOptions(NodeShape(NODE, cpu="8", memory="32Gi"), P, None, tmp_path)
    kubelet = SimulatedKubelet(kube, stalled, options)
    apiserver.add_kubelet_hook(kubelet)
    kubelet.start()
    assert kubelet.synced(10)
    yield stalled
    stalled.resume.set()
    apiserver.remove_kubelet_hook(kubelet)
    kubelet.stop()
    kube.close()


def gpu_pod(name: str, gpus: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": NODE,
            "containers": [{"name": "main", "image": "cuda", "resources": {"limits": {P.resources.gpu: gpus}}}],
        },
    }


def reasons(http: KubeHttp, name: str) -> dict[str, str]:
    events = http.get("/api/v1/namespaces/default/events", {"fieldSelector": f"involvedObject.name={name}"})
    return {e["reason"]: e["message"] for e in events["items"]}


def phase(http: KubeHttp, name: str) -> str:
    return str(http.get(f"{PODS}/{name}")["status"].get("phase", ""))


def test_pods_that_wait_on_a_stalled_admission_say_why(http: KubeHttp, devices: StalledDevices) -> None:
    http.post(PODS, gpu_pod("first"))
    http.post(PODS, gpu_pod("second"))
    first = wait_for(lambda: reasons(http, "first").get(WAITING_FOR_DEVICES), timeout=5, what="why first waits")
    assert P.resources.gpu in first
    assert "GPU runtime may be restarting" in first
    second = wait_for(lambda: reasons(http, "second").get(WAITING_FOR_ADMISSION), timeout=5, what="why second waits")
    assert "default/first" in second
    assert phase(http, "first") != "Running"
    assert phase(http, "second") != "Running"
    devices.resume.set()
    wait_for(lambda: phase(http, "first") == phase(http, "second") == "Running", what="both admitted")
    http.post(PODS, gpu_pod("quick", gpus="0"))  # the node's two GPUs are taken
    wait_for(lambda: phase(http, "quick") == "Running", what="quick admitted")
    assert WAITING_FOR_DEVICES not in reasons(http, "quick")
    assert len([r for r in reasons(http, "first") if r.startswith("Waiting")]) == 1  # told once

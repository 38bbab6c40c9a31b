"""The node daemons against the embedded API server: the real kube access (`KubeNodeApi`), and pods
admitted by the simulated kubelet through the real device plugin and runtime."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from dp_helpers import KEYS, NODE, PROTOCOL, RES

from fixtures.apiserver import make_node, make_pod
from fixtures.scheduling import binding
from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.cluster.kubelet.devicemanager import DeviceManager
from runtimekit.deviceplugin.manager import DevicePluginManager
from runtimekit.deviceplugin.matching import parse_allocated
from runtimekit.deviceplugin.publisher import NodePublisher
from runtimekit.deviceplugin.service import DevicePluginService, DeviceState, PluginSettings
from runtimekit.kube.errors import ConflictError, NotFoundError
from runtimekit.kube.nodeapi import KubeNodeApi
from runtimekit.model import Assignment, GpuShare, GpuUUID, NodeName, simulated_uuid
from runtimekit.runtime.daemon import RuntimeDaemon, RuntimeOptions, build_runtime

PODS = "/api/v1/namespaces/default/pods"
H200 = 143771


def create(http: httpx2.Client, path: str, obj: dict[str, Any]) -> dict[str, Any]:
    response = http.post(path, json=obj)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def test_kube_node_api(apiserver: ApiServer, kubeconfig: Path, kube_http: httpx2.Client) -> None:
    api = KubeNodeApi.connect(str(kubeconfig))
    create(kube_http, "/api/v1/nodes", make_node(NODE))
    create(kube_http, PODS, make_pod("mine", node=NODE))
    create(kube_http, PODS, make_pod("theirs", node="node-b"))
    create(kube_http, "/api/v1/namespaces", {"metadata": {"name": "team"}})
    create(kube_http, "/api/v1/namespaces/team/pods", make_pod("also-mine", namespace="team", node=NODE))
    assert sorted(p["metadata"]["name"] for p in api.list_node_pods(NODE)) == ["also-mine", "mine"]

    pod = api.get_pod("default", "mine")
    version = pod["metadata"]["resourceVersion"]
    patched = api.patch_pod_annotations("default", "mine", {"a": "1"}, version)
    assert patched["metadata"]["annotations"]["a"] == "1"
    with pytest.raises(ConflictError):
        api.patch_pod_annotations("default", "mine", {"a": "2"}, version)  # stale resourceVersion
    api.patch_pod_annotations("default", "mine", {"a": None, "b": "3"}, None)
    assert api.get_pod("default", "mine")["metadata"]["annotations"] == {"b": "3"}
    with pytest.raises(NotFoundError):
        api.get_pod("default", "gone")

    api.patch_node_metadata(NODE, {"example.com/l": "v"}, {"example.com/a": "w"})
    node = kube_http.get(f"/api/v1/nodes/{NODE}").json()
    assert node["metadata"]["labels"]["example.com/l"] == "v"
    assert node["metadata"]["annotations"]["example.com/a"] == "w"
    assert api.get_node(NODE)["metadata"]["name"] == NODE


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="dpe-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_pods_are_admitted_through_plugin_and_runtime_on_the_embedded_cluster(
    apiserver: ApiServer, kubeconfig: Path, kube_http: httpx2.Client, short_dir: Path
) -> None:
    api = KubeNodeApi.connect(str(kubeconfig))
    create(kube_http, "/api/v1/nodes", make_node(NODE))
    options = RuntimeOptions(
        backend="simulated",
        socket_path=str(short_dir / "rt.sock"),
        state_dir=short_dir / "state",
        node_name=NODE,
        isolation="hami-core",
        hami_lib_dir=str(short_dir / "vgpu"),
        simulate_gpus="2xH200",
        reconcile_grace_s=0,
    )
    daemon = RuntimeDaemon(build_runtime(options, pods=api), options.socket_path, reconcile_interval_s=0).start()
    client = RuntimeClient(options.socket_path)
    kubelet = DeviceManager(short_dir / "plugins").start()
    service = DevicePluginService(PluginSettings(NODE, PROTOCOL, keys=KEYS), client, api, DeviceState())
    manager = DevicePluginManager(
        service, client.watch_devices, short_dir / "plugins", NodePublisher(api, NODE, PROTOCOL), poll_s=0.05
    ).start(first_devices_timeout_s=5)
    try:
        assert kubelet.wait_for(lambda k: k.capacity() == {RES.gpu: 2, RES.core: 200, RES.memory: 2 * (H200 // 1024)})
        gpu0, gpu1 = simulated_uuid(NODE, 0), simulated_uuid(NODE, 1)
        # what the scheduler leaves behind: an assignment signed over the pod's UID, an assume time, a binding
        for name, gpu, assume in (("second", gpu0, 9), ("first", gpu1, 4)):
            created = create(kube_http, PODS, make_pod(name, limits={RES.core: "40", RES.memory: "16"}))
            assignment = Assignment(NodeName(NODE), {"main": (GpuShare(GpuUUID(gpu), 0, 400, 16384),)})
            path, body = binding(created, NODE, assignment, KEYS, assume_ns=int((1_700_000_000 + assume) * 1e9))
            assert kube_http.post(path, json=body).status_code == 201
        for name, gpu in (("first", gpu1), ("second", gpu0)):
            pod = api.get_pod("default", name)
            containers = kubelet.admit_pod(pod)
            assert containers["main"].envs["NVIDIA_VISIBLE_DEVICES"] == gpu
            assert containers["main"].envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "16384m"
            assert containers["main"].envs["CUDA_DEVICE_SM_LIMIT"] == "40"
            allocated = api.get_pod("default", name)["metadata"]["annotations"][PROTOCOL.annotations.allocated]
            assert parse_allocated(allocated) == {"main": (RES.core, RES.memory)}

        node = kube_http.get(f"/api/v1/nodes/{NODE}").json()["metadata"]
        assert node["labels"][PROTOCOL.labels.gpu_count] == "2"
        assert len(json.loads(node["annotations"][PROTOCOL.annotations.node_devices])["gpus"]) == 2

        assert kube_http.delete(f"{PODS}/first", params={"gracePeriodSeconds": "0"}).status_code == 200
        released = daemon.runtime.reconcile()
        assert [(a.pod.name, why) for a, why in released] == [("first", "not on this node in the API server")]
        assert [a.pod.name for a in client.list_allocations()] == ["second"]
    finally:
        manager.stop()
        kubelet.stop()
        client.close()
        daemon.stop()

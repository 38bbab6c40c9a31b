"""Issue 23 item 2: a pod's author cannot take more than it asked, nor another pod's GPU.

Anyone who may create pods may write `spec.nodeName` and annotations. On the embedded cluster
(scheduler, simulated kubelet, real device plugin and runtime), a legitimately scheduled pod holds a
whole GPU; hostile pods then try to get GPUs by writing their own assignment: unsigned, with a
signature copied from that pod, edited after signing, or signed with the scheduler's key but for
more than they ask. Each is refused at admission with kubelet's UnexpectedAdmissionError naming
why, and holds nothing; the whole GPU stays visible to its pod alone. The runtime refuses shares of
nothing and a GPU named twice, whoever asks; scheduler and device plugin refuse to start without a
key; a rotated key keeps the pods signed with the previous one valid."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fixtures.scheduling import bind
from fixtures.waiting import wait_for
from runtimekit.api.runtime_client import RuntimeCallError, RuntimeClient, Share
from runtimekit.base.keyring import KeyRing, KeyRingError, ensure_key_folder
from runtimekit.cli.embedded import ClusterOptions, EmbeddedCluster, start_cluster
from runtimekit.cli.main import main
from runtimekit.cluster.kubelet.kubelet import ENV_ANNOTATION
from runtimekit.kube.http import KubeHttp
from runtimekit.model import Assignment, GpuShare, GpuUUID, NodeName, gpu_model, simulated_uuid
from runtimekit.model.authority import sign_assignment
from runtimekit.protocol import KitProtocol
from runtimekit.runtime.daemon import RuntimeDaemon
from runtimekit.runtime.isolation import make_isolation
from runtimekit.runtime.service import NodeRuntime
from runtimekit.runtime.simulated import SimulatedBackend, parse_gpu_spec
from runtimekit.runtime.values import RuntimeSettings

P = KitProtocol.default()
RES = P.resources
NODE = "gpu-node-1"
PODS = "/api/v1/namespaces/default/pods"
H200_MIB = gpu_model("H200").memory_mib


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmbeddedCluster]:
    options = ClusterOptions(nodes=1, gpus_per_node=2, isolation="mps", controller=False)
    with start_cluster(options, ready_timeout_s=90) as started:
        yield started


@pytest.fixture(scope="module")
def http(cluster: EmbeddedCluster) -> Iterator[KubeHttp]:
    client = cluster.http("adversary")
    yield client
    client.close()


@pytest.fixture(scope="module")
def holder(http: KubeHttp) -> dict[str, Any]:
    """A pod the scheduler placed on a whole GPU, running."""
    http.post(PODS, pod("holder", {RES.gpu: "1"}, scheduled=True))
    return dict(wait_for(lambda: phase(http, "holder", "Running"), what="the holder running"))


def pod(
    name: str, limits: dict[str, str], scheduled: bool = False, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    """A pod for our scheduler (`scheduled`), else one its author bound to the node (`spec.nodeName`)."""
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "cuda:12", "resources": {"limits": limits}}]}
    spec.update({"schedulerName": P.scheduler_name} if scheduled else {"nodeName": NODE})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": spec,
    }


def phase(http: KubeHttp, name: str, wanted: str) -> dict[str, Any] | None:
    found = http.get(f"{PODS}/{name}")
    return found if (found.get("status") or {}).get("phase") == wanted else None


def assignment_text(gpu: int, milli: int, mib: int) -> str:
    share = GpuShare(GpuUUID(simulated_uuid(NODE, gpu)), gpu, milli, mib)
    return Assignment(NodeName(NODE), {"main": (share,)}).to_annotation()


def gpu_of(found: dict[str, Any]) -> int:
    return (
        Assignment.from_annotation(found["metadata"]["annotations"][P.annotations.assignment])
        .containers["main"][0]
        .index
    )


def hostile(holder: dict[str, Any], how: str) -> tuple[dict[str, str], dict[str, str]]:
    """(limits, annotations) of a pod that writes its own assignment, `how`."""
    notes = holder["metadata"]["annotations"]
    taken = gpu_of(holder)
    if how == "a whole GPU for 1 %":
        return {RES.core: "1"}, {P.annotations.assignment: assignment_text(1 - taken, 1000, H200_MIB)}
    if how == "a share of nothing on the GPU held whole":
        return {RES.core: "1"}, {P.annotations.assignment: assignment_text(taken, 0, 0)}
    if how == "the held GPU with the holder's signature":
        keys = (P.annotations.assignment, P.annotations.assignment_signature)
        return {RES.gpu: "1"}, {k: notes[k] for k in keys}
    assert how == "a signed assignment edited"
    edited = notes[P.annotations.assignment].replace(f'"index":{taken}', f'"index":{taken},"x":1')
    return {RES.gpu: "1"}, {
        P.annotations.assignment: edited,
        P.annotations.assignment_signature: notes[P.annotations.assignment_signature],
    }


@pytest.mark.parametrize(
    ("how", "why"),
    [
        ("a whole GPU for 1 %", "it is not signed by the scheduler"),
        ("a share of nothing on the GPU held whole", "it is not signed by the scheduler"),
        ("the held GPU with the holder's signature", "signature does not match"),
        ("a signed assignment edited", "signature does not match"),
    ],
)
def test_a_pod_that_writes_its_own_assignment_is_refused_at_admission(
    cluster: EmbeddedCluster, http: KubeHttp, holder: dict[str, Any], how: str, why: str
) -> None:
    name = "hostile-" + "".join(ch for ch in how if ch.isalnum())[:20].lower()
    limits, annotations = hostile(holder, how)
    http.post(PODS, pod(name, limits, annotations=annotations))
    refused = wait_for(lambda: phase(http, name, "Failed"), what=f"{name} refused")
    assert refused["status"]["reason"] == "UnexpectedAdmissionError"
    message = refused["status"]["message"]
    assert message.startswith("Pod was rejected: Allocate failed due to rpc error: code = FAILED_PRECONDITION")
    assert f"kubelet is admitting pod default/{name}" in message
    assert why in message
    assert ENV_ANNOTATION not in refused["metadata"].get("annotations", {})  # its containers see no GPU
    assert_holder_alone(cluster, holder)


def test_an_assignment_signed_with_the_key_but_unequal_to_the_requests_is_refused(
    cluster: EmbeddedCluster, http: KubeHttp, holder: dict[str, Any]
) -> None:
    """Were the key to leak (or the scheduler to err), an assignment must still equal the pod's requests."""
    unbound = pod("greedy", {RES.core: "1"})
    del unbound["spec"]["nodeName"]
    # a scheduler nobody runs (the embedded one answers to default-scheduler too): it binds itself below
    unbound["spec"]["schedulerName"] = "bound-by-hand"
    created = http.post(PODS, unbound)
    free = 1 - gpu_of(holder)
    whole = Assignment(NodeName(NODE), {"main": (GpuShare(GpuUUID(simulated_uuid(NODE, free)), free, 1000, H200_MIB),)})
    bind(http.post, created, NODE, whole, KeyRing.from_folder(cluster.assignment_keys))
    refused = wait_for(lambda: phase(http, "greedy", "Failed"), what="greedy refused")
    message = refused["status"]["message"]
    assert "it differs from the pod's requests" in message
    assert "asks for 10 milli, assigned 1000" in message
    assert_holder_alone(cluster, holder)


def assert_holder_alone(cluster: EmbeddedCluster, holder: dict[str, Any]) -> None:
    node = cluster.node(NODE)
    assert node.runtime_socket is not None
    with RuntimeClient(node.runtime_socket) as runtime:
        held = [(a.pod.name, [s.uuid for s in a.shares]) for a in runtime.list_allocations()]
    assert held == [("holder", [simulated_uuid(NODE, gpu_of(holder))])]
    env = json.loads(holder["metadata"]["annotations"][ENV_ANNOTATION])["main"]
    assert env["NVIDIA_VISIBLE_DEVICES"] == simulated_uuid(NODE, gpu_of(holder))


# -- the runtime, whoever calls it --------------------------------------------------------------


@pytest.fixture(scope="module")
def runtime() -> Iterator[RuntimeClient]:
    """A node runtime alone (no pod source: nothing it holds is ever released behind the test's back)."""
    folder = Path(tempfile.mkdtemp(prefix="rk-auth-"))
    backend = SimulatedBackend(NODE, parse_gpu_spec("2xH200"))
    settings = RuntimeSettings(NODE, folder / "state", P, "0.1.0")
    daemon = RuntimeDaemon(NodeRuntime(settings, backend, make_isolation("none")), str(folder / "rt.sock"), 0).start()
    client = RuntimeClient(str(folder / "rt.sock"))
    yield client
    client.close()
    daemon.stop()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize(
    ("shares", "why"),
    [
        ([(0, 0, 0)], "grants nothing but the sight of the GPU"),
        ([(1, 100, 1024), (1, 100, 1024)], "named twice for one container"),
        ([(1, 300, 1024), (1, 0, 1)], "named twice for one container"),
    ],
    ids=["a share of nothing", "the same share twice", "a share and a sliver of the same GPU"],
)
def test_the_runtime_refuses_shares_that_only_make_a_gpu_visible(
    runtime: RuntimeClient, shares: list[tuple[int, int, int]], why: str
) -> None:
    asked = [Share(simulated_uuid(NODE, g), milli, mib) for g, milli, mib in shares]
    with pytest.raises(RuntimeCallError) as exc:
        runtime.allocate("default", "direct", "uid-direct", "main", asked)
    assert exc.value.code.name == "INVALID_ARGUMENT"
    assert why in exc.value.details
    assert runtime.list_allocations() == []


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param((1000, H200_MIB), (0, 1), id="a sliver of memory on a GPU held whole"),
        pytest.param((1000, H200_MIB), (1, 0), id="a sliver of compute on a GPU held whole"),
        pytest.param((10, 1), (1000, H200_MIB), id="a whole GPU where a share is held"),
    ],
)
def test_a_whole_gpu_and_a_share_never_meet_on_one_gpu(
    runtime: RuntimeClient, first: tuple[int, int], second: tuple[int, int]
) -> None:
    gpu = simulated_uuid(NODE, 0)
    runtime.allocate("default", "one", "uid-one", "main", [Share(gpu, *first)])
    try:
        with pytest.raises(RuntimeCallError) as exc:
            runtime.allocate("default", "two", "uid-two", "main", [Share(gpu, *second)])
        assert exc.value.code.name == "RESOURCE_EXHAUSTED", exc.value.details
        assert "would over-commit" in exc.value.details
    finally:
        runtime.release("uid-one")


# -- keys ---------------------------------------------------------------------------------------


KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: u, user: {}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


@pytest.fixture
def key_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="rk-keys-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("component", ["scheduler", "device-plugin"])
def test_scheduler_and_device_plugin_refuse_to_start_without_a_key(
    component: str, key_dir: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    kubeconfig = key_dir.parent / f"{key_dir.name}.kubeconfig"  # a usable one: only the key is missing
    kubeconfig.write_text(KUBECONFIG)
    common = [
        "--kubeconfig",
        str(kubeconfig),
        *(["--runtime-socket", "/nonexistent"] if component != "scheduler" else []),
    ]
    assert main([component, *common]) == 2
    assert main([component, *common, "--assignment-keys", str(key_dir)]) == 2  # the folder has no key
    (key_dir / "current").write_text("short\n")
    assert main([component, *common, "--assignment-keys", str(key_dir)]) == 2
    said = capsys.readouterr().err + caplog.text
    assert "--assignment-keys is required" in said
    assert f"no key file {key_dir / 'current'}" in said
    assert "is 5 bytes long; a key needs at least 32" in said


def test_a_rotated_key_keeps_pods_signed_with_the_previous_one(key_dir: Path) -> None:
    ensure_key_folder(key_dir)
    scheduler, plugin = KeyRing.from_folder(key_dir, reload_s=0), KeyRing.from_folder(key_dir, reload_s=0)
    text = assignment_text(0, 250, 1024)
    before = sign_assignment(scheduler, "uid-1", text)
    old = (key_dir / "current").read_text()
    (key_dir / "previous").write_text(old)  # rotation: the old key becomes the previous one ...
    (key_dir / "current").write_text("a fresh key, at least thirty-two bytes long\n")  # ... a new one signs
    after = sign_assignment(scheduler, "uid-2", text)
    assert before.split(".")[1] != after.split(".")[1]  # signed with the new key
    for uid, signature in (("uid-1", before), ("uid-2", after)):
        assert (
            plugin.verify(
                b"\0".join((b"runtimekit.aliyun.com/gpu-assignment/v1", uid.encode(), text.encode())), signature
            )
            == ""
        )
    (key_dir / "previous").unlink()  # the rotation is over
    problem = plugin.verify(b"\0".join((b"runtimekit.aliyun.com/gpu-assignment/v1", b"uid-1", text.encode())), before)
    assert "which is not one of the keys held" in problem
    with pytest.raises(KeyRingError):
        KeyRing.from_secrets(b"too short")

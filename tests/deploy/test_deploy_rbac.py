"""RBAC derived from what the components do: each one runs against the embedded API server behind a
recording proxy (the node daemons as real processes, the scheduler and the controller in-process,
all started from the args and ConfigMaps of deploy/), through the paths that reach the API server
(binding, unschedulable pods, PodGroups, preemption, leader election; Jobs that succeed, fail and
are superseded; a pod patch that conflicts). Every recorded request must be allowed by the Roles and
ClusterRoles bound to the component's ServiceAccount, and every granted verb must have been used,
so the manifests grant exactly what the code calls."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml

from deploy.containers import materialise, parse_args
from deploy.manifests import config_data, containers, documents, other_mounts, render_deploy, workloads
from deploy.recorder import Attributes, RbacPolicy, RecordingProxy
from fixtures.apiserver import http_client, make_node
from fixtures.scheduling import binding
from fixtures.waiting import wait_for
from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.model import Assignment, GpuShare, NodeInventory, NodeName, simulated_uuid
from runtimekit.protocol import KitProtocol
from runtimekit.runtime.simusage import usage_annotations

P = KitProtocol.default()
NODE = "gpu-node-1"


@pytest.fixture(scope="module")
def manifests() -> list[dict[str, Any]]:
    return documents(render_deploy())


def workload(objs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(o for o in workloads(objs) if o["metadata"]["name"] == name)


def policy_of(objs: list[dict[str, Any]], name: str) -> RbacPolicy:
    obj = workload(objs, name)
    account = obj["spec"]["template"]["spec"]["serviceAccountName"]
    return RbacPolicy.for_service_account(objs, obj["metadata"]["namespace"], account)


# Grants only a preset's names use, so a run under the default protocol leaves them unused: the
# `hami.io/vgpu-node` label HAMi's tools read is a pod patch before the binding (the hami e2e tests run
# the components under these grants on `runtimekit up`, where a refusal fails them).
HAMI_ONLY = frozenset({"patch core/pods cluster-wide"})


def assert_exact(policy: RbacPolicy, seen: list[Attributes], preset_only: frozenset[str] = frozenset()) -> None:
    assert seen, "the component made no API request"
    denied = sorted({str(a) for a in seen if not policy.allows(a)})
    unused = sorted({str(g) for g in policy.unused(seen) if str(g).split(" (")[0] not in preset_only})
    assert not denied, "requests the manifests do not allow:\n" + "\n".join(denied)
    assert not unused, "grants no request used (remove them, or drive the code path that needs them):\n" + "\n".join(
        unused
    )


@pytest.fixture
def proxy(apiserver: ApiServer) -> Iterator[RecordingProxy]:
    recorder = RecordingProxy(apiserver.url).start()
    yield recorder
    recorder.stop()


@pytest.fixture
def api(apiserver: ApiServer) -> Iterator[httpx2.Client]:
    """Direct access for the test's own setup (not recorded)."""
    with http_client(apiserver.url) as client:
        yield client


def create(api: httpx2.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = api.post(path, json=body)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def started_args(objs: list[dict[str, Any]], name: str, folder: Path) -> list[str]:
    obj = workload(objs, name)
    return materialise(containers(obj)[0]["args"], config_data(objs, obj), folder, other_mounts(objs, obj))


# -- the scheduler --------------------------------------------------------------------------------


def gpu_node(name: str, gpus: int) -> dict[str, Any]:
    devices = NodeInventory.simulated(name, "H200", gpus).to_annotation()
    return make_node(name, labels={P.labels.gpu_model: "H200"}, annotations={P.annotations.node_devices: devices})


def gpu_pod(name: str, gpus: int, priority_class: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
        "spec": {
            "schedulerName": P.scheduler_name,
            **({"priorityClassName": priority_class} if priority_class else {}),
            "containers": [{"name": "main", "image": "cuda", "resources": {"limits": {P.resources.gpu: str(gpus)}}}],
        },
    }


def test_the_scheduler_is_granted_exactly_what_it_calls(
    manifests: list[dict[str, Any]], proxy: RecordingProxy, api: httpx2.Client, tmp_path: Path
) -> None:
    from runtimekit.cli.scheduler import scheduler_config
    from runtimekit.kube.http import KubeHttp
    from runtimekit.scheduler.build import build_scheduler

    _, args = parse_args(started_args(manifests, "lj-runtimekit-scheduler-framework", tmp_path))
    # the deployed conf with the plugins that read more of the API (their informers are driven too)
    conf = yaml.safe_load(Path(args.config).read_text())
    conf["tiers"][0]["plugins"] += [{"name": "pdb"}, {"name": "resourcequota"}]
    args.config = str(tmp_path / "with-policy-plugins.conf")
    Path(args.config).write_text(yaml.safe_dump(conf))
    config = scheduler_config(args)
    assert config.leader_election.enabled
    assert (config.endpoints.healthz, config.endpoints.metrics) == (":11251", ":8080")
    here = "127.0.0.1:0"  # served, on a free port of this machine
    election = replace(config.leader_election, renew_every=0.2)
    endpoints = replace(config.endpoints, healthz=here, metrics=here)
    config = replace(config, endpoints=endpoints, period=0.02, idle_wakeup=0.5, leader_election=election)
    for name, value in (("low", 10), ("high", 1000)):
        create(api, "/apis/scheduling.k8s.io/v1/priorityclasses", {
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value,
        })  # fmt: skip
    create(api, "/api/v1/nodes", gpu_node(NODE, 1))
    http = KubeHttp.connect(server=proxy.url)
    scheduler = build_scheduler(replace(config, kube=http)).start()
    pods = "/api/v1/namespaces/default/pods"

    def node_of(name: str) -> str | None:
        response = api.get(f"{pods}/{name}")
        return response.json()["spec"].get("nodeName") if response.status_code == 200 else None

    try:
        assert scheduler.synced(10)

        def recorded(resource: str) -> bool:
            return any(a.resource == resource for a in proxy.seen())

        # Never fits (4 GPUs on a 1-GPU node): a FailedScheduling event and the pods/status condition.
        create(api, pods, gpu_pod("too-big", 4, "low"))
        wait_for(lambda: recorded("pods/status") and recorded("events"), what="the unschedulable report")
        # A gang of two 1-GPU pods that cannot all fit: the PodGroup's status (podgroups/status).
        group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                 "metadata": {"name": "gang", "namespace": "default"}, "spec": {"minMember": 2}}  # fmt: skip
        create(api, "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups", group)
        wait_for(lambda: "default/gang" in scheduler.cache.groups, what="the scheduler to see the PodGroup")
        for index in range(2):
            create(api, pods, gpu_pod(f"gang-{index}", 1, "low", {"scheduling.k8s.io/group-name": "gang"}))
        wait_for(lambda: recorded("podgroups/status"), what="the PodGroup status")

        # The queues Volcano always has are created once it leads, then their status written.
        def queue_created() -> bool:
            return any(a.resource == "queues" and a.verb == "create" for a in proxy.seen())

        wait_for(lambda: queue_created() and recorded("queues/status"), what="the default queue and its status")
        # Binds (pods/binding), then a higher-priority pod preempts it (delete pods) and binds.
        create(api, pods, gpu_pod("low", 1, "low"))
        wait_for(lambda: node_of("low") == NODE, what="the low-priority pod to bind")
        create(api, pods, gpu_pod("high", 1, "high"))
        wait_for(lambda: api.get(f"{pods}/low").status_code == 404, what="the preemption of the low-priority pod")
        wait_for(lambda: node_of("high") == NODE, what="the high-priority pod to bind")
        # Volume binding's PreBind: a free volume bound to one claim (update persistentvolumes), the
        # node chosen for the other (update persistentvolumeclaims); no PV controller finishes the
        # binding here, so the pod is deleted once both writes are seen (PreBind stops waiting).
        drive_volume_binding(api, proxy)
        drive_claim_allocation(api, proxy)
    finally:
        scheduler.stop()  # releases the Lease: get and update
        http.close()
    assert_exact(policy_of(manifests, "lj-runtimekit-scheduler-framework"), proxy.seen(), HAMI_ONLY)


def drive_claim_allocation(api: httpx2.Client, proxy: RecordingProxy) -> None:
    """dynamicresources' PreBind: a pod naming a ResourceClaim for a share of a published GPU gets the
    claim allocated and reserved for it (update resourceclaims/status)."""
    driver = "gpu.runtimekit.aliyun.com"
    resources = "/apis/resource.k8s.io/v1"
    create(api, f"{resources}/deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": driver},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
    })  # fmt: skip
    device = {"name": "gpu-0", "allowMultipleAllocations": True, "attributes": {"uuid": {"string": "GPU-dra-0"}},
              "capacity": {"core": {"value": "100"}, "memory": {"value": "80Gi"}}}  # fmt: skip
    create(api, f"{resources}/resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{NODE}-gpu"},
        "spec": {"driver": driver, "nodeName": NODE, "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1},
                 "devices": [device]},
    })  # fmt: skip
    request = {"name": "gpu", "exactly": {"deviceClassName": driver,
               "capacity": {"requests": {"core": "30", "memory": "8Gi"}}}}  # fmt: skip
    create(api, "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "share", "namespace": "default"}, "spec": {"devices": {"requests": [request]}},
    })  # fmt: skip
    pod = gpu_pod("with-claim", 0, "low")
    del pod["spec"]["containers"][0]["resources"]  # the GPU is taken; the claim asks through DRA
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "share"}]
    pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    create(api, "/api/v1/namespaces/default/pods", pod)
    wait_for(
        lambda: any(a.resource == "resourceclaims/status" and a.verb == "update" for a in proxy.seen()),
        what="the claim's allocation written",
    )


def drive_volume_binding(api: httpx2.Client, proxy: RecordingProxy) -> None:
    pods = "/api/v1/namespaces/default/pods"
    claims = "/api/v1/namespaces/default/persistentvolumeclaims"
    create(api, "/apis/storage.k8s.io/v1/storageclasses", {
        "metadata": {"name": "local"}, "provisioner": "example.com/local", "volumeBindingMode": "WaitForFirstConsumer",
    })  # fmt: skip
    volume = create(api, "/api/v1/persistentvolumes", {
        "metadata": {"name": "pv-free"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                 "hostPath": {"path": "/tmp/pv-free"}},
    })  # fmt: skip
    volume["status"] = {"phase": "Available"}  # as the PV controller would (only Available volumes are matched)
    assert api.put("/api/v1/persistentvolumes/pv-free/status", json=volume).status_code == 200
    for name in ("static", "provisioned"):
        create(api, claims, {"metadata": {"name": name}, "spec": {
            "storageClassName": "local", "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        }})  # fmt: skip
    pod = gpu_pod("with-volumes", 0, "low")
    del pod["spec"]["containers"][0]["resources"]  # the GPU is taken; the pod needs none
    pod["spec"]["volumes"] = [
        {"name": name, "persistentVolumeClaim": {"claimName": name}} for name in ("static", "provisioned")
    ]

    def updated(resource: str) -> bool:
        return any(a.resource == resource and a.verb == "update" for a in proxy.seen())

    create(api, pods, pod)
    wait_for(lambda: updated("persistentvolumes") and updated("persistentvolumeclaims"), what="volume binding")
    assert api.delete(f"{pods}/with-volumes").status_code == 200


# -- the controller -------------------------------------------------------------------------------


def test_the_controller_is_granted_exactly_what_it_calls(
    manifests: list[dict[str, Any]], proxy: RecordingProxy, api: httpx2.Client, tmp_path: Path
) -> None:
    from runtimekit.controller.jobs import FileJobTemplate
    from runtimekit.controller.reconciler import ControllerOptions, NodeController
    from runtimekit.controller.server import ControllerServer
    from runtimekit.controller.trigger import LabelTrigger
    from runtimekit.kube.http import KubeHttp
    from runtimekit.kube.lease import LeaderElector
    from runtimekit.protocol import load_protocol

    _, args = parse_args(started_args(manifests, "lj-runtimekit-controller", tmp_path))
    for namespace in (o for o in manifests if o["kind"] == "Namespace"):  # its Jobs' namespace
        create(api, "/api/v1/namespaces", namespace)
    protocol = load_protocol(args.protocol)
    assert args.leader_elect
    http = KubeHttp.connect(server=proxy.url)
    options = ControllerOptions(args.namespace, args.image, success_ttl=0.0, failed_history=0)
    controller = NodeController(http, protocol, LabelTrigger(protocol), FileJobTemplate(args.job_template), options)
    leader = LeaderElector(http, "lj-runtimekit-controller", args.lease_namespace, "test", renew_every=0.2)
    server = ControllerServer(http, controller, leader, resync=0.5).start()
    jobs = f"/apis/batch/v1/namespaces/{args.namespace}/jobs"

    def job_for(node: str) -> dict[str, Any] | None:
        items = api.get(jobs).json()["items"]
        return next((j for j in items if j["spec"]["template"]["spec"]["nodeName"] == node), None)

    def finish(job: dict[str, Any], outcome: str) -> None:
        name = job["metadata"]["name"]
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"{name}-x", "namespace": args.namespace, "labels": {"job-name": name}},
               "spec": {"nodeName": job["spec"]["template"]["spec"]["nodeName"], "restartPolicy": "Never",
                        "containers": [{"name": "job-agent", "image": args.image}]}}  # fmt: skip
        create(api, f"/api/v1/namespaces/{args.namespace}/pods", pod)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        job["status"] = {"conditions": [{"type": outcome, "status": "True", "lastTransitionTime": now}]}
        job["status"]["succeeded" if outcome == "Complete" else "failed"] = 1
        assert api.put(f"{jobs}/{name}/status", json=job).status_code == 200

    def state(node: str) -> bool:
        labels = api.get(f"/api/v1/nodes/{node}").json()["metadata"].get("labels", {})
        return labels.get(protocol.labels.state) in ("enabled", "failed")

    try:
        for node, outcome in (("ok-node", "Complete"), ("bad-node", "Failed")):
            create(api, "/api/v1/nodes", make_node(node, labels={protocol.labels.enable: "true"}))
            job = wait_for(functools.partial(job_for, node), what=f"the Job of {node}")  # create jobs, patch nodes
            finish(job, outcome)  # then: patch nodes, events in default, list pods, delete jobs and pods
            wait_for(functools.partial(state, node), what=f"the state of {node}")
        wait_for(lambda: not api.get(jobs).json()["items"], what="the finished Jobs to be cleaned up")
        create(api, "/api/v1/nodes", make_node("flip-node", labels={protocol.labels.enable: "true"}))
        first = wait_for(lambda: job_for("flip-node"), what="the enable Job")
        api.patch("/api/v1/nodes/flip-node", json={"metadata": {"labels": {protocol.labels.enable: "false"}}},
                  headers={"Content-Type": "application/merge-patch+json"})  # fmt: skip
        wait_for(lambda: (job_for("flip-node") or first)["metadata"]["name"] != first["metadata"]["name"],
                 what="the superseded Job to be replaced")  # fmt: skip
    finally:
        server.stop()
        http.close()
    seen = proxy.seen()
    assert any(a.resource == "events" and a.namespace == "default" for a in seen)
    assert_exact(policy_of(manifests, "lj-runtimekit-controller"), seen)


# -- the node daemons -------------------------------------------------------------------------------


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="rk-rbac-"))  # unix socket paths must stay short
    yield path
    shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def daemon(args: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "runtimekit.cli.main", *args],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "KUBERNETES_SERVICE_HOST": ""},
    )
    try:
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


OVER_SHARE = usage_annotations(P.annotations.simulated_runtime)[1]


def over_share_counted(client: RuntimeClient, proxy: RecordingProxy) -> bool:
    client.exporter_data()  # each reading checks the containers' usage against their shares
    return any(a.resource == "events" and a.verb == "patch" for a in proxy.seen())


def test_the_node_daemons_are_granted_exactly_what_they_call(
    manifests: list[dict[str, Any]], apiserver: ApiServer, api: httpx2.Client, short_dir: Path
) -> None:
    from runtimekit.base.keyring import KeyRing
    from runtimekit.cluster.kubelet.devicemanager import DeviceManager
    from runtimekit.cluster.kubelet.podresources import serve_pod_resources

    runtime_proxy = RecordingProxy(apiserver.url).start()
    plugin_proxy = RecordingProxy(apiserver.url).start()
    create(api, "/api/v1/nodes", make_node(NODE))
    plugins = short_dir / "plugins"
    kubelet = DeviceManager(plugins).start()
    pod_resources = serve_pod_resources(kubelet, short_dir / "pr.sock")
    socket = short_dir / "rt.sock"
    runtime_args = [
        *started_args(manifests, "lj-runtimekit-runtime-ds", short_dir / "runtime-config"),
        "--backend=simulated",
        "--simulate-gpus=2xA100-80GB",
        f"--socket={socket}",
        f"--state-dir={short_dir / 'state'}",
        f"--node-name={NODE}",
        f"--kubeconfig={runtime_proxy.url}",
        "--pod-resources-socket=",
        f"--mps-pipe-dir={short_dir / 'mps'}",
        f"--mps-log-dir={short_dir / 'mps-log'}",
        "--reconcile-interval=0.2",
        "--share-event-interval=0",
    ]
    plugin_args = [
        *started_args(manifests, "lj-runtimekit-device-plugin-ds", short_dir / "plugin-config"),
        f"--runtime-socket={socket}",
        f"--plugin-dir={plugins}",
        f"--node-name={NODE}",
        f"--kubeconfig={plugin_proxy.url}",
        "--startup-timeout=30",
        f"--pod-resources-socket={short_dir / 'pr.sock'}",
    ]
    keys = KeyRing.from_folder(short_dir / "plugin-config" / "assignment-key")
    # The first mark-allocated patch conflicts, as when the pod changed meanwhile: the plugin reads it again.
    plugin_proxy.fail_once("PATCH", r"/api/v1/namespaces/default/pods/trainer$")
    try:
        with (
            daemon(runtime_args, short_dir / "runtime.log"),
            daemon(plugin_args, short_dir / "plugin.log") as plugin,
        ):
            full = {P.resources.gpu: 2, P.resources.core: 200, P.resources.memory: 160}
            assert kubelet.wait_for(lambda k: k.capacity() == full, timeout_s=30), (
                short_dir / "plugin.log"
            ).read_text()
            gpu = simulated_uuid(NODE, 1)
            assignment = Assignment(NodeName(NODE), {"main": (GpuShare(gpu, 1, 500, 20480),)})
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "trainer", "namespace": "default", "annotations": {OVER_SHARE: "30Gi"}},
                "spec": {"containers": [{"name": "main", "image": "cuda:12",
                         "resources": {"limits": {P.resources.core: "50", P.resources.memory: "20"}}}]},
            }  # fmt: skip
            path, body = binding(create(api, "/api/v1/namespaces/default/pods", pod), NODE, assignment, keys)
            assert api.post(path, json=body).status_code == 201
            kubelet.admit_pod(api.get("/api/v1/namespaces/default/pods/trainer").json())
            assert plugin_proxy.injected, "the conflict was never injected"
            wait_for(lambda: any(a.verb == "list" for a in runtime_proxy.seen()), what="the runtime to reconcile")
            assert plugin.poll() is None
            # The pod uses more GPU memory than granted (simulated usage): a GPUShareExceeded Event, then counted
            with RuntimeClient(str(socket)) as client:
                wait_for(lambda: over_share_counted(client, runtime_proxy), what="the over-share Event counted")
        # The runtime loses its checkpoint: restarted, it rebuilds the running pod's allocation and says so
        for name in ("checkpoint.json", "checkpoint.journal"):
            (short_dir / "state" / name).unlink(missing_ok=True)
        with daemon(runtime_args, short_dir / "runtime-again.log"):
            wait_for(lambda: any(a.resource == "events" for a in runtime_proxy.seen()), what="the rebuilt pod's Event")
    finally:
        pod_resources.stop(0).wait()
        kubelet.stop()
        runtime_proxy.stop()
        plugin_proxy.stop()
    assert_exact(policy_of(manifests, "lj-runtimekit-runtime-ds"), runtime_proxy.seen())
    assert_exact(policy_of(manifests, "lj-runtimekit-device-plugin-ds"), plugin_proxy.seen())


def test_the_exporter_has_no_api_access(manifests: list[dict[str, Any]]) -> None:
    obj = workload(manifests, "lj-runtimekit-exporter-ds")
    assert obj["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    assert policy_of(manifests, "lj-runtimekit-exporter-ds").grants == []


# -- the recorder's own rules -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/pods", (), "list core/pods"),
        ("GET", "/api/v1/pods", (("watch", "true"),), "watch core/pods"),
        ("GET", "/api/v1/namespaces/ns/pods/p", (), "get core/pods p in ns"),
        ("POST", "/api/v1/namespaces/ns/pods/p/binding", (), "create core/pods/binding p in ns"),
        ("PATCH", "/api/v1/nodes/n", (), "patch core/nodes n"),
        ("DELETE", "/apis/batch/v1/namespaces/ns/jobs", (), "deletecollection batch/jobs in ns"),
        ("PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", (), "update coordination.k8s.io/leases l in ns"),
        ("GET", "/api/v1/namespaces/ns", (), "get core/namespaces ns in ns"),  # as k8s: the namespace is its own
        ("PUT", "/api/v1/namespaces/ns/finalize", (), "update core/namespaces/finalize ns in ns"),
        ("GET", "/api/v1/watch/namespaces/ns/pods", (), "watch core/pods in ns"),
    ],
)
def test_requests_map_to_authorizer_attributes(
    method: str, path: str, query: tuple[tuple[str, str], ...], expected: str
) -> None:
    from deploy.recorder import Recorded, attributes

    assert str(attributes(Recorded(method, path, query))) == expected
    assert attributes(Recorded("GET", "/version", ())) is None

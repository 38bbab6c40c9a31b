"""The simulated kubelet's containers as users' tools see them, with the real kubectl against the
in-process API server: the Events kubelet writes (Pulling, Pulled, Created, Started, Killing,
BackOff), commands that finish (a Job completes) or keep running, restarts by restartPolicy with
CrashLoopBackOff, `kubectl logs` (container, --previous, --tail, --timestamps, -f) and `kubectl exec`
refused at once. Back-off and start-up delays are shortened (KubeletOptions) so it runs fast."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fixtures.apiserver import Kubectl
from fixtures.scheduling import bind
from fixtures.waiting import wait_for
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.cluster.jobs import JobController
from runtimekit.cluster.kubelet.devices import DirectDevices
from runtimekit.cluster.kubelet.kubelet import KubeletOptions, SimulatedKubelet
from runtimekit.cluster.kubelet.nodestatus import NodeShape
from runtimekit.kube.errors import KubeError
from runtimekit.kube.http import KubeHttp
from runtimekit.model import Assignment, GpuShare, NodeInventory, NodeName, simulated_uuid
from runtimekit.protocol import KitProtocol

P = KitProtocol.default()
NODE = "node-1"
PODS = "/api/v1/namespaces/default/pods"


@pytest.fixture
def apiserver(request: pytest.FixtureRequest) -> Iterator[ApiServer]:
    """The suite's API server, reporting the Kubernetes version a test parametrizes (default 1.31)."""
    server = ApiServer(bookmark_interval=0.2, seed=1234, kubernetes_version=getattr(request, "param", "1.31")).start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def http(apiserver: ApiServer, tmp_path: Path) -> Iterator[KubeHttp]:
    kube = KubeHttp.connect(server=apiserver.url)
    devices = DirectDevices(NodeInventory.simulated(NODE, "T4", 2), P)
    options = KubeletOptions(NodeShape(NODE), P, None, tmp_path, run_s=0.1, backoff_s=0.3)
    kubelet = SimulatedKubelet(KubeHttp.connect(server=apiserver.url), devices, options)
    apiserver.add_kubelet_hook(kubelet)
    kubelet.start()
    jobs = JobController(KubeHttp.connect(server=apiserver.url)).start()
    assert jobs.synced(10)
    yield kube
    jobs.stop()
    apiserver.remove_kubelet_hook(kubelet)
    kubelet.stop()
    kube.close()


def pod(name: str, command: list[str] | None = None, restart: str = "Always", **container: Any) -> str:
    spec: dict[str, Any] = {"name": "main", "image": "busybox:1.36", **container}
    if command is not None:
        spec["command"] = command
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"nodeName": NODE, "restartPolicy": restart, "containers": [spec]},
    }
    return json.dumps(body)


def status(http: KubeHttp, name: str) -> dict[str, Any]:
    """The pod's status (read with the test's client: polling with kubectl would cost a process a try)."""
    got: dict[str, Any] = http.get(f"{PODS}/{name}").get("status") or {}
    return got


def reasons(http: KubeHttp, name: str) -> list[tuple[str, str, str]]:
    items = http.list("/api/v1/namespaces/default/events", {"fieldSelector": f"involvedObject.name={name}"})[0]
    return [(e["type"], e["reason"], e["message"]) for e in items]


@pytest.mark.parametrize("apiserver", ["1.31", "1.33"], indirect=True)
def test_a_server_runs_with_kubelets_events_and_stops_with_killing(
    apiserver: ApiServer, http: KubeHttp, kubectl: Kubectl
) -> None:
    """kubelet 1.33 words Created and Started `Created container: NAME`, earlier ones `Created container NAME`."""
    minor = str(apiserver.version.minor)
    kubectl("apply", "-f", "-", stdin=pod("web", image="nginx:1.25"))
    wait_for(lambda: status(http, "web").get("phase") == "Running", what="web running")
    sep = ": " if minor == "33" else " "
    pulled = 'Successfully pulled image "nginx:1.25" in 1s (1s including waiting). Image size: 4194304 bytes.'
    expected = [
        ("Normal", "Pulling", 'Pulling image "nginx:1.25"'),
        ("Normal", "Pulled", pulled),
        ("Normal", "Created", f"Created container{sep}main"),
        ("Normal", "Started", f"Started container{sep}main"),
    ]
    wait_for(lambda: all(e in reasons(http, "web") for e in expected), what="kubelet's events")
    events = http.list("/api/v1/namespaces/default/events", {"fieldSelector": "involvedObject.name=web"})[0]
    started = next(e for e in events if e["reason"] == "Started")
    assert (started["involvedObject"]["fieldPath"], started["source"]) == (
        "spec.containers{main}",
        {"component": "kubelet", "host": NODE},
    )
    time.sleep(0.5)
    assert status(http, "web")["containerStatuses"][0]["state"].get("running"), "a server keeps running"
    kubectl("delete", "pod", "web", "--wait=true", "--timeout=30s")
    wait_for(lambda: ("Normal", "Killing", "Stopping container main") in reasons(http, "web"), what="Killing")


def test_an_image_already_on_the_node_is_not_pulled_again(http: KubeHttp, kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", stdin=pod("first"))
    kubectl("apply", "-f", "-", stdin=pod("second"))
    wait_for(lambda: len([r for r in reasons(http, "second") if r[1] == "Started"]) == 1, what="second started")
    pulled = {n: [r[2] for r in reasons(http, n) if r[1] == "Pulled"] for n in ("first", "second")}
    messages = sorted(pulled["first"] + pulled["second"])
    assert messages[0] == 'Container image "busybox:1.36" already present on machine', pulled
    assert messages[1].startswith('Successfully pulled image "busybox:1.36"'), pulled


def test_a_job_that_echoes_completes_and_its_log_shows_the_output(http: KubeHttp, kubectl: Kubectl) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "once"},
        "spec": {
            "template": {
                "spec": {
                    "nodeName": NODE,
                    "restartPolicy": "Never",
                    "containers": [{"name": "once", "image": "busybox", "command": ["echo", "hi"]}],
                }
            }
        },
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(job))
    done = kubectl("wait", "--for=condition=complete", "job/once", "--timeout=30s")
    assert "condition met" in done.stdout
    assert kubectl("logs", "job/once").stdout == "hi\n"
    [item] = json.loads(kubectl("get", "pods", "-l", "job-name=once", "-o", "json").stdout)["items"]
    terminated = item["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (item["status"]["phase"], terminated["exitCode"], terminated["reason"]) == ("Succeeded", 0, "Completed")


def test_exit_code_and_restart_policy_never(http: KubeHttp, kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", stdin=pod("fails", ["sh", "-c", "echo oops; exit 3"], restart="Never"))
    wait_for(lambda: status(http, "fails").get("phase") == "Failed", what="fails failed")
    terminated = status(http, "fails")["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (3, "Error")
    assert kubectl("logs", "fails").stdout == "oops\n"


def test_restart_always_backs_off_and_keeps_the_previous_log(http: KubeHttp, kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", stdin=pod("crash", ["sh", "-c", "echo $HOSTNAME; exit 1"]))

    def backing_off() -> bool:
        got = (status(http, "crash").get("containerStatuses") or [{"state": {}, "restartCount": 0}])[0]
        waiting = got["state"].get("waiting") or {}
        return got["restartCount"] >= 1 and waiting.get("reason") == "CrashLoopBackOff"

    wait_for(backing_off, what="CrashLoopBackOff")
    assert status(http, "crash")["phase"] == "Running"
    wait_for(lambda: "CrashLoopBackOff" in kubectl("get", "pod", "crash", "--no-headers").stdout, what="the row")
    assert kubectl("logs", "crash", "--previous").stdout == "crash\n"

    def back_offs() -> list[dict[str, Any]]:
        events = http.list("/api/v1/namespaces/default/events", {"fieldSelector": "involvedObject.name=crash"})[0]
        return [e for e in events if e["reason"] == "BackOff"]

    counted = wait_for(lambda: (found := back_offs()) and found[0]["count"] >= 2 and found, what="BackOff counted up")
    assert len(counted) == 1, "a repeated Event counts up on the first, as kubelet's correlator does"
    back_off = [r for r in reasons(http, "crash") if r[1] == "BackOff"]
    uid = json.loads(kubectl("get", "pod", "crash", "-o", "json").stdout)["metadata"]["uid"]
    assert back_off[0] == (
        "Warning",
        "BackOff",
        f"Back-off restarting failed container main in pod crash_default({uid})",
    )


def test_restart_on_failure_ends_on_success(http: KubeHttp, kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", stdin=pod("ok", ["sleep", "0.2"], restart="OnFailure"))
    wait_for(lambda: status(http, "ok").get("phase") == "Succeeded", what="ok succeeded")
    assert status(http, "ok")["containerStatuses"][0]["restartCount"] == 0


def test_logs_options_as_kubectl_sends_them(http: KubeHttp, kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", stdin=pod("talk", ["sh", "-c", "echo one; echo two; echo three"], restart="Never"))
    wait_for(lambda: status(http, "talk").get("phase") == "Succeeded", what="talk done")
    assert kubectl("logs", "talk", "--tail=2").stdout == "two\nthree\n"
    assert kubectl("logs", "talk", "-c", "main", "--limit-bytes=3").stdout == "one"
    stamped = kubectl("logs", "talk", "--timestamps").stdout.splitlines()
    assert [line.split(" ", 1)[1] for line in stamped] == ["one", "two", "three"]
    assert stamped[0].split(" ")[0].endswith("Z")
    assert kubectl("logs", "talk", "-f").stdout == "one\ntwo\nthree\n"
    wrong = kubectl("logs", "talk", "-c", "nope", check=False)
    assert (wrong.returncode, wrong.stderr.strip()) == (1, "error: container nope is not valid for pod talk")
    none = kubectl("logs", "talk", "--previous", check=False)
    assert 'previous terminated container "main" in pod "talk" not found' in none.stderr


def test_logs_of_a_pod_with_two_containers_need_a_name(http: KubeHttp, kubectl: Kubectl) -> None:
    body = json.loads(pod("two", ["sleep", "infinity"]))
    body["spec"]["containers"].append({"name": "side", "image": "busybox:1.36", "command": ["sleep", "infinity"]})
    kubectl("apply", "-f", "-", stdin=json.dumps(body))
    wait_for(lambda: status(http, "two").get("phase") == "Running", what="two running")
    with pytest.raises(KubeError) as refused:
        http.get(f"{PODS}/two/log")
    assert refused.value.code == 400
    assert "a container name must be specified for pod two, choose one of: [main side]" in str(refused.value)
    assert kubectl("logs", "two", "-c", "side").stdout == ""
    defaulted = kubectl("logs", "two")  # kubectl picks the first container itself, and says so
    assert 'Defaulted container "main" out of: main, side' in defaulted.stderr


def test_exec_says_containers_are_simulated_at_once(http: KubeHttp, kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", stdin=pod("shell"))
    wait_for(lambda: status(http, "shell").get("phase") == "Running", what="shell running")
    started = time.monotonic()
    done = kubectl("exec", "shell", "--", "ls", check=False, timeout=20)
    assert done.returncode != 0
    assert "simulated" in done.stderr, done.stderr
    assert time.monotonic() - started < 10


def test_gpu_environment_is_the_first_log_line(http: KubeHttp, kubectl: Kubectl) -> None:
    body = json.loads(pod("gpu", ["sh", "-c", "echo trained"], restart="Never"))
    del body["spec"]["nodeName"]
    share = GpuShare(simulated_uuid(NODE, 0), 0, 500, 4096)
    bind(http.post, http.post(PODS, body), NODE, Assignment(NodeName(NODE), {"main": (share,)}), None)
    wait_for(lambda: status(http, "gpu").get("phase") in ("Succeeded", "Failed"), what="gpu done")
    first, second = kubectl("logs", "gpu").stdout.splitlines()
    assert first == f"[runtimekit] simulated container main: NVIDIA_VISIBLE_DEVICES={simulated_uuid(NODE, 0)}"
    assert second == "trained"


def test_logs_follow_streams_until_the_container_ends(http: KubeHttp, kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", stdin=pod("slow", ["sh", "-c", "echo a; sleep 1; echo b"], restart="Never"))
    wait_for(lambda: status(http, "slow").get("phase") == "Running", what="slow running")
    started = time.monotonic()
    assert kubectl("logs", "-f", "slow").stdout == "a\nb\n"
    assert time.monotonic() - started > 0.5, "followed until the second line was printed"
    missing = kubectl("logs", "nope-pod", check=False)
    expected = 'error: error from server (NotFound): pods "nope-pod" not found in namespace "default"'
    assert missing.stderr.strip() == expected


def test_logs_of_a_container_waiting_for_its_volume(http: KubeHttp, kubectl: Kubectl) -> None:
    body = json.loads(pod("held"))
    body["spec"]["volumes"] = [{"name": "conf", "configMap": {"name": "settings"}}]
    kubectl("apply", "-f", "-", stdin=json.dumps(body))
    message = 'MountVolume.SetUp failed for volume "conf" : configmap "settings" not found'
    wait_for(lambda: ("Warning", "FailedMount", message) in reasons(http, "held"), what="FailedMount")
    refused = kubectl("logs", "held", check=False)
    assert (
        refused.stderr.strip()
        == 'Error from server (BadRequest): container "main" in pod "held" is waiting to start: ContainerCreating'
    )
    kubectl("create", "configmap", "settings", "--from-literal=a=b")
    wait_for(lambda: status(http, "held").get("phase") == "Running", what="held running")
    wait_for(lambda: [r[1] for r in reasons(http, "held")].count("Started") == 1, what="held started once")

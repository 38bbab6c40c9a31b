"""The embedded cluster's Job controller, with a direct-mode simulated kubelet whose container runner
answers from a script: pods from the template, retries within backoffLimit, the deadline, Job
status and conditions, and pods deleted with their Job (or orphaned) by the garbage collector."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from fixtures.waiting import wait_for
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.cluster.controllers.garbagecollector import GarbageCollector
from runtimekit.cluster.controllers.manager import ControllerManager
from runtimekit.cluster.jobs import JobController
from runtimekit.cluster.kubelet.devices import DirectDevices
from runtimekit.cluster.kubelet.kubelet import KubeletOptions, SimulatedKubelet
from runtimekit.cluster.kubelet.nodestatus import NodeShape
from runtimekit.cluster.kubelet.runner import NodeContext
from runtimekit.kube.errors import KubeError
from runtimekit.kube.http import KubeHttp
from runtimekit.model import NodeInventory
from runtimekit.protocol import KitProtocol

P = KitProtocol.default()
NODE = "job-node"
NS = "default"
JOBS = f"/apis/batch/v1/namespaces/{NS}/jobs"
PODS = f"/api/v1/namespaces/{NS}/pods"


class ScriptedRunner:
    """Answers each run with the next exit code of the script (the last one repeats)."""

    def __init__(self) -> None:
        self.codes: list[int] = [0]
        self.runs = 0
        self.lock = threading.Lock()

    def __call__(self, pod: Mapping[str, Any], container: Mapping[str, Any], node: NodeContext) -> tuple[int, str]:
        with self.lock:
            code = self.codes[min(self.runs, len(self.codes) - 1)]
            self.runs += 1
        return code, f"run {self.runs}: exit {code}"


@pytest.fixture
def runner() -> ScriptedRunner:
    return ScriptedRunner()


@pytest.fixture
def http(apiserver: ApiServer, runner: ScriptedRunner, tmp_path: Path) -> Iterator[KubeHttp]:
    kube = KubeHttp.connect(server=apiserver.url)
    devices = DirectDevices(NodeInventory.simulated(NODE, "T4", 1), P)
    kubelet = SimulatedKubelet(kube, devices, KubeletOptions(NodeShape(NODE), P, None, tmp_path), runner)
    apiserver.add_kubelet_hook(kubelet)
    kubelet.start()
    jobs = JobController(KubeHttp.connect(server=apiserver.url)).start()
    collector = ControllerManager(KubeHttp.connect(server=apiserver.url), [GarbageCollector]).start()
    assert jobs.synced(10)
    assert collector.synced(10)
    yield kube
    collector.stop()
    jobs.stop()
    kubelet.stop()
    kube.close()


def job(name: str, command: list[str] | None = None, **spec: Any) -> dict[str, Any]:
    container = {"name": "work", "image": "runtimekit", "command": command or ["runtimekit", "protocol", "show"]}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            **spec,
            "template": {
                "metadata": {"labels": {"app": "demo"}},
                "spec": {"nodeName": NODE, "restartPolicy": "Never", "containers": [container]},
            },
        },
    }


def finished(http: KubeHttp, name: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        got = http.get(f"{JOBS}/{name}")
        conditions = got.get("status", {}).get("conditions") or []
        return got if any(c["type"] in ("Complete", "Failed") for c in conditions) else None

    return dict(wait_for(check, what=f"job {name} finished"))


def pods_of(http: KubeHttp, name: str) -> list[dict[str, Any]]:
    return http.list(PODS, {"labelSelector": f"job-name={name}"})[0]


def test_a_job_runs_its_pod_to_completion(http: KubeHttp) -> None:
    created = http.post(JOBS, job("once"))
    done = finished(http, "once")
    status = done["status"]
    assert (status["succeeded"], status["failed"], status["active"]) == (1, 0, 0)
    assert status["startTime"]
    assert status["completionTime"]
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [("Complete", "True")]
    [pod] = pods_of(http, "once")
    meta = pod["metadata"]
    assert meta["name"].startswith("once-")
    created_uid = created["metadata"]["uid"]
    assert meta["labels"]["controller-uid"] == created_uid
    assert meta["labels"]["app"] == "demo"
    owner = meta["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Job",
        "once",
        meta["labels"]["controller-uid"],
        True,
    )
    assert pod["status"]["phase"] == "Succeeded"


def test_failed_pods_are_retried_within_the_backoff_limit(http: KubeHttp, runner: ScriptedRunner) -> None:
    runner.codes = [1, 1, 0]
    http.post(JOBS, job("retry", backoffLimit=3))
    status = finished(http, "retry")["status"]
    assert (status["succeeded"], status["failed"]) == (1, 2)
    assert [c["type"] for c in status["conditions"]] == ["Complete"]
    phases = sorted(p["status"]["phase"] for p in pods_of(http, "retry"))
    assert phases == ["Failed", "Failed", "Succeeded"]


def test_a_job_fails_past_its_backoff_limit(http: KubeHttp, runner: ScriptedRunner) -> None:
    runner.codes = [1]
    http.post(JOBS, job("hopeless", backoffLimit=1))
    status = finished(http, "hopeless")["status"]
    [condition] = status["conditions"]
    assert (condition["type"], condition["reason"]) == ("Failed", "BackoffLimitExceeded")
    assert condition["message"] == "Job has reached the specified backoff limit"
    assert (status["failed"], status["succeeded"], status["active"]) == (2, 0, 0)
    messages = [
        p["status"]["containerStatuses"][0]["state"]["terminated"]["message"] for p in pods_of(http, "hopeless")
    ]
    assert all(m.endswith("exit 1") for m in messages)


def test_a_job_past_its_deadline_fails_and_its_pods_go(http: KubeHttp) -> None:
    http.post(JOBS, job("slow", command=["sleep", "infinity"], activeDeadlineSeconds=2))
    wait_for(lambda: pods_of(http, "slow"), what="the job's pod")  # (a busy machine may not see it Running first)
    status = finished(http, "slow")["status"]
    assert [(c["type"], c["reason"]) for c in status["conditions"]] == [("Failed", "DeadlineExceeded")]
    wait_for(lambda: not pods_of(http, "slow"), what="the job's pods deleted")


def test_deleting_a_job_deletes_its_pods(http: KubeHttp) -> None:
    http.post(JOBS, job("forever", command=["sleep", "infinity"], parallelism=2, completions=2))
    wait_for(lambda: len(pods_of(http, "forever")) == 2, what="two pods")
    assert http.get(f"{JOBS}/forever")["status"]["active"] == 2
    http.delete(f"{JOBS}/forever", {"propagationPolicy": "Background"})
    wait_for(lambda: not pods_of(http, "forever"), what="the pods garbage-collected")
    with pytest.raises(KubeError):
        http.get(f"{JOBS}/forever")


def test_orphan_deletion_keeps_the_pods_without_their_owner(http: KubeHttp) -> None:
    http.post(JOBS, job("kept", command=["sleep", "infinity"]))
    wait_for(lambda: pods_of(http, "kept"), what="the job's pod")
    http.delete(f"{JOBS}/kept", {"propagationPolicy": "Orphan"})

    def gone() -> bool:
        try:
            http.get(f"{JOBS}/kept")
        except KubeError as exc:
            return exc.code == 404
        return False

    wait_for(gone, what="the job deleted once its pods are orphaned")
    [pod] = pods_of(http, "kept")
    assert not pod["metadata"].get("ownerReferences")
    assert not pod["metadata"].get("deletionTimestamp")

"""The node controller against the embedded API server and real runtimes (simulated GPUs) on unix
sockets. A small stand-in plays the Job controller and kubelet: it runs each Job's job-agent
against the runtime of the Job's node and writes the Job's outcome (and a failed pod's
termination message) back, as they would."""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fixtures.waiting import wait_for
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.controller.agent import AgentError, switch
from runtimekit.controller.jobs import DONE_ANNOTATION, REQUEST_ANNOTATION, JobTemplate
from runtimekit.controller.reconciler import ControllerOptions, NodeController
from runtimekit.controller.server import ControllerServer
from runtimekit.controller.trigger import LabelTrigger
from runtimekit.kube.errors import KubeError
from runtimekit.kube.http import KubeHttp
from runtimekit.protocol import KitProtocol
from runtimekit.runtime.daemon import RuntimeDaemon
from runtimekit.runtime.isolation import make_isolation
from runtimekit.runtime.mps import CommandResult, MpsDaemon
from runtimekit.runtime.service import NodeRuntime
from runtimekit.runtime.simulated import SimulatedBackend, parse_gpu_spec
from runtimekit.runtime.values import RuntimeSettings

P = KitProtocol.default()
NS = "kube-system"
JOBS = f"/apis/batch/v1/namespaces/{NS}/jobs"


class JobRunner:
    """Runs controller Jobs: the job-agent against the node's runtime, then the Job's status."""

    def __init__(self, http: KubeHttp, sockets: dict[str, str]) -> None:
        self.http, self.sockets = http, sockets
        self.paused = threading.Event()
        self.ran: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> JobRunner:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _loop(self) -> None:
        while not self._stop.wait(0.05):
            if self.paused.is_set():
                continue
            for job in self.http.list(JOBS)[0]:
                if job.get("status", {}).get("conditions") or job["metadata"]["name"] in self.ran:
                    continue
                self._run(job)

    def _run(self, job: dict[str, Any]) -> None:
        name = job["metadata"]["name"]
        self.ran.append(name)
        spec = job["spec"]["template"]["spec"]
        command = spec["containers"][0]["command"]
        action = command[command.index("--action") + 1]
        socket = self.sockets.get(spec["nodeName"], "/nonexistent/runtime.sock")
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        try:
            switch(socket, action, timeout=3)
            exit_code, message, condition = 0, "", {"type": "Complete", "status": "True", "lastTransitionTime": now}
            status = {"succeeded": 1, "completionTime": now}
        except AgentError as exc:
            exit_code, message = 1, f"job-agent: {action} failed: {exc}"
            condition = {
                "type": "Failed",
                "status": "True",
                "reason": "BackoffLimitExceeded",
                "lastTransitionTime": now,
            }
            status = {"failed": 1}
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{name}-x", "namespace": NS, "labels": {"job-name": name}},
            "spec": {"nodeName": spec["nodeName"], "containers": [{"name": "job-agent", "image": "x"}]},
        }
        try:
            self.http.post(f"/api/v1/namespaces/{NS}/pods", pod)
            self.http.patch(
                f"/api/v1/namespaces/{NS}/pods/{name}-x/status",
                {
                    "status": {
                        "phase": "Succeeded" if exit_code == 0 else "Failed",
                        "containerStatuses": [
                            {
                                "name": "job-agent",
                                "ready": False,
                                "restartCount": 0,
                                "image": "x",
                                "imageID": "",
                                "state": {"terminated": {"exitCode": exit_code, "message": message}},
                            }
                        ],
                    }
                },
            )
            self.http.patch(f"{JOBS}/{name}/status", {"status": {**status, "conditions": [condition]}})
        except KubeError:
            pass  # the Job was cancelled meanwhile


def runtime(state: Path, socket: str, mps_fails: bool = False) -> RuntimeDaemon:
    backend = SimulatedBackend("n", parse_gpu_spec("2xH200"))
    settings = RuntimeSettings("n", state, P, "0.1.0", 30.0)
    mps = None
    isolation = "none"
    if mps_fails:
        isolation = "mps"
        mps = MpsDaemon(
            str(state / "pipe"),
            str(state / "log"),
            which=lambda _: "/usr/bin/nvidia-cuda-mps-control",
            runner=lambda argv, stdin, env: CommandResult(1, "MPS control daemon: no GPU found"),
        )
    service = NodeRuntime(settings, backend, make_isolation(isolation), mps=mps)
    return RuntimeDaemon(service, socket, reconcile_interval_s=0).start()


@pytest.fixture
def cluster(apiserver: ApiServer) -> Iterator[tuple[KubeHttp, JobRunner, dict[str, str]]]:
    folder = Path(tempfile.mkdtemp(prefix="rkc-"))
    http = KubeHttp.connect(server=apiserver.url)
    daemons = {}
    sockets = {}
    for name, fails in (("good", False), ("bad", True)):
        sockets[name] = str(folder / f"{name}.sock")
        daemons[name] = runtime(folder / name, sockets[name], mps_fails=fails)
        http.post(
            "/api/v1/nodes",
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name},
                "spec": {"taints": [{"key": "gpu", "value": "only", "effect": "NoSchedule"}]},
            },
        )
    runner = JobRunner(http, sockets).start()
    yield http, runner, sockets
    runner.stop()
    for daemon in daemons.values():
        daemon.stop()
    http.close()
    shutil.rmtree(folder, ignore_errors=True)


def controller(http: KubeHttp, ttl: float = 30.0, history: int = 3) -> ControllerServer:
    options = ControllerOptions(NS, "example/runtimekit:test", success_ttl=ttl, failed_history=history)
    node_controller = NodeController(http, P, LabelTrigger(P), JobTemplate(), options)
    server = ControllerServer(http, node_controller, resync=0.5).start()
    assert server.synced(10)
    return server


def label(http: KubeHttp, node: str, value: str | None) -> None:
    http.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {P.labels.enable: value}}})


def state(http: KubeHttp, node: str) -> str | None:
    return http.get(f"/api/v1/nodes/{node}")["metadata"].get("labels", {}).get(P.labels.state)


def jobs(http: KubeHttp) -> list[str]:
    return sorted(j["metadata"]["name"] for j in http.list(JOBS)[0])


def test_enable_then_disable(cluster: tuple[KubeHttp, JobRunner, dict[str, str]]) -> None:
    http, _runner, sockets = cluster
    server = controller(http)
    try:
        label(http, "good", "true")
        wait_for(lambda: state(http, "good") == "enabled", what="enabled")
        (name,) = jobs(http)
        job = http.get(f"{JOBS}/{name}")
        pod = job["spec"]["template"]["spec"]
        assert pod["nodeName"] == "good"
        assert pod["tolerations"] == [{"key": "gpu", "effect": "NoSchedule", "operator": "Equal", "value": "only"}]
        assert pod["volumes"][0]["hostPath"]["path"] == "/run/lj-runtimekit"
        assert pod["containers"][0]["command"][:4] == ["runtimekit", "job-agent", "--action", "enable"]
        label(http, "good", "false")
        wait_for(lambda: state(http, "good") == "disabled", what="disabled")
        from runtimekit.api.runtime_client import RuntimeClient

        with RuntimeClient(sockets["good"]) as client:
            assert client.status().enabled is False
        events = http.get("/api/v1/namespaces/default/events")["items"]
        assert {e["reason"] for e in events} == {"RuntimeEnabled", "RuntimeDisabled"}
    finally:
        server.stop()


def test_a_runtime_that_refuses_leaves_the_node_failed_with_an_event(
    cluster: tuple[KubeHttp, JobRunner, dict[str, str]],
) -> None:
    http, _, _ = cluster
    server = controller(http)
    try:
        label(http, "bad", "true")
        wait_for(lambda: state(http, "bad") == "failed", what="failed")
        (event,) = wait_for(
            lambda: [
                e
                for e in http.get("/api/v1/namespaces/default/events")["items"]
                if e["reason"] == "RuntimeSwitchFailed"
            ],
            what="event",
        )
        assert event["involvedObject"]["name"] == "bad"
        assert "MPS control daemon failed" in event["message"]
        assert len(jobs(http)) == 1  # failed Jobs are kept for inspection
    finally:
        server.stop()


def test_label_flapping_runs_one_job_per_change_and_the_last_wins(
    cluster: tuple[KubeHttp, JobRunner, dict[str, str]],
) -> None:
    http, runner, _ = cluster
    runner.paused.set()
    server = controller(http)
    try:
        for value in ("true", "false", "true"):
            label(http, "good", value)
            wait_for(
                lambda v=value: (
                    http.get("/api/v1/nodes/good")["metadata"]
                    .get("annotations", {})
                    .get(REQUEST_ANNOTATION, "")
                    .endswith("enable" if v == "true" else "disable")
                ),
                what=value,
            )
        # one list per check: between two reads the controller may delete the job the first one saw
        wait_for(
            lambda: len(names := jobs(http)) == 1 and names[0].startswith("lj-runtimekit-enable-"),
            what="one job",
        )
        request = http.get("/api/v1/nodes/good")["metadata"]["annotations"][REQUEST_ANNOTATION]
        assert request == "3:enable"
        assert jobs(http) == ["lj-runtimekit-enable-good-3"]
        runner.paused.clear()
        wait_for(lambda: state(http, "good") == "enabled", what="enabled")
        assert runner.ran == ["lj-runtimekit-enable-good-3"]
    finally:
        server.stop()


def test_a_restarted_controller_makes_no_duplicate(cluster: tuple[KubeHttp, JobRunner, dict[str, str]]) -> None:
    http, runner, _ = cluster
    runner.paused.set()
    first = controller(http)
    label(http, "good", "true")
    wait_for(lambda: jobs(http), what="a job")
    first.stop()
    second = controller(http)
    try:
        time.sleep(1.0)  # a few reconciles of every node
        assert jobs(http) == ["lj-runtimekit-enable-good-1"]
        runner.paused.clear()
        wait_for(lambda: state(http, "good") == "enabled", what="enabled")
        assert http.get("/api/v1/nodes/good")["metadata"]["annotations"][DONE_ANNOTATION] == "1"
    finally:
        second.stop()


def test_a_node_deleted_mid_change_has_its_job_cancelled(cluster: tuple[KubeHttp, JobRunner, dict[str, str]]) -> None:
    http, runner, _ = cluster
    runner.paused.set()
    server = controller(http)
    try:
        label(http, "good", "true")
        wait_for(lambda: jobs(http), what="a job")
        http.delete("/api/v1/nodes/good")
        wait_for(lambda: not jobs(http), what="the job cancelled")
    finally:
        server.stop()


def test_succeeded_jobs_are_cleaned_up_and_failed_ones_kept_within_history(
    cluster: tuple[KubeHttp, JobRunner, dict[str, str]],
) -> None:
    http, _runner, _ = cluster
    server = controller(http, ttl=0.5, history=2)
    try:
        label(http, "good", "true")
        wait_for(lambda: state(http, "good") == "enabled", what="enabled")
        wait_for(lambda: not [j for j in jobs(http) if "good" in j], what="cleanup")
        # the job's pods go with it, through the garbage collector (background propagation: soon, not at once)
        wait_for(
            lambda: all("good" not in p["metadata"]["name"] for p in http.list(f"/api/v1/namespaces/{NS}/pods")[0]),
            what="the job's pods collected",
        )
        for i, value in enumerate(("true", "false", "true", "false", "true")):
            label(http, "bad", value)
            wait_for(
                lambda n=i + 1: (
                    http.get("/api/v1/nodes/bad")["metadata"].get("annotations", {}).get(DONE_ANNOTATION) == str(n)
                ),
                what=f"change {i + 1} done",
            )
        wait_for(lambda: len([j for j in jobs(http) if "bad" in j]) == 2, what="history of two")
        assert state(http, "bad") == "failed"
    finally:
        server.stop()

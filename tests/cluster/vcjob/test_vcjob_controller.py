"""The Volcano Job controller against the embedded API server: Volcano's example job (PodGroup, pods,
plugins, status), lifecycle policies (PodEvicted -> RestartJob, PodFailed -> AbortJob,
TaskCompleted -> CompleteJob), maxRetry, completion, task dependencies and deletion."""

from __future__ import annotations

from typing import Any

from fixtures.controllers import NODE, NS, PODS, Workloads, set_ready
from runtimekit.kube.errors import KubeError

JOBS = f"/apis/batch.volcano.sh/v1alpha1/namespaces/{NS}/jobs"
GROUPS = f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{NS}/podgroups"


def task(
    name: str, replicas: int, on_node: bool = True, command: list[str] | None = None, **extra: Any
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "1"}}}
    if command:
        container["command"] = command
    spec: dict[str, Any] = {"containers": [container], "restartPolicy": "OnFailure"}
    if on_node:
        spec["nodeName"] = NODE
    return {"name": name, "replicas": replicas, "template": {"metadata": {"name": name}, "spec": spec}, **extra}


def vcjob(name: str, tasks: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"schedulerName": "volcano", "tasks": tasks, **spec},
    }


def phase_is(w: Workloads, name: str, phase: str, **fields: int) -> dict[str, Any] | None:
    status = w.http.get(f"{JOBS}/{name}").get("status") or {}
    ok = (status.get("state") or {}).get("phase") == phase and all(status.get(k, 0) == v for k, v in fields.items())
    return status if ok else None


def pod_names(w: Workloads, job: str) -> list[str]:
    return sorted(
        p["metadata"]["name"]
        for p in w.pods(f"volcano.sh/job-name={job}")
        if not p["metadata"].get("deletionTimestamp")
    )


def test_volcanos_example_job_runs(workloads: Workloads) -> None:
    body = vcjob(
        "test-job",
        [task("default-nginx", 6)],
        minAvailable=3,
        policies=[{"event": "PodEvicted", "action": "RestartJob"}],
        plugins={"ssh": [], "env": [], "svc": []},
        maxRetry=5,
        queue="default",
    )
    created = workloads.http.post(JOBS, body)
    status = workloads.wait(lambda: phase_is(workloads, "test-job", "Running", running=6), "Running")
    assert status["minAvailable"] == 3
    assert status["taskStatusCount"] == {"default-nginx": {"phase": {"Running": 6}}}
    assert [c["status"] for c in status["conditions"]] == ["Pending", "Running"]
    assert pod_names(workloads, "test-job") == [f"test-job-default-nginx-{i}" for i in range(6)]
    [group] = workloads.http.list(GROUPS)[0]
    assert group["metadata"]["name"] == f"test-job-{created['metadata']['uid']}"
    assert group["spec"]["minMember"] == 3
    assert group["spec"]["queue"] == "default"
    assert group["spec"]["minResources"]["cpu"] == "3"
    pod = workloads.http.get(f"{PODS}/test-job-default-nginx-0")
    assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == group["metadata"]["name"]
    assert pod["spec"]["schedulerName"] == "volcano"
    assert workloads.http.get(f"/api/v1/namespaces/{NS}/services/test-job")["spec"]["clusterIP"] == "None"
    assert workloads.http.get(f"/api/v1/namespaces/{NS}/configmaps/test-job-svc")["data"]["VC_DEFAULT_NGINX_NUM"] == "6"


def test_an_evicted_pod_restarts_the_job(workloads: Workloads) -> None:
    policy = [{"event": "PodEvicted", "action": "RestartJob"}]
    workloads.http.post(JOBS, vcjob("train", [task("worker", 2)], policies=policy))
    workloads.wait(lambda: phase_is(workloads, "train", "Running", running=2), "Running")
    workloads.http.delete(f"{PODS}/train-worker-0")
    status = workloads.wait(lambda: phase_is(workloads, "train", "Running", running=2, retryCount=1), "Running again")
    assert status["version"] == 1
    versions = {
        p["metadata"]["annotations"]["volcano.sh/job-version"] for p in workloads.pods("volcano.sh/job-name=train")
    }
    assert versions == {"1"}
    phases = [c["status"] for c in status["conditions"]]
    assert phases[-3:] == ["Restarting", "Pending", "Running"]
    [event] = workloads.events("train", "ExecuteAction")
    assert event["message"] == "Start to execute action RestartJob "


def test_past_max_retry_the_job_fails(workloads: Workloads) -> None:
    policy = [{"event": "PodEvicted", "action": "RestartJob"}]
    workloads.http.post(JOBS, vcjob("flaky", [task("worker", 2)], policies=policy, maxRetry=1))
    workloads.wait(lambda: phase_is(workloads, "flaky", "Running", running=2), "Running")
    workloads.http.delete(f"{PODS}/flaky-worker-1")
    workloads.wait(lambda: phase_is(workloads, "flaky", "Failed"), "Failed")
    workloads.wait(lambda: not pod_names(workloads, "flaky"), "its running pods gone")


def test_a_failed_pod_aborts_the_job(workloads: Workloads) -> None:
    workloads.runner.codes = [3]
    tasks = [task("driver", 1, command=["runtimekit", "protocol", "show"]), task("worker", 2)]
    workloads.http.post(
        JOBS, vcjob("aborts", tasks, minAvailable=1, policies=[{"event": "PodFailed", "action": "AbortJob"}])
    )
    status = workloads.wait(lambda: phase_is(workloads, "aborts", "Aborted"), "Aborted")
    assert status["failed"] == 1  # the failed pod is kept, the others are killed
    assert pod_names(workloads, "aborts") == ["aborts-driver-0"]


def test_an_exit_code_policy(workloads: Workloads) -> None:
    workloads.runner.codes = [42]
    tasks = [task("driver", 1, command=["runtimekit", "protocol", "show"]), task("worker", 1)]
    policies = [{"exitCode": 42, "action": "TerminateJob"}]
    workloads.http.post(JOBS, vcjob("coded", tasks, minAvailable=1, policies=policies))
    workloads.wait(lambda: phase_is(workloads, "coded", "Terminated"), "Terminated")


def test_a_completed_task_completes_the_job(workloads: Workloads) -> None:
    driver = task("driver", 1, command=["runtimekit", "protocol", "show"])
    driver["policies"] = [{"event": "TaskCompleted", "action": "CompleteJob"}]
    workloads.http.post(JOBS, vcjob("done", [driver, task("worker", 2)], minAvailable=1))
    status = workloads.wait(lambda: phase_is(workloads, "done", "Completed"), "Completed")
    assert status["succeeded"] == 1
    assert pod_names(workloads, "done") == ["done-driver-0"]
    assert not workloads.http.list(GROUPS)[0]  # a finished job's PodGroup goes


def test_a_job_whose_pods_all_succeed_completes(workloads: Workloads) -> None:
    workloads.http.post(JOBS, vcjob("batch", [task("run", 2, command=["runtimekit", "protocol", "show"])]))
    status = workloads.wait(lambda: phase_is(workloads, "batch", "Completed", succeeded=2), "Completed")
    assert status["running"] == 0


def test_a_task_waits_for_the_tasks_it_depends_on(workloads: Workloads) -> None:
    first = task("master", 1, on_node=False, minAvailable=1)
    second = task("worker", 2, on_node=False, dependsOn={"name": ["master"]})
    workloads.http.post(JOBS, vcjob("ordered", [first, second], minAvailable=1))
    workloads.wait(lambda: pod_names(workloads, "ordered") == ["ordered-master-0"], "the master pod")
    workloads.wait(lambda: phase_is(workloads, "ordered", "Pending", pending=1), "counted")
    assert pod_names(workloads, "ordered") == ["ordered-master-0"]
    set_ready(workloads.http, workloads.http.get(f"{PODS}/ordered-master-0"))
    workloads.wait(lambda: len(pod_names(workloads, "ordered")) == 3, "the workers after the master")


def test_deleting_the_job_collects_what_it_made(workloads: Workloads) -> None:
    workloads.http.post(JOBS, vcjob("gone", [task("worker", 2)], plugins={"svc": []}))
    workloads.wait(lambda: phase_is(workloads, "gone", "Running", running=2), "Running")
    workloads.http.delete(f"{JOBS}/gone")
    workloads.wait(lambda: not workloads.pods("volcano.sh/job-name=gone"), "pods collected")
    workloads.wait(lambda: not workloads.http.list(GROUPS)[0], "PodGroup collected")

    def service_gone() -> bool:
        try:
            workloads.http.get(f"/api/v1/namespaces/{NS}/services/gone")
        except KubeError as exc:
            return exc.code == 404
        return False

    workloads.wait(service_gone, "Service collected")

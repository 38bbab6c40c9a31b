"""What a Volcano Job makes, as Volcano's controller makes it (createJobPod, the env and svc plugins,
the PodGroup and calcPGMinResources): names, annotations, labels, hosts, minResources."""

from __future__ import annotations

from typing import Any

import pytest

from runtimekit.cluster.vcjob import jobpods

UID = "6f1b2c3d-0000-4000-8000-000000000001"


def job(tasks: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "test-job", "namespace": "team", "uid": UID, "labels": {"l": "1"}},
        "spec": {"queue": "default", "tasks": tasks, **spec},
        "status": {"version": 2, "retryCount": 1},
    }


def task(name: str, replicas: int, cpu: str = "1", **extra: Any) -> dict[str, Any]:
    container = {"name": "nginx", "image": "nginx", "resources": {"requests": {"cpu": cpu}}}
    return {"name": name, "replicas": replicas, "template": {"spec": {"containers": [container]}}, **extra}


def test_a_pod_carries_volcanos_names_annotations_and_labels() -> None:
    vcjob = job([task("default-nginx", 6)], schedulerName="volcano", priorityClassName="high")
    pod = jobpods.make_pod(vcjob, vcjob["spec"]["tasks"][0], 4, "lj-runtimekit-scheduler")
    meta = pod["metadata"]
    assert meta["name"] == "test-job-default-nginx-4"
    assert meta["annotations"] == {
        "volcano.sh/task-index": "4",
        "volcano.sh/task-spec": "default-nginx",
        "scheduling.k8s.io/group-name": f"test-job-{UID}",
        "volcano.sh/job-name": "test-job",
        "volcano.sh/queue-name": "default",
        "volcano.sh/job-version": "2",
        "volcano.sh/template-uid": "test-job-default-nginx",
        "volcano.sh/job-retry-count": "1",
    }
    assert meta["labels"] == {
        "volcano.sh/task-index": "4",
        "volcano.sh/job-name": "test-job",
        "volcano.sh/task-spec": "default-nginx",
        "volcano.sh/job-namespace": "team",
        "volcano.sh/queue-name": "default",
    }
    [owner] = meta["ownerReferences"]
    assert (owner["apiVersion"], owner["kind"], owner["uid"], owner["controller"]) == (
        "batch.volcano.sh/v1alpha1",
        "Job",
        UID,
        True,
    )
    assert (pod["spec"]["schedulerName"], pod["spec"]["priorityClassName"]) == ("volcano", "high")


@pytest.mark.parametrize(
    ("template_scheduler", "job_scheduler", "expected"),
    [("mine", "volcano", "mine"), (None, "volcano", "volcano"), (None, None, "lj-runtimekit-scheduler")],
    ids=["template's", "job's", "cluster default"],
)
def test_scheduler_name_comes_from_template_then_job_then_cluster(
    template_scheduler: str | None, job_scheduler: str | None, expected: str
) -> None:
    spec_task = task("t", 1)
    if template_scheduler:
        spec_task["template"]["spec"]["schedulerName"] = template_scheduler
    vcjob = job([spec_task], **({"schedulerName": job_scheduler} if job_scheduler else {}))
    assert jobpods.make_pod(vcjob, spec_task, 0, "lj-runtimekit-scheduler")["spec"]["schedulerName"] == expected


def test_env_and_svc_plugins() -> None:
    vcjob = job([task("ps", 1), task("worker-a", 2)], plugins={"env": [], "svc": []})
    pod = jobpods.make_pod(vcjob, vcjob["spec"]["tasks"][1], 1, "s")
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in pod["spec"]["containers"][0]["env"]}
    assert (env["VK_TASK_INDEX"], env["VC_TASK_INDEX"]) == ("1", "1")
    assert env["VC_WORKER_A_HOSTS"] == {"configMapKeyRef": {"name": "test-job-svc", "key": "VC_WORKER_A_HOSTS"}}
    assert "VC_PS_NUM" in env
    assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == ("test-job-worker-a-1", "test-job")
    assert {"name": "test-job-svc", "mountPath": "/etc/volcano"} in pod["spec"]["containers"][0]["volumeMounts"]
    assert jobpods.hosts(vcjob) == {
        "ps.host": "test-job-ps-0.test-job",
        "VC_PS_HOSTS": "test-job-ps-0.test-job",
        "VC_PS_NUM": "1",
        "worker_a.host": "test-job-worker-a-0.test-job\ntest-job-worker-a-1.test-job",
        "VC_WORKER_A_HOSTS": "test-job-worker-a-0.test-job,test-job-worker-a-1.test-job",
        "VC_WORKER_A_NUM": "2",
    }
    service = dict(jobpods.svc_objects(vcjob))["services"]
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == {"volcano.sh/job-name": "test-job", "volcano.sh/job-namespace": "team"}


def test_no_hosts_env_when_the_svc_plugin_says_so() -> None:
    vcjob = job([task("ps", 1)], plugins={"svc": ["--inject-hosts-env=false"]})
    pod = jobpods.make_pod(vcjob, vcjob["spec"]["tasks"][0], 0, "s")
    assert "env" not in pod["spec"]["containers"][0]


def test_podgroup_of_volcanos_example_job() -> None:
    vcjob = job([task("default-nginx", 6)], minAvailable=3)
    vcjob["spec"]["tasks"][0]["minAvailable"] = 6
    group = jobpods.podgroup(vcjob, {})
    assert group["metadata"]["name"] == f"test-job-{UID}"
    assert group["metadata"]["labels"] == {"l": "1"}
    assert group["spec"] == {
        "minMember": 3,
        "minTaskMember": {"default-nginx": 6},
        "queue": "default",
        "minResources": {"count/pods": "3", "cpu": "3", "pods": "3", "requests.cpu": "3"},
    }


@pytest.mark.parametrize(
    ("min_available", "task_mins", "priorities", "cpu"),
    [
        (3, (2, 2), {}, "3"),  # below the tasks' 4: the first pods in task order, up to replicas (a: 3 x 1)
        (4, (2, 2), {}, "3"),  # each task's minAvailable
        (5, (2, 2), {}, "4"),  # then one more of the first task (2 x 1 + 2 x 500m + 1 x 1)
        (3, (2, 2), {"high": 10}, "1500m"),  # b has the higher priority: 3 x 500m
    ],
    ids=["first pods", "task minimums", "then extras", "by priority"],
)
def test_min_resources(min_available: int, task_mins: tuple[int, int], priorities: dict[str, int], cpu: str) -> None:
    a, b = task("a", 3, "1"), task("b", 3, "500m")
    a["minAvailable"], b["minAvailable"] = task_mins
    b["template"]["spec"]["priorityClassName"] = "high"
    resources = jobpods.min_resources({"minAvailable": min_available, "tasks": [a, b]}, priorities)
    assert resources["cpu"] == cpu
    assert resources["pods"] == str(min_available)


def test_quantities_print_as_kubernetes_prints_them() -> None:
    from fractions import Fraction

    assert jobpods.format_quantity(Fraction(3 << 30)) == "3Gi"
    assert jobpods.format_quantity(Fraction(3, 2)) == "1500m"
    assert jobpods.format_quantity(Fraction(7)) == "7"

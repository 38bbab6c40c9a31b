"""End to end: `runtimekit up --scheduler-name volcano` runs ordinary workloads, driven by the real
kubectl. A Deployment, a StatefulSet and a Volcano Job that ask for GPU shares run on the simulated
GPUs (no schedulerName needed for the first two); `kubectl scale`, `kubectl rollout status`,
`kubectl set image` and `kubectl delete` (with garbage collection) work as on a real cluster;
Volcano's own example manifests (`workloads/volcano/`) run unchanged; and a pod that asks for a
scheduler nobody runs is told so in an Event."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fixtures.kubeup import UpCluster, runtimekit_up
from fixtures.waiting import wait_for
from runtimekit.protocol import KitProtocol

pytestmark = pytest.mark.e2e

P = KitProtocol.default()
DATA = Path(__file__).parent / "workloads"


@pytest.fixture(scope="module")
def cluster() -> Iterator[UpCluster]:
    with runtimekit_up(["--nodes", "2", "--gpus-per-node", "4", "--scheduler-name", "volcano"], P) as up:
        yield up


def assigned(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """The GPU shares the scheduler gave the pod (its assignment annotation)."""
    containers: dict[str, list[dict[str, Any]]] = json.loads(pod["metadata"]["annotations"][P.annotations.assignment])[
        "containers"
    ]
    return [share for shares in containers.values() for share in shares]


def test_a_deployment_of_gpu_shares_scales_rolls_and_goes(cluster: UpCluster) -> None:
    cluster.kubectl("apply", "-f", str(DATA / "deployment.yaml"))
    out = cluster.kubectl("rollout", "status", "deployment/inference", "--timeout=120s").stdout
    assert 'deployment "inference" successfully rolled out' in out
    pods = wait_for(lambda: cluster.all_running("app=inference", 3), what="three pods running")
    for pod in pods:
        assert pod["spec"]["schedulerName"] == "default-scheduler"
        assert pod["metadata"]["labels"]["pod-template-hash"]
        [share] = assigned(pod)
        assert share["coreMilli"] == 300
    assert "scaled" in cluster.kubectl("scale", "deployment/inference", "--replicas=5").stdout
    cluster.kubectl("rollout", "status", "deployment/inference", "--timeout=120s")
    wait_for(lambda: cluster.all_running("app=inference", 5), what="five pods running")
    cluster.kubectl("set", "image", "deployment/inference", "server=example/inference:2.0")
    cluster.kubectl("rollout", "status", "deployment/inference", "--timeout=180s")
    pods = wait_for(lambda: cluster.all_running("app=inference", 5), what="five new pods running")
    assert {p["spec"]["containers"][0]["image"] for p in pods} == {"example/inference:2.0"}
    deployment = cluster.json("get", "deployment", "inference")
    assert deployment["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    assert len(cluster.json("get", "replicasets", "-l", "app=inference")["items"]) == 2
    cluster.kubectl("delete", "deployment", "inference", "--timeout=120s")
    wait_for(lambda: not cluster.pods("app=inference"), what="pods collected")
    wait_for(lambda: not cluster.json("get", "replicasets", "-l", "app=inference")["items"], what="sets collected")


def test_a_statefulset_of_gpu_shares_comes_up_in_order_and_scales_down_from_the_top(cluster: UpCluster) -> None:
    cluster.kubectl("apply", "-f", str(DATA / "statefulset.yaml"))
    out = cluster.kubectl("rollout", "status", "statefulset/shard", "--timeout=180s").stdout
    assert "partitioned roll out complete: 3 new pods have been updated" in out
    pods = wait_for(lambda: cluster.all_running("app=shard", 3), what="three shards running")
    assert sorted(p["metadata"]["name"] for p in pods) == ["shard-0", "shard-1", "shard-2"]
    started = sorted(pods, key=lambda p: p["status"]["startTime"])
    assert [p["metadata"]["name"] for p in started] == ["shard-0", "shard-1", "shard-2"]
    assert all(assigned(p)[0]["coreMilli"] == 250 for p in pods)
    cluster.kubectl("scale", "statefulset/shard", "--replicas=1")
    wait_for(lambda: [p["metadata"]["name"] for p in cluster.pods("app=shard")] == ["shard-0"], what="shard-0 alone")
    cluster.kubectl("delete", "statefulset", "shard", "--cascade=foreground", "--timeout=120s")
    assert not cluster.pods("app=shard")


def test_a_volcano_job_of_gpu_shares_runs_as_a_gang(cluster: UpCluster) -> None:
    cluster.kubectl("apply", "-f", str(DATA / "vcjob.yaml"))

    def running() -> bool:
        table = cluster.kubectl("get", "vcjob", "train").stdout.splitlines()
        return len(table) == 2 and table[1].split()[1:4] == ["Running", "2", "2"]

    wait_for(running, timeout=120, what="the job Running")
    pods = wait_for(lambda: cluster.all_running("volcano.sh/job-name=train", 2), what="both workers running")
    job = cluster.json("get", "vcjob", "train")
    group = f"train-{job['metadata']['uid']}"
    for pod in pods:
        assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == group
        assert pod["metadata"]["annotations"]["volcano.sh/task-spec"] == "worker"
        assert assigned(pod)[0]["coreMilli"] == 500
        env = {e["name"] for e in pod["spec"]["containers"][0]["env"]}
        assert {"VK_TASK_INDEX", "VC_TASK_INDEX", "VC_WORKER_HOSTS", "VC_WORKER_NUM"} <= env
    podgroup = cluster.json("get", "podgroup", group)
    assert (podgroup["spec"]["minMember"], podgroup["spec"]["queue"]) == (2, "default")
    assert "Running" in cluster.kubectl("describe", "vcjob", "train").stdout
    cluster.kubectl("delete", "pod", "train-worker-0")  # PodEvicted -> RestartJob
    wait_for(lambda: cluster.json("get", "vcjob", "train")["status"].get("retryCount") == 1, what="restarted")
    wait_for(running, timeout=120, what="running again")
    cluster.kubectl("delete", "vcjob", "train", "--timeout=120s")
    wait_for(lambda: not cluster.pods("volcano.sh/job-name=train"), what="pods collected")
    assert not cluster.json("get", "podgroups")["items"]


def test_volcanos_example_manifests_run_unchanged(cluster: UpCluster) -> None:
    examples = {
        "vc-job": ("job.yaml", "volcano.sh/job-name=test-job", 6),
        "vc-plugin": ("job-plugin.yaml", "volcano.sh/job-name=test-job-plugin", 3),
        "vc-depends": ("task-start-dependency.yaml", "volcano.sh/job-name=job", 11),
        "vc-queue": ("queue-deployment.yaml", "app=nginx", 1),
        "vc-gang": ("gang-replicaset.yaml", "app=nginx", 6),
    }
    for namespace, (manifest, _, _) in examples.items():
        cluster.kubectl("create", "namespace", namespace)
        cluster.kubectl("apply", "-n", namespace, "-f", str(DATA / "volcano" / manifest))
    for namespace, (manifest, selector, count) in examples.items():
        wait_for(
            lambda n=namespace, s=selector, c=count: cluster.all_running(s, c, n),
            timeout=180,
            what=f"{manifest} running",
        )
    for namespace, name in (("vc-job", "test-job"), ("vc-plugin", "test-job-plugin"), ("vc-depends", "job")):
        status = cluster.json("get", "vcjob", name, "-n", namespace)["status"]
        assert status["state"]["phase"] == "Running", (name, status)
    queue = cluster.all_running("app=nginx", 1, "vc-queue")
    assert queue is not None
    assert queue[0]["spec"]["schedulerName"] == "volcano"
    for namespace in examples:
        cluster.kubectl("delete", "namespace", namespace, "--timeout=120s")
    cluster.kubectl("delete", "queue", "test")


def test_a_pod_for_a_scheduler_nobody_runs_gets_an_event(cluster: UpCluster) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "lost"},
        "spec": {"schedulerName": "hami-scheduler", "containers": [{"name": "c", "image": "busybox"}]},
    }
    done = cluster.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    assert "created" in done.stdout

    def told() -> str:
        described = cluster.kubectl("describe", "pod", "lost").stdout
        return described if "NoScheduler" in described else ""

    described = wait_for(told, timeout=60, what="the NoScheduler Event")
    assert 'no scheduler in this cluster answers to schedulerName "hami-scheduler"' in described.replace("\n", " ")
    cluster.kubectl("delete", "pod", "lost", "--grace-period=0", "--force")

"""End to end: the simulated kubelet on `runtimekit up` as a new user meets it with the real kubectl:
`kubectl create job once --image=busybox -- echo hi` completes and `kubectl logs` prints `hi`; a pod
mounting a ConfigMap that does not exist stays ContainerCreating with a FailedMount Event and starts
once the ConfigMap is created; `kubectl describe` lists kubelet's Events; `kubectl exec` says at once
that containers are simulated; a GPU pod's log names the GPUs the runtime gave it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from fixtures.kubeup import UpCluster, runtimekit_up
from fixtures.waiting import wait_for
from runtimekit.protocol import KitProtocol

pytestmark = pytest.mark.e2e
P = KitProtocol.default()


@pytest.fixture(scope="module")
def cluster() -> Iterator[UpCluster]:
    with runtimekit_up(["--nodes", "1", "--gpus-per-node", "2"], P) as up:
        yield up


def test_a_job_that_echoes_completes(cluster: UpCluster) -> None:
    cluster.kubectl("create", "job", "once", "--image=busybox", "--", "echo", "hi")
    cluster.kubectl("wait", "--for=condition=complete", "job/once", "--timeout=60s")
    assert cluster.kubectl("logs", "job/once").stdout == "hi\n"
    described = cluster.kubectl("describe", "pods", "-l", "job-name=once").stdout
    for reason in ("Scheduled", "Pulling", "Pulled", "Created", "Started"):
        assert f"  {reason} " in described, described


def test_a_missing_configmap_holds_the_pod_until_it_exists(cluster: UpCluster) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "mounts"},
        "spec": {
            "containers": [{"name": "main", "image": "nginx", "volumeMounts": [{"name": "conf", "mountPath": "/c"}]}],
            "volumes": [{"name": "conf", "configMap": {"name": "settings"}}],
        },
    }
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    message = 'MountVolume.SetUp failed for volume "conf" : configmap "settings" not found'
    wait_for(lambda: message in cluster.events("mounts", "FailedMount"), timeout=60, what="FailedMount")
    row = cluster.kubectl("get", "pod", "mounts", "--no-headers").stdout.split()
    assert row[1:3] == ["0/1", "ContainerCreating"], row
    cluster.kubectl("create", "configmap", "settings", "--from-literal=a=b")
    cluster.running("mounts")


def test_exec_is_refused_at_once(cluster: UpCluster) -> None:
    cluster.kubectl("run", "shell", "--image=busybox", "--", "sleep", "infinity")
    cluster.running("shell")
    started = time.monotonic()
    done = cluster.kubectl("exec", "shell", "--", "ls", check=False, timeout=30)
    assert done.returncode != 0
    assert "simulated" in done.stderr, done.stderr
    assert time.monotonic() - started < 15


def test_a_gpu_pods_log_names_its_gpus(cluster: UpCluster) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "train"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "cuda:12",
                    "command": ["sh", "-c", "echo training; sleep 1; echo done"],
                    "resources": {"limits": {P.resources.gpu: "1"}},
                }
            ],
        },
    }
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    wait_for(lambda: cluster.pod("train")["status"].get("phase") == "Succeeded", timeout=90, what="train done")
    first, *rest = cluster.kubectl("logs", "train").stdout.splitlines()
    visible = cluster.visible(cluster.pod("train"), "main")
    assert first.startswith("[runtimekit] simulated container main: ")
    assert f"NVIDIA_VISIBLE_DEVICES={','.join(visible)}" in first
    assert rest == ["training", "done"]

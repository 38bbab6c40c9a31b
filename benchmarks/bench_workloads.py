"""How fast the embedded cluster runs ordinary workloads, end to end.

Starts the embedded cluster in process (direct-mode nodes of 8 simulated H200, the scheduler answering
to `default-scheduler`, the workload controllers), then times, from the client's request to the state
`kubectl rollout status` (or `kubectl get vcjob`) waits for:
- a Deployment of `--replicas` GPU-share pods (10 % of a GPU each, no schedulerName) rolled out;
- a rolling update of it (new image, default 25 % surge and unavailability) rolled out;
- a scale to twice the replicas, and back;
- its deletion with Foreground propagation, until the Deployment is gone;
- a StatefulSet of `--ordered` pods, created one after the other (OrderedReady), all Ready;
- a Volcano Job of `--replicas` pods as one gang, Running.
Prints JSON: seconds per step and pods per second where it applies, with the options used.
Usage: .venv/bin/python benchmarks/bench_workloads.py [--replicas 100] [--ordered 20] [--nodes N]
(`--nodes` defaults to enough nodes for twice the replicas, and at least 4.)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable
from typing import Any

from runtimekit.cli.embedded import ClusterOptions, start_cluster
from runtimekit.kube.errors import KubeError
from runtimekit.kube.http import KubeHttp
from runtimekit.protocol import KitProtocol

P = KitProtocol.default()
NS = "default"
DEPLOY = f"/apis/apps/v1/namespaces/{NS}/deployments"
STS = f"/apis/apps/v1/namespaces/{NS}/statefulsets"
VCJOBS = f"/apis/batch.volcano.sh/v1alpha1/namespaces/{NS}/jobs"


def template(app: str, image: str = "example/app:1") -> dict[str, Any]:
    limits = {P.resources.core: "10", P.resources.memory: "4"}
    container = {"name": "main", "image": image, "resources": {"limits": limits, "requests": {"cpu": "100m"}}}
    return {"metadata": {"labels": {"app": app}}, "spec": {"containers": [container]}}


def until(check: Callable[[], bool], timeout: float = 600.0) -> float:
    """Seconds until `check()` holds (polling every 50 ms); raises TimeoutError past `timeout`."""
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout:
            raise TimeoutError("the workload did not get there in time")
        time.sleep(0.05)
    return time.monotonic() - start


def rolled_out(http: KubeHttp, name: str, replicas: int) -> bool:
    d = http.get(f"{DEPLOY}/{name}")
    status = d.get("status") or {}
    wanted = (replicas, replicas, replicas, d["metadata"]["generation"])
    got = (status.get("updatedReplicas"), status.get("replicas"), status.get("availableReplicas"))
    return (*got, status.get("observedGeneration")) == wanted


def gone(http: KubeHttp, path: str) -> bool:
    try:
        http.get(path)
    except KubeError as exc:
        return exc.code == 404
    return False


def bench(http: KubeHttp, replicas: int, ordered: int) -> dict[str, Any]:
    body = {"metadata": {"name": "web"}, "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}}}}
    body["spec"]["template"] = template("web")
    http.post(DEPLOY, {"apiVersion": "apps/v1", "kind": "Deployment", **body})
    create = until(lambda: rolled_out(http, "web", replicas))
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "example/app:2"}]}}}}
    http.patch(f"{DEPLOY}/web", patch, "strategic")
    update = until(lambda: rolled_out(http, "web", replicas))
    http.patch(f"{DEPLOY}/web/scale", {"spec": {"replicas": 2 * replicas}}, "merge")
    scale_up = until(lambda: rolled_out(http, "web", 2 * replicas))
    http.patch(f"{DEPLOY}/web/scale", {"spec": {"replicas": replicas}}, "merge")
    scale_down = until(lambda: rolled_out(http, "web", replicas))
    http.delete(f"{DEPLOY}/web", {"propagationPolicy": "Foreground"})
    delete = until(lambda: gone(http, f"{DEPLOY}/web"))

    sts = {"metadata": {"name": "db"}, "spec": {"replicas": ordered, "serviceName": "db"}}
    sts["spec"] |= {"selector": {"matchLabels": {"app": "db"}}, "template": template("db")}
    http.post(STS, {"apiVersion": "apps/v1", "kind": "StatefulSet", **sts})
    ordered_s = until(lambda: (http.get(f"{STS}/db").get("status") or {}).get("readyReplicas") == ordered)

    task = {"name": "worker", "replicas": replicas, "template": template("train")}
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "train"}}
    job["spec"] = {"minAvailable": replicas, "tasks": [task]}
    http.post(VCJOBS, job)
    gang = until(lambda: ((http.get(f"{VCJOBS}/train").get("status") or {}).get("running") or 0) == replicas)
    return {
        "deployment_rollout_s": round(create, 2),
        "deployment_rollout_pods_per_s": round(replicas / create, 1),
        "rolling_update_s": round(update, 2),
        "rolling_update_pods_per_s": round(replicas / update, 1),
        "scale_up_s": round(scale_up, 2),
        "scale_down_s": round(scale_down, 2),
        "foreground_delete_s": round(delete, 2),
        "statefulset_ordered_s": round(ordered_s, 2),
        "statefulset_pods_per_s": round(ordered / ordered_s, 1),
        "volcano_gang_running_s": round(gang, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=0)
    parser.add_argument("--replicas", type=int, default=100)
    parser.add_argument("--ordered", type=int, default=20)
    args = parser.parse_args()
    args.nodes = args.nodes or max(4, -(-2 * args.replicas // 80) + 1)  # a pod takes 10 % of one of 8 GPUs
    options = ClusterOptions(nodes=args.nodes, gpus_per_node=8, direct=True, controller=False)
    with start_cluster(options, ready_timeout_s=180) as cluster:
        http = cluster.http("bench-workloads")
        figures = bench(http, args.replicas, args.ordered)
        http.close()
    report = {
        "benchmark": "workloads",
        "options": vars(args),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        **figures,
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

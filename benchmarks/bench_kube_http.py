"""CPU a client spends per API request: the kit's client (`KubeHttp`, over `runtimekit.kube.wire`)
against the standard library's `http.client`, each sending the same binding POSTs (with an
assignment annotation and its signature, as the scheduler's binder does) to the embedded API server
running in a process of its own. Prints JSON: client CPU and wall time per request for each.
Usage: .venv/bin/python benchmarks/bench_kube_http.py [--requests 3000]
"""

from __future__ import annotations

import argparse
import http.client
import json
import subprocess
import sys
import time
from collections.abc import Callable

from runtimekit.kube import jsoncodec
from runtimekit.kube.http import KubeHttp

SERVER = """
import signal, sys, threading
from runtimekit.cluster.apiserver import ApiServer
server = ApiServer(port=0).start()
print(server.url, flush=True)
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
stop.wait()
server.stop()
"""
ANNOTATIONS = {
    "runtimekit.aliyun.com/gpu-assignment": '{"node":"n1","containers":[{"name":"c","gpus":[{"index":3,'
    '"uuid":"GPU-0000-1111-2222-3333","core":300,"memoryMib":40960}]}]}',
    "runtimekit.aliyun.com/gpu-assignment-signature": "v1:key1:" + "a" * 64,
}


def pod(name: str) -> dict[str, object]:
    resources = {"limits": {"aliyun.com/gpu-core.percentage": "30"}, "requests": {"cpu": "4", "memory": "1Gi"}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": "x", "containers": [{"name": "c", "image": "i", "resources": resources}]},
    }


def binding(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": "default", "annotations": ANNOTATIONS},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
    }


def timed(count: int, send: Callable[[int], None]) -> dict[str, float]:
    cpu, wall = time.thread_time(), time.perf_counter()
    for i in range(count):
        send(i)
    return {
        "client_cpu_us": round((time.thread_time() - cpu) / count * 1e6, 1),
        "wall_us": round((time.perf_counter() - wall) / count * 1e6, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=3000)
    args = parser.parse_args()
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        client = KubeHttp.connect(server=url, timeout=30)
        client.post("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
        count = args.requests
        for prefix in ("kit", "std"):
            for i in range(count):
                client.post("/api/v1/namespaces/default/pods", pod(f"{prefix}{i}"))
        host, port = url.removeprefix("http://").rsplit(":", 1)
        std = http.client.HTTPConnection(host, int(port), timeout=30)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}

        def kit(i: int) -> None:
            client.post(f"/api/v1/namespaces/default/pods/kit{i}/binding", binding(f"kit{i}"))

        def standard(i: int) -> None:
            body = jsoncodec.dumps(binding(f"std{i}"))
            std.request("POST", f"/api/v1/namespaces/default/pods/std{i}/binding", body, headers)
            answer = std.getresponse()
            jsoncodec.loads(answer.read())
            assert answer.status == 201, answer.status

        result = {"requests": count, "kubehttp_wire": timed(count, kit), "http_client": timed(count, standard)}
        print(json.dumps(result, indent=2))
    finally:
        server.terminate()
        server.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())

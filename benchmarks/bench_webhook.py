"""What admission webhooks cost the embedded API server per request; prints one JSON object.

Starts `runtimekit apiserver` and, where a set-up needs it, `runtimekit webhook` as processes of their
own (as they run on a cluster: one process's threads would wait on each other's GIL), then creates
REQUESTS pods one after another over one kept-alive HTTP connection (after WARMUP creates), timing each
request to its last byte, in four set-ups:
- `none`: no webhook configuration (the path every request took before webhooks existed);
- `unmatched`: a ValidatingWebhookConfiguration whose rules name Deployments only, so pod creates
  match nothing;
- `validating`: the kit's ValidatingWebhookConfiguration (one call to the kit's webhook per create);
- `kit`: the kit's Mutating- and ValidatingWebhookConfiguration (two calls per create, a JSONPatch).
Run it against another checkout (`PYTHONPATH=../main/src python benchmarks/bench_webhook.py --only none`)
to compare the path without webhooks before and after. Numbers are per request, in microseconds.

Usage: python benchmarks/bench_webhook.py [--requests 400] [--warmup 50] [--only none,unmatched,...]
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SCENARIOS = ("none", "unmatched", "validating", "kit")
CORE = "aliyun.com/gpu-core.percentage"


def pod(name: str) -> bytes:
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36", "resources": {"limits": {CORE: "30"}}}]},
    }
    return json.dumps(manifest).encode()


def post(connection: http.client.HTTPConnection, path: str, body: bytes) -> float:
    started = time.perf_counter()
    connection.request("POST", path, body, {"Content-Type": "application/json"})
    answer = connection.getresponse()
    answer.read()
    elapsed = time.perf_counter() - started
    if answer.status != 201:
        raise RuntimeError(f"POST {path}: {answer.status}")
    return elapsed


def unmatched_configuration() -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "deployments-only"},
        "webhooks": [
            {
                "name": "deployments.example.com",
                "clientConfig": {"url": "https://127.0.0.1:9/validate"},
                "rules": [
                    {
                        "operations": ["CREATE"],
                        "apiGroups": ["apps"],
                        "apiVersions": ["v1"],
                        "resources": ["deployments"],
                    }
                ],
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
            }
        ],
    }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def runtimekit(*args: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "runtimekit.cli.main", "--log-level", "WARNING", *args]
    env = {**os.environ, "KUBERNETES_SERVICE_HOST": ""}
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)


def stopped(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGTERM)
    process.wait(30)


@contextmanager
def apiserver(folder: Path) -> Iterator[tuple[str, Path]]:
    """A `runtimekit apiserver` process: its URL and an admin kubeconfig."""
    kubeconfig = folder / "kubeconfig"
    process = runtimekit("apiserver", "--port", "0", "--kubeconfig-out", str(kubeconfig))
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        yield url, kubeconfig
    finally:
        stopped(process)


def admin_post(url: str, path: str, obj: dict[str, Any]) -> None:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    connection.request("POST", path, json.dumps(obj).encode(), {"Content-Type": "application/json"})
    answer = connection.getresponse()
    answer.read()
    if answer.status != 201:
        raise RuntimeError(f"POST {path}: {answer.status}")


@contextmanager
def kit_webhook(url: str, kubeconfig: Path, folder: Path, mutating: bool) -> Iterator[None]:
    """`runtimekit webhook` serving the kit's configurations, registered with the API server."""
    from runtimekit.webhook.certs import ensure_certificates
    from runtimekit.webhook.registration import Client, configurations

    files = ensure_certificates(folder / "webhook", ["127.0.0.1"])
    port = free_port()
    process = runtimekit(
        *("webhook", "--listen", f"127.0.0.1:{port}", "--kubeconfig", str(kubeconfig)),
        *("--tls-cert-file", str(files.cert), "--tls-private-key-file", str(files.key)),
    )
    try:
        wait_for_port(port)
        client = Client(base64.b64encode(files.ca_bundle()).decode(), url=f"https://127.0.0.1:{port}")
        mutate, validate = configurations(client)
        admission = "/apis/admissionregistration.k8s.io/v1"
        if mutating:
            admin_post(url, f"{admission}/mutatingwebhookconfigurations", dict(mutate))
        admin_post(url, f"{admission}/validatingwebhookconfigurations", dict(validate))
        yield
    finally:
        stopped(process)


def wait_for_port(port: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listens on port {port}")


def measure(url: str, requests: int, warmup: int) -> dict[str, float]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    path = "/api/v1/namespaces/default/pods"
    for i in range(warmup):
        post(connection, path, pod(f"warm-{i}"))
    times = sorted(post(connection, path, pod(f"p-{i}")) for i in range(requests))
    connection.close()
    return {
        "requests": requests,
        "mean_us": round(statistics.fmean(times) * 1e6, 1),
        "p50_us": round(times[len(times) // 2] * 1e6, 1),
        "p95_us": round(times[int(len(times) * 0.95)] * 1e6, 1),
    }


def run(scenario: str, requests: int, warmup: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as temp, apiserver(Path(temp)) as (url, kubeconfig):
        if scenario == "unmatched":
            admin_post(
                url, "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", unmatched_configuration()
            )
        if scenario in ("validating", "kit"):
            with kit_webhook(url, kubeconfig, Path(temp), mutating=scenario == "kit"):
                return measure(url, requests, warmup)
        return measure(url, requests, warmup)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated scenarios")
    args = parser.parse_args()
    chosen = [s for s in args.only.split(",") if s]
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    report = {
        "benchmark": "bench_webhook",
        "python": platform.python_version(),
        "commit": commit,
        "requests": args.requests,
        "warmup": args.warmup,
        "scenarios": {name: run(name, args.requests, args.warmup) for name in chosen},
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

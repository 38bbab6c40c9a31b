"""`runtimekit dra-plugin` as a node runs it: against a simulated runtime and the embedded API server it
installs its DeviceClasses, publishes the node's slice, registers with a kubelet's plugin watcher,
prepares a claim allocated on the server, and stops cleanly on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx2
import pytest
from dra_helpers import DRIVER, NODE, DraStack, claim

from fixtures.waiting import wait_for
from runtimekit.cluster.apiserver.server import ApiServer
from runtimekit.cluster.kubelet.draplugins import ClaimKey, DraPluginWatcher

BASE = "/apis/resource.k8s.io/v1"


@pytest.mark.e2e
def test_the_plugin_command_publishes_registers_prepares_and_stops(
    dra_stack: Callable[..., DraStack], apiserver: ApiServer, kube_http: httpx2.Client
) -> None:
    stack = dra_stack(gpus="1xH200")
    assert (
        kube_http.post(
            "/api/v1/nodes", json={"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}}
        ).status_code
        == 201
    )
    root: Path = stack.dir
    process = subprocess.Popen(
        [sys.executable, "-m", "runtimekit.cli.main", "dra-plugin", "--runtime-socket", str(root / "rt.sock"),
         "--kubeconfig", apiserver.url, "--node-name", NODE, "--plugin-dir", str(root / "p"),
         "--registry-dir", str(root / "r"), "--cdi-dir", str(root / "c"), "--startup-timeout", "20"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "KUBERNETES_SERVICE_HOST": ""},
    )  # fmt: skip
    try:
        wait_for(lambda: list((root / "r").glob("*.sock")), 30, "the registration socket")
        watcher = DraPluginWatcher(root / "r")
        assert watcher.scan() == [DRIVER]
        classes = kube_http.get(f"{BASE}/deviceclasses").json()["items"]
        assert sorted(c["metadata"]["name"] for c in classes) == [DRIVER, "mig.runtimekit.aliyun.com"]
        slices = wait_for(lambda: kube_http.get(f"{BASE}/resourceslices").json()["items"], 20, "the node's slice")
        assert [d["name"] for d in slices[0]["spec"]["devices"]] == ["gpu-0"]
        body = claim("c1", "", [{"request": "gpu", "device": "gpu-0"}])
        status = body.pop("status")
        body["metadata"].pop("uid")
        body["spec"] = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}}
        created = kube_http.post(f"{BASE}/namespaces/default/resourceclaims", json=body).json()
        assert (
            kube_http.put(
                f"{BASE}/namespaces/default/resourceclaims/c1/status", json={**created, "status": status}
            ).status_code
            == 200
        )
        uid = created["metadata"]["uid"]
        answer = watcher.plugins[DRIVER].prepare([ClaimKey("default", uid, "c1")])[uid]
        assert answer.error == ""
        assert (root / "c" / f"{DRIVER}-claim_{uid}.json").exists()
        watcher.close()
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, output
    assert "DRA plugin stopped" in output

"""End to end: `kubectl lj inspect` (the real kubectl finding the plugin on PATH) on `runtimekit up` under
every preset, with the peers' own manifests running: each running pod's shares appear on the GPUs its
signed assignment names (checked with the cluster's key, as the scheduler checks them), MIG slices on
their instances, nothing is ignored, and each node's exporter answers with each GPU's and each
container's usage."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from fixtures.apiserver import KUBECTL_BINARIES, KUBECTL_DISPATCHER
from fixtures.kubectl_lj import plugin_env
from fixtures.kubeup import UpCluster, runtimekit_up
from fixtures.waiting import wait_for
from runtimekit.protocol import KitProtocol
from runtimekit.protocol.presets import preset_protocol

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
PEERS = Path(__file__).parent / "peers"
CASES = [
    pytest.param(None, ["--gpu-model", "H200"], [ROOT / "examples/pods/share.yaml"], id="kit"),
    pytest.param("gpushare", ["--gpu-model", "T4"], [PEERS / "gpushare/binpack.yaml"], id="gpushare"),
    pytest.param("hami", ["--gpu-model", "A100-40GB"], [PEERS / "hami/sharing.yaml"], id="hami"),
    pytest.param("volcano-vgpu", ["--gpu-model", "A100-80GB"], [PEERS / "volcano-vgpu/case01.yaml"], id="volcano"),
    pytest.param(
        "nvidia",
        ["--gpu-model", "A100-40GB", "--mig-mode", "0:static", "--mig-layout", "0:3g.20gb,2g.10gb,1g.5gb,1g.5gb"],
        [PEERS / "nvidia/gpu-pod.yaml", PEERS / "nvidia/mig-pods.yaml"],
        id="nvidia-mig",
    ),
]


def running_pods(up: UpCluster) -> list[dict[str, Any]] | None:
    items: list[dict[str, Any]] = up.json("get", "pods")["items"]
    return items if items and all(p["status"].get("phase") == "Running" for p in items) else None


def inspect(up: UpCluster, preset: str | None, folder: Path) -> dict[str, Any]:
    binary = KUBECTL_DISPATCHER or str(next(iter(KUBECTL_BINARIES.values())))
    state = up.kubeconfig.parent
    command = [binary, "lj", "inspect", "-o", "json", "--assignment-keys", str(state / "assignment-keys")]
    command += ["--cluster-json", str(state / "cluster.json"), *(["--protocol", preset] if preset else [])]
    env = plugin_env(folder, {"HOME": str(up.home), "KUBECONFIG": str(up.kubeconfig), "PATH": ""})
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


@pytest.mark.parametrize(("preset", "args", "manifests"), CASES)
def test_inspect_shows_every_running_pod_on_its_assigned_gpus(
    preset: str | None, args: list[str], manifests: list[Path], tmp_path: Path
) -> None:
    protocol = preset_protocol(preset) if preset else KitProtocol.default()
    up_args = [*(["--protocol", preset] if preset else []), "--nodes", "2", "--gpus-per-node", "2", *args]
    with runtimekit_up(up_args, protocol, exporters=True) as up:
        for manifest in manifests:
            up.apply(manifest)
        pods = wait_for(lambda: running_pods(up), timeout=120, what="the manifests' pods running")
        view = inspect(up, preset, tmp_path / "bin")
    assert view["signaturesChecked"] is True
    shown: dict[tuple[str, str, str], list[str]] = {}
    for node in view["nodes"]:
        assert node["ignored"] == [], node["ignored"]
        assert node["exporter"]["error"] == "", node["exporter"]
        for gpu in node["gpus"]:
            assert "usage" in gpu, gpu
            for share in gpu["pods"]:
                assert "usage" in share, share  # the simulated runtime attributes every container's use
                shown.setdefault((node["name"], share["pod"], share["container"]), []).append(
                    share["migUUID"] or gpu["uuid"]
                )
    expected = {}
    for pod in pods:
        assignment = json.loads(pod["metadata"]["annotations"][protocol.annotations.assignment])
        for container, shares in assignment["containers"].items():
            key = (pod["spec"]["nodeName"], pod["metadata"]["name"], container)
            expected[key] = sorted(s["uuid"] for s in shares)
    assert {k: sorted(v) for k, v in shown.items()} == expected

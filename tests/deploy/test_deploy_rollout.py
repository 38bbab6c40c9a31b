"""Roll-outs after a configuration change: every workload deploy-all.sh renders carries a
`checksum/config` annotation on its pod template, the sha256 of the data of the ConfigMap it mounts
(as rendered, from `data:` on), so a changed protocol or conf changes the pod template and
`deploy-all.sh deploy` rolls the pods, as the Helm chart's checksums do. The values written in
deploy/ are the current ones, so `kubectl apply -k deploy/` and `kubectl apply -f` carry them too."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from deploy.manifests import DEPLOY, documents, render_deploy, workloads
from fixtures.apiserver import Kubectl

ANNOTATION = "checksum/config"
WORKLOAD_COMPONENTS = ("runtime", "deviceplugin", "scheduler", "exporter", "controller", "webhook")


def data_checksum(configmap_text: str) -> str:
    """The sha256 of a ConfigMap document's text from its `data:` line to its end."""
    start = configmap_text.index("\ndata:") + 1
    return hashlib.sha256(configmap_text[start:].encode()).hexdigest()


def configmap_checksums(rendered: str) -> dict[tuple[str, str], str]:
    """(namespace, name) -> checksum of every ConfigMap in a deploy-all.sh render."""
    out = {}
    for part in rendered.split("\n---\n"):
        text = part if part.endswith("\n") else part + "\n"  # the split took the newline ending the document
        doc = yaml.safe_load(text)
        if doc and doc["kind"] == "ConfigMap":
            out[(doc["metadata"]["namespace"], doc["metadata"]["name"])] = data_checksum(text)
    return out


def mounted_configmaps(workload: dict[str, Any]) -> list[str]:
    volumes = workload["spec"]["template"]["spec"].get("volumes") or []
    names = [v["configMap"]["name"] for v in volumes if "configMap" in v]
    for v in volumes:
        names += [s["configMap"]["name"] for s in (v.get("projected") or {}).get("sources", []) if "configMap" in s]
    return names


def annotation(workload: dict[str, Any]) -> str:
    return str(workload["spec"]["template"]["metadata"]["annotations"][ANNOTATION])


@pytest.mark.parametrize(
    "args",
    [
        pytest.param((), id="defaults"),
        pytest.param(("--namespace=gpu-system", "--image=registry.example.com/rk:2"), id="namespace-and-image"),
    ],
)
def test_every_workload_carries_the_checksum_of_the_configmap_it_mounts(args: tuple[str, ...]) -> None:
    rendered = render_deploy(*args)
    checksums = configmap_checksums(rendered)
    objs = workloads(documents(rendered))
    assert len(objs) == len(WORKLOAD_COMPONENTS)
    for workload in objs:
        namespace = workload["metadata"]["namespace"]
        # one rendered ConfigMap each (the scheduler's optional plugins one is not rendered by default)
        (mounted,) = [name for name in mounted_configmaps(workload) if (namespace, name) in checksums]
        assert annotation(workload) == checksums[(namespace, mounted)], workload["metadata"]["name"]


def test_custom_scheduler_plugins_roll_the_scheduler_with_a_checksum_of_their_own() -> None:
    plugins = DEPLOY.parent / "examples" / "plugins"
    rendered = render_deploy("--components=scheduler", f"--scheduler-plugins={plugins}")
    checksums = configmap_checksums(rendered)
    (scheduler,) = workloads(documents(rendered))
    namespace = scheduler["metadata"]["namespace"]
    annotations = scheduler["spec"]["template"]["metadata"]["annotations"]
    assert annotations[ANNOTATION] == checksums[(namespace, "lj-runtimekit-scheduler-config")]
    assert annotations["checksum/plugins"] == checksums[(namespace, "lj-runtimekit-scheduler-plugins")]


@pytest.mark.parametrize("component", WORKLOAD_COMPONENTS)
def test_the_checksums_written_in_deploy_are_current(component: str) -> None:
    """So that `kubectl apply -k deploy/` (or -f) carries the right value too."""
    wanted = data_checksum((DEPLOY / component / "02-configmap.yaml").read_text())
    (manifest,) = (DEPLOY / component).glob("03-*.yaml")
    (written,) = [annotation(w) for w in workloads(documents(manifest.read_text()))]
    assert written == wanted, f"set {ANNOTATION}: {wanted} in {manifest.relative_to(DEPLOY.parent)}"


def edited_copy(tmp_path: Path, component: str, old: str, new: str) -> Path:
    """A copy of deploy/ whose `component` ConfigMap has `old` replaced by `new`; its deploy-all.sh."""
    copy = tmp_path / "deploy"
    if not copy.exists():
        shutil.copytree(DEPLOY, copy)
    configmap = copy / component / "02-configmap.yaml"
    text = configmap.read_text()
    assert old in text
    configmap.write_text(text.replace(old, new))
    return copy / "deploy-all.sh"


def run_script(script: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        ["bash", str(script), *args], capture_output=True, text=True, env={**os.environ, **(env or {})}, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def checksums_by_workload(rendered: str) -> dict[str, str]:
    return {w["metadata"]["name"]: annotation(w) for w in workloads(documents(rendered))}


def test_a_changed_conf_changes_the_checksum_of_the_workload_that_mounts_it_only(tmp_path: Path) -> None:
    before = checksums_by_workload(render_deploy())
    script = edited_copy(tmp_path, "scheduler", "gpushare.policy: packfrag", "gpushare.policy: fgd")
    after = checksums_by_workload(run_script(script, "render"))
    changed = {name for name in before if before[name] != after[name]}
    assert changed == {"lj-runtimekit-scheduler-framework"}


def test_a_changed_protocol_changes_every_checksum(tmp_path: Path) -> None:
    before = checksums_by_workload(render_deploy())
    for component in WORKLOAD_COMPONENTS:
        script = edited_copy(tmp_path, component, "memoryUnit: 1Gi", "memoryUnit: 2Gi")
    after = checksums_by_workload(run_script(script, "render"))
    assert all(before[name] != after[name] for name in before)


@pytest.mark.slow  # two deploy-all.sh deploys of a component and a rollout; the checksum tests above stay fast
def test_deploy_after_a_conf_change_rolls_the_workload(kubectl: Kubectl, tmp_path: Path) -> None:
    """With the real kubectl on the embedded API server: the second deploy changes the pod template."""
    env = {"HOME": str(kubectl.home), "KUBECTL": str(kubectl.default_binary)}
    args = ("--components=scheduler", f"--kubeconfig={kubectl.kubeconfig}")

    def scheduler() -> dict[str, Any]:
        got = kubectl("-n", "kube-system", "get", "deployment", "lj-runtimekit-scheduler-framework", "-o", "json")
        return dict(json.loads(got.stdout))

    run_script(DEPLOY / "deploy-all.sh", "deploy", *args, env=env)
    first = scheduler()
    script = edited_copy(tmp_path, "scheduler", "gpushare.policy: packfrag", "gpushare.policy: fgd")
    applied = run_script(script, "deploy", *args, env=env)
    assert "deployment.apps/lj-runtimekit-scheduler-framework configured" in applied
    assert "configmap/lj-runtimekit-scheduler-config configured" in applied
    second = scheduler()
    assert annotation(second) != annotation(first)
    assert second["metadata"]["generation"] == first["metadata"]["generation"] + 1
    again = run_script(script, "deploy", *args, env=env)
    assert "deployment.apps/lj-runtimekit-scheduler-framework unchanged" in again
    shutil.rmtree(tmp_path / "deploy")

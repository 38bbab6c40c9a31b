"""`kubectl apply` of the rendered manifests with a real kubectl to the embedded API server: deploy-all.sh
deploy creates everything, a second deploy changes nothing, restart restarts the workloads, delete
removes everything but the CRDs (and those when asked); the Helm render applies the same way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deploy.manifests import documents, key, render_chart, render_deploy, run_deploy_all
from fixtures.apiserver import KUBECTL_BINARIES, Kubectl

KINDS = "namespaces,customresourcedefinitions,serviceaccounts,clusterroles,clusterrolebindings,roles,rolebindings,configmaps,daemonsets,deployments,services,mutatingwebhookconfigurations,validatingwebhookconfigurations"  # noqa: E501


def deploy_all(kubectl: Kubectl, *args: str, binary: str | Path | None = None) -> str:
    env = {"HOME": str(kubectl.home), "KUBECTL": str(binary or kubectl.default_binary)}
    done = run_deploy_all(*args, f"--kubeconfig={kubectl.kubeconfig}", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def on_server(kubectl: Kubectl) -> set[tuple[str, str, str]]:
    """(kind, namespace, name) of the kit's objects on the server (labelled app.kubernetes.io/name=lj-runtimekit)."""
    listed = json.loads(kubectl("get", KINDS, "-A", "-l", "app.kubernetes.io/name=lj-runtimekit", "-o", "json").stdout)
    return {key(item) for item in listed["items"]}


def wanted(*args: str) -> set[tuple[str, str, str]]:
    return {key(obj) for obj in documents(render_deploy(*args))}


@pytest.mark.slow  # five deploy-all.sh runs of every component; the edge kubectls' runs below keep deploy twice
def test_deploy_is_idempotent_and_delete_removes_everything(kubectl: Kubectl) -> None:
    created = deploy_all(kubectl, "deploy")
    assert created.count(" created\n") == len(wanted())
    assert on_server(kubectl) == wanted()

    again = deploy_all(kubectl, "deploy")
    lines = again.strip().splitlines()
    assert len(lines) == len(wanted())
    assert all(line.endswith(" unchanged") for line in lines), again

    restarted = deploy_all(kubectl, "restart")
    assert restarted.count(" restarted\n") == 6  # every DaemonSet and Deployment
    scheduler = json.loads(
        kubectl("-n", "kube-system", "get", "deployment", "lj-runtimekit-scheduler-framework", "-o", "json").stdout
    )
    assert "kubectl.kubernetes.io/restartedAt" in scheduler["spec"]["template"]["metadata"]["annotations"]

    deploy_all(kubectl, "delete")
    assert on_server(kubectl) == wanted("--components=crds")  # the CRDs stay unless asked for
    deploy_all(kubectl, "delete", "--components=crds")
    assert on_server(kubectl) == set()
    deploy_all(kubectl, "delete", "--components=exporter")  # deleting what is gone is fine


def test_a_custom_namespace_is_created_and_used(kubectl: Kubectl) -> None:
    args = ("--namespace=gpu-system", "--image=registry.example.com/rk:2", "--components=scheduler,controller")
    deploy_all(kubectl, "deploy", *args)
    assert on_server(kubectl) == wanted(*args)
    assert kubectl("get", "namespace", "gpu-system").returncode == 0
    controller = json.loads(
        kubectl("-n", "gpu-system", "get", "deployment", "lj-runtimekit-controller", "-o", "json").stdout
    )
    container: dict[str, Any] = controller["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.example.com/rk:2"
    assert {"--lease-namespace=gpu-system", "--image=registry.example.com/rk:2"} <= set(container["args"])
    assert "--namespace=lj-runtimekit-jobs" in container["args"]  # its Jobs' own namespace, whatever the kit's
    deploy_all(kubectl, "delete", *args)
    assert on_server(kubectl) == set()


def test_the_helm_render_applies_and_reapplies_unchanged(kubectl: Kubectl, tmp_path: Path) -> None:
    rendered = tmp_path / "chart.yaml"
    rendered.write_text(render_chart())
    first = kubectl("apply", "-f", str(rendered)).stdout
    count = len(documents(rendered.read_text()))
    assert first.count(" created\n") == count
    second = kubectl("apply", "-f", str(rendered)).stdout.strip().splitlines()
    assert len(second) == count
    assert all(line.endswith(" unchanged") for line in second)


# The oldest and the newest kubectl bundled on this machine (the dispatcher picks one for the server).
EDGE_KUBECTLS = sorted({min(KUBECTL_BINARIES, default=""), max(KUBECTL_BINARIES, default="")} - {""})


@pytest.mark.parametrize("version", EDGE_KUBECTLS)
def test_every_bundled_kubectl_edge_applies_idempotently(kubectl: Kubectl, version: str) -> None:
    binary = KUBECTL_BINARIES[version]
    deploy_all(kubectl, "deploy", binary=binary)
    lines = deploy_all(kubectl, "deploy", binary=binary).strip().splitlines()
    assert lines
    assert all(line.endswith(" unchanged") for line in lines)
    assert on_server(kubectl) == wanted()


def test_the_documented_customisation_flow(kubectl: Kubectl, tmp_path: Path) -> None:
    """docs/customise.md: edit the protocol in the ConfigMaps, check them live, apply, restart."""
    from runtimekit.cli.main import main

    deploy_all(kubectl, "deploy", "--components=scheduler,exporter")

    def live_check() -> int:
        live = tmp_path / "live.yaml"
        selector = "app.kubernetes.io/name=lj-runtimekit"
        live.write_text(kubectl("-n", "kube-system", "get", "configmaps", "-l", selector, "-o", "yaml").stdout)
        return main(["protocol", "check", str(live)])

    assert live_check() == 0
    edited = render_deploy("--components=scheduler").replace("memoryUnit: 1Gi", "memoryUnit: 2Gi")
    kubectl("apply", "-f", "-", stdin=edited)
    assert live_check() == 1  # the scheduler's ConfigMap now disagrees with the exporter's
    everything = render_deploy("--components=scheduler,exporter").replace("memoryUnit: 1Gi", "memoryUnit: 2Gi")
    kubectl("apply", "-f", "-", stdin=everything)
    assert live_check() == 0
    assert deploy_all(kubectl, "restart", "--components=scheduler,exporter").count(" restarted\n") == 2

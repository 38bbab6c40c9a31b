"""deploy/draplugin: its DeviceClasses are the ones the plugin and `runtimekit up` create, its Role
grants exactly what the plugin's API calls need (the RBAC table of tests/deploy), and its DaemonSet rolls
with the device plugin's ConfigMap it reads. The Helm chart's `draPlugin` (off by default) renders the
same objects, NVIDIA's DeviceClasses under the nvidia preset, and refuses values it cannot honour."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from deploy.manifests import CHART, helm, normalise, normalised, render_chart, render_deploy
from deploy.manifests import documents as documents_of
from deploy.recorder import RbacPolicy
from deploy.test_deploy_rbac_table import TABLE
from deploy.test_deploy_rollout import configmap_checksums
from runtimekit.draplugin.names import KIT_NAMES, NVIDIA_NAMES

FOLDER = Path(__file__).resolve().parents[2] / "deploy" / "draplugin"
MANIFESTS = ("00-deviceclasses.yaml", "01-rbac.yaml", "03-daemonset.yaml")


def documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((FOLDER / name).read_text()) if d]


def test_the_device_classes_are_the_plugins() -> None:
    assert documents("00-deviceclasses.yaml") == KIT_NAMES.device_classes()


def test_the_role_grants_what_the_plugin_calls_need() -> None:
    objs = documents("01-rbac.yaml")
    (daemonset,) = documents("03-daemonset.yaml")
    spec = daemonset["spec"]["template"]["spec"]
    policy = RbacPolicy.for_service_account(objs, "kube-system", spec["serviceAccountName"])
    granted = {(g.verb, g.group, g.resource) for g in policy.grants}
    needed = {need for components, needs in TABLE.values() if "dra-plugin" in components for need in needs}
    assert granted == needed
    assert spec["containers"][0]["args"][0] == "dra-plugin"


def test_the_kustomization_lists_every_manifest() -> None:
    (kustomization,) = documents("kustomization.yaml")
    assert kustomization["resources"] == sorted(p.name for p in FOLDER.glob("[0-9][0-9]-*.yaml"))


def test_the_daemonset_rolls_with_the_device_plugins_configmap() -> None:
    (daemonset,) = documents("03-daemonset.yaml")
    checksums = configmap_checksums(render_deploy("--components=deviceplugin"))
    (device_plugin_config,) = checksums.values()  # the ConfigMap it mounts: the device plugin's
    assert (
        daemonset["spec"]["template"]["spec"]["volumes"][0]["configMap"]["name"] == "lj-runtimekit-device-plugin-config"
    )
    assert daemonset["spec"]["template"]["metadata"]["annotations"] == {"checksum/config": device_plugin_config}


def test_the_chart_renders_deploy_draplugin_only_when_enabled() -> None:
    base = normalised(documents_of(render_chart()))
    enabled = normalised(documents_of(render_chart("--set", "draPlugin.enabled=true")))
    added = {k: v for k, v in enabled.items() if k not in base}
    assert added == normalised(d for name in MANIFESTS for d in documents(name))
    assert {k: v for k, v in enabled.items() if k in base} == base  # nothing else changes
    rendered = documents_of(render_chart("--set", "draPlugin.enabled=true"))
    workloads = {w["metadata"]["name"]: w for w in rendered if w["kind"] == "DaemonSet"}
    checksum = {name: w["spec"]["template"]["metadata"]["annotations"] for name, w in workloads.items()}
    assert checksum["lj-runtimekit-dra-plugin-ds"] == checksum["lj-runtimekit-device-plugin-ds"]  # one ConfigMap


def test_the_nvidia_preset_installs_nvidias_device_classes() -> None:
    rendered = documents_of(render_chart("--set", "draPlugin.enabled=true", "--set", "protocol.preset=nvidia"))
    classes = [normalise(d) for d in rendered if d["kind"] == "DeviceClass"]
    assert classes == NVIDIA_NAMES.device_classes()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        pytest.param(
            ("draPlugin.enabled=true", "devicePlugin.enabled=false"),
            "draPlugin.enabled needs devicePlugin.enabled",
            id="without-the-device-plugin",
        ),
        pytest.param(("draPlugin.cdiDir=cdi",), "at '/draPlugin/cdiDir'", id="relative-cdi-dir"),
        pytest.param(("draPlugin.replicas=2",), "at '/draPlugin'", id="unknown-value"),
    ],
)
def test_the_chart_refuses_bad_dra_values(flags: tuple[str, ...], message: str, tmp_path: Path) -> None:
    done = helm(tmp_path, "template", "x", str(CHART), *(a for f in flags for a in ("--set", f)))
    assert done.returncode != 0
    assert message in done.stderr

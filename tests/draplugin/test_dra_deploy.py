"""deploy/draplugin: its DeviceClasses are the ones the plugin and `runtimekit up` create, and its Role
grants exactly what the plugin's API calls need (the RBAC table of tests/deploy)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from deploy.recorder import RbacPolicy
from deploy.test_deploy_rbac_table import TABLE
from runtimekit.draplugin.names import KIT_NAMES

FOLDER = Path(__file__).resolve().parents[2] / "deploy" / "draplugin"


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

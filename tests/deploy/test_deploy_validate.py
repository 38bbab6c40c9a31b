"""Every rendered manifest (deploy-all.sh and Helm, default and customised) validates against the
Kubernetes schemas of the supported versions (kubernetes-validate, strict: unknown fields fail), and
the CRDs are structural schemas that accept good PodGroups and Queues and reject bad ones."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import kubernetes_validate
import kubernetes_validate.utils
import pytest
import yaml

from deploy.manifests import DEPLOY, KUBERNETES_VERSIONS, documents, render_chart, render_deploy, render_helm

VERSIONS = KUBERNETES_VERSIONS

CUSTOM_VALUES = {
    "namespace": "gpu-system",
    "imagePullSecrets": [{"name": "registry-credentials"}],
    "runtime": {"runtimeClassName": "nvidia", "backend": "simulated", "simulateGpus": "2xH200", "isolation": "mps"},
    "scheduler": {"replicas": 2, "nodeSelector": {"node-role.kubernetes.io/control-plane": ""}},
    "exporter": {"priorityClassName": "system-node-critical", "service": {"enabled": False}},
    "controller": {"leaderElect": False, "tolerations": [{"key": "dedicated", "operator": "Exists"}]},
}


@pytest.fixture(scope="module", autouse=True)
def cached_schemas() -> Iterator[None]:
    """kubernetes-validate reads its schema files (the definitions are megabytes) on every call; read each once."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            kubernetes_validate.utils,
            "schema_contents",
            functools.cache(kubernetes_validate.utils.schema_contents),
        )
        yield


@pytest.fixture(scope="module")
def renders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    home = tmp_path_factory.mktemp("helm-home")
    values = home / "custom.yaml"
    values.write_text(yaml.safe_dump(CUSTOM_VALUES))
    return {
        "deploy-all.sh": documents(render_deploy()),
        "deploy-all.sh --image --namespace": documents(render_deploy("--image=r.example/k/rk:2", "--namespace=gpu")),
        "helm": documents(render_chart()),
        "helm custom values": documents(render_helm(home, "-f", str(values))),
    }


@pytest.mark.parametrize("version", VERSIONS)
def test_every_manifest_validates(renders: dict[str, list[dict[str, Any]]], version: str) -> None:
    problems = []
    for label, objs in renders.items():
        assert objs
        for obj in objs:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                problems.append(f"{label}: {obj['kind']} {obj['metadata']['name']}: {exc.message}")
    assert not problems, "\n".join(problems)


def test_validation_catches_a_bad_field(renders: dict[str, list[dict[str, Any]]]) -> None:
    daemonset = next(o for o in renders["deploy-all.sh"] if o["kind"] == "DaemonSet")
    daemonset["spec"]["template"]["spec"]["hostPid"] = True  # misspelt: strict validation rejects it
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(daemonset, "1.35", strict=True)
    del daemonset["spec"]["template"]["spec"]["hostPid"]


# -- CRDs --------------------------------------------------------------------------------------


def crd(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DEPLOY / "crds" / name).read_text())
    return loaded


def schema_of(name: str) -> dict[str, Any]:
    (version,) = crd(name)["spec"]["versions"]
    result: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return result


def structural_problems(node: dict[str, Any], path: str = "") -> list[str]:
    """What makes a schema non-structural (every node typed; int-or-string and preserved fields aside)."""
    problems = []
    if (
        "type" not in node
        and not node.get("x-kubernetes-int-or-string")
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        problems.append(f"{path or '/'}: no type")
    for name, child in (node.get("properties") or {}).items():
        problems += structural_problems(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        problems += structural_problems(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        problems += structural_problems(node["additionalProperties"], f"{path}{{*}}")
    return problems


@pytest.mark.parametrize("name", ["01-podgroups.yaml", "02-queues.yaml"])
def test_crds_are_structural_with_a_status_subresource(name: str) -> None:
    spec = crd(name)["spec"]
    assert spec["group"] == "scheduling.volcano.sh"
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1beta1", True, True)
    assert version["subresources"] == {"status": {}}
    assert structural_problems(schema_of(name)) == []


GOOD_PODGROUP = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "PodGroup",
    "metadata": {"name": "train", "namespace": "default"},
    "spec": {
        "minMember": 4,
        "queue": "research",
        "minResources": {"cpu": 8, "aliyun.com/gpu-core.percentage": "200", "memory": "64Gi"},
        "minTaskMember": {"worker": 3},
        "priorityClassName": "high",
    },
    "status": {
        "phase": "Running",
        "running": 4,
        "conditions": [{"type": "Scheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    },
}
GOOD_QUEUE = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "Queue",
    "metadata": {"name": "research"},
    "spec": {"weight": 2, "capability": {"aliyun.com/gpu": 16}, "reclaimable": True, "guarantee": {"resource": {}}},
    "status": {"state": "Open", "allocated": {"cpu": "10"}},
}


def changed(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    copy: dict[str, Any] = yaml.safe_load(yaml.safe_dump(obj))
    *parents, last = path.split(".")
    node = copy
    for part in parents:
        node = node[part]
    node[last] = value
    return copy


@pytest.mark.parametrize(
    ("name", "obj", "valid"),
    [
        pytest.param("01-podgroups.yaml", GOOD_PODGROUP, True, id="podgroup"),
        pytest.param("01-podgroups.yaml", changed(GOOD_PODGROUP, "spec.minMember", -1), False, id="negative-min"),
        pytest.param("01-podgroups.yaml", changed(GOOD_PODGROUP, "spec.minMember", "four"), False, id="min-string"),
        pytest.param(
            "01-podgroups.yaml", changed(GOOD_PODGROUP, "spec.minResources", {"cpu": "lots"}), False, id="bad-quantity"
        ),
        pytest.param("02-queues.yaml", GOOD_QUEUE, True, id="queue"),
        pytest.param("02-queues.yaml", changed(GOOD_QUEUE, "spec.weight", 0), False, id="zero-weight"),
        pytest.param("02-queues.yaml", changed(GOOD_QUEUE, "spec.reclaimable", "yes"), False, id="reclaimable-str"),
    ],
)
def test_crd_schemas_accept_good_and_reject_bad_objects(name: str, obj: dict[str, Any], valid: bool) -> None:
    validator = jsonschema.Draft7Validator(schema_of(name))
    errors = list(validator.iter_errors(obj))
    assert (not errors) == valid, [e.message for e in errors]


def test_chart_crds_dir_is_what_helm_installs(tmp_path: Path) -> None:
    objs = documents(render_chart())
    assert [o["metadata"]["name"] for o in objs if o["kind"] == "CustomResourceDefinition"] == [
        "podgroups.scheduling.volcano.sh",
        "queues.scheduling.volcano.sh",
    ]

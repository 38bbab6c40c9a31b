"""The install, upgrade and customisation guides stay true to the manifests: their links resolve, the
support matrix lists the Kubernetes versions the manifests are validated against, the names they
tell operators to type (node label, workloads, ConfigMaps) are the rendered ones, and the install
guide shows every way to install, each with the test or CI step that exercises it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from deploy.manifests import KUBERNETES_VERSIONS, ROOT, documents, render_deploy, workloads

GUIDES = [ROOT / "docs" / name for name in ("install.md", "upgrade.md", "customise.md")]


@pytest.mark.parametrize("guide", GUIDES, ids=lambda p: p.name)
def test_relative_links_resolve(guide: Path) -> None:
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", guide.read_text()):
        assert (guide.parent / target).resolve().exists(), f"{guide.name}: {target}"


def test_the_support_matrix_lists_the_validated_versions() -> None:
    row = next(
        line for line in (ROOT / "docs" / "install.md").read_text().splitlines() if line.startswith("| Kubernetes")
    )
    listed = re.findall(r"1\.\d+", row.split("|")[2])
    assert set(KUBERNETES_VERSIONS) <= set(listed)
    assert listed == [f"1.{minor}" for minor in range(28, 36)]


def test_the_guides_name_what_is_rendered() -> None:
    text = "".join(guide.read_text() for guide in GUIDES)
    objs = documents(render_deploy())
    for obj in workloads(objs):
        assert obj["metadata"]["name"] in text
        for key, value in (obj["spec"]["template"]["spec"].get("nodeSelector") or {}).items():
            assert f"{key}={value}" in text
    for obj in objs:
        if obj["kind"] == "ConfigMap":
            assert any(
                f"deploy/{component}/02-configmap.yaml" in text
                for component in ("runtime", "deviceplugin", "scheduler", "exporter", "controller")
            )


# Each install path the guide must show, with a command it gives and the test that exercises it.
INSTALL_PATHS = {
    "pip": ("pip install ./runtimekit", "tests/packaging/test_install.py"),
    "pipx": ("pipx install ./runtimekit", "tests/packaging/test_install.py"),
    "image": ("scripts/build_image.sh --tag=", "make image-test"),
    "deploy-all.sh": ("deploy/deploy-all.sh deploy --image=", "tests/deploy/test_deploy_apply.py"),
    "kustomize": ("kubectl apply -k deploy/", "tests/deploy/test_deploy_kustomize.py"),
    "helm": ("helm install lj-runtimekit charts/lj-runtimekit", "tests/deploy/test_helm_chart.py"),
}


@pytest.mark.parametrize("path", list(INSTALL_PATHS))
def test_the_install_guide_shows_every_install_path_and_what_checks_it(path: str) -> None:
    text = (ROOT / "docs" / "install.md").read_text()
    command, checked_by = INSTALL_PATHS[path]
    assert command in text
    assert checked_by in text
    if checked_by.startswith("tests/"):
        assert (ROOT / checked_by).is_file()
    else:
        assert checked_by.split()[1] + ":" in (ROOT / "Makefile").read_text()
        assert checked_by in (ROOT / ".ci" / "run").read_text()

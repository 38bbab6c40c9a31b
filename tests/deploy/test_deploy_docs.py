"""The install, upgrade and customisation guides stay true to the manifests: their links resolve, the
support matrix lists the Kubernetes versions the manifests are validated against, and the names they
tell operators to type (node label, workloads, ConfigMaps) are the rendered ones."""

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

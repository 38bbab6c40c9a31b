"""deploy/ as a kustomize base, rendered by the real kubectl (`kubectl kustomize`, with the oldest and
the newest kustomize bundled here): the base renders exactly the objects `deploy-all.sh render` does,
each component's folder those of `--components=<it>`, and the example overlay those of deploy-all.sh
with the overlay's components, namespace and image. Applied to the embedded API server, `kubectl
apply -k` and `deploy-all.sh deploy` are interchangeable: one after the other changes nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from deploy.manifests import COMPONENTS, DEPLOY, by_key, documents, render_deploy, run_deploy_all
from fixtures.apiserver import KUBECTL_BINARIES, Kubectl

OVERLAY = DEPLOY / "overlays" / "example"
# kubectl 1.27 bundles kustomize 5.0, 1.33 kustomize 5.6
EDGE_KUBECTLS = sorted({min(KUBECTL_BINARIES, default=""), max(KUBECTL_BINARIES, default="")} - {""})


def kustomize(binary: Path, folder: Path) -> str:
    done = subprocess.run([str(binary), "kustomize", str(folder)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def overlay_args() -> tuple[str, ...]:
    """The deploy-all.sh arguments that mean what the example overlay says."""
    kustomization = yaml.safe_load((OVERLAY / "kustomization.yaml").read_text())
    components = [r.removeprefix("../../") for r in kustomization["resources"] if r.startswith("../../")]
    settings = yaml.safe_load((OVERLAY / "settings.yaml").read_text())["data"]
    return (
        f"--components={','.join(components)}",
        f"--namespace={settings['namespace']}",
        f"--image={settings['image']}",
    )


@pytest.fixture(params=EDGE_KUBECTLS)
def binary(request: pytest.FixtureRequest) -> Path:
    return KUBECTL_BINARIES[request.param]


def test_the_base_renders_what_deploy_all_renders(binary: Path) -> None:
    assert by_key(documents(kustomize(binary, DEPLOY))) == by_key(documents(render_deploy()))


@pytest.mark.parametrize("component", COMPONENTS)
def test_each_component_folder_renders_that_component(binary: Path, component: str) -> None:
    rendered = by_key(documents(kustomize(binary, DEPLOY / component)))
    assert rendered == by_key(documents(render_deploy(f"--components={component}")))


def test_the_base_lists_every_component_and_every_manifest() -> None:
    assert yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"] == list(COMPONENTS)
    for component in COMPONENTS:
        listed = yaml.safe_load((DEPLOY / component / "kustomization.yaml").read_text())["resources"]
        assert listed == sorted(p.name for p in (DEPLOY / component).glob("[0-9][0-9]-*.yaml")), component


def test_the_example_overlay_renders_what_deploy_all_renders_with_its_settings(binary: Path) -> None:
    args = overlay_args()
    assert "--namespace=kube-system" not in args  # the example changes every setting it shows
    assert not args[0].endswith(",".join(COMPONENTS))
    assert by_key(documents(kustomize(binary, OVERLAY))) == by_key(documents(render_deploy(*args)))


def lines_all_unchanged(output: str) -> bool:
    lines = output.strip().splitlines()
    return bool(lines) and all(line.endswith(" unchanged") for line in lines)


@pytest.mark.slow  # three applies of every manifest each; the renders above compare the same objects fast
@pytest.mark.parametrize(
    ("folder", "args"),
    [pytest.param(DEPLOY, (), id="base"), pytest.param(OVERLAY, overlay_args(), id="overlay")],
)
def test_apply_k_and_deploy_all_are_interchangeable(kubectl: Kubectl, folder: Path, args: tuple[str, ...]) -> None:
    namespace = next((a.split("=", 1)[1] for a in args if a.startswith("--namespace=")), "kube-system")
    if kubectl("get", "namespace", namespace, check=False).returncode != 0:
        kubectl("create", "namespace", namespace)
    created = kubectl("apply", "-k", str(folder)).stdout
    assert created.count(" created\n") == len(documents(render_deploy(*args)))
    env = {"HOME": str(kubectl.home), "KUBECTL": str(kubectl.default_binary)}
    done = run_deploy_all("deploy", *args, f"--kubeconfig={kubectl.kubeconfig}", env=env)
    assert done.returncode == 0, done.stderr
    assert lines_all_unchanged(done.stdout), done.stdout
    assert lines_all_unchanged(kubectl("apply", "-k", str(folder)).stdout)

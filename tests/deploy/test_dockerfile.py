"""The Dockerfile (read with a small parser) and the Makefile's docker and deploy targets: a pinned
base that a build argument replaces, a builder stage that builds the wheel (the build backend
generates the gRPC stubs) into a virtualenv, a runtime stage that copies only that virtualenv and
runs as the non-root user the manifests expect, the `runtimekit` entry point, a build context
holding what the builder copies, and clear failures. The image itself is built and run by
tests/deploy/test_image.py (`make image-test`)."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass

import pytest

from deploy.manifests import DEFAULT_IMAGE, ROOT, containers, documents, render_deploy, tool, workloads


@dataclass(frozen=True)
class Instruction:
    stage: str
    keyword: str
    args: str


def instructions(text: str) -> list[Instruction]:
    """Dockerfile instructions with their stage name (`FROM ... AS name`); comments and continuations handled."""
    logical: list[str] = []
    current = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    out, stage = [], ""
    for line in logical:
        keyword, _, args = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            match = re.search(r"\bAS\s+(\S+)", args, re.IGNORECASE)
            stage = match.group(1) if match else ""
        out.append(Instruction(stage, keyword, args.strip()))
    return out


@pytest.fixture(scope="module")
def dockerfile() -> list[Instruction]:
    return instructions((ROOT / "Dockerfile").read_text())


def of(items: list[Instruction], stage: str, keyword: str) -> list[str]:
    return [i.args for i in items if i.stage == stage and i.keyword == keyword]


def test_the_base_image_is_pinned_by_tag_and_digest(dockerfile: list[Instruction]) -> None:
    (arg,) = [i.args for i in dockerfile if i.keyword == "ARG" and i.args.startswith("PYTHON_IMAGE=")]
    assert re.fullmatch(r"PYTHON_IMAGE=python:3\.11\.\d+-slim-bookworm@sha256:[0-9a-f]{64}", arg)
    # one build argument names the base of both stages (scripts/build_image.sh passes a local one)
    assert [i.args for i in dockerfile if i.keyword == "FROM"] == [
        "${PYTHON_IMAGE} AS builder",
        "${PYTHON_IMAGE} AS runtime",
    ]


def test_the_builder_builds_the_wheel_into_a_virtualenv_without_pip(dockerfile: list[Instruction]) -> None:
    runs = " ".join(of(dockerfile, "builder", "RUN"))
    assert "gen_proto" not in runs  # the build backend (setup.py) generates the stubs
    assert "python -m build --wheel" in runs
    assert "python3 -m venv --without-pip /opt/runtimekit" in runs
    assert "--python /opt/runtimekit/bin/python install" in runs
    assert "--mount=type=cache,target=/root/.cache/pip" in runs  # pip's cache never lands in a layer


def test_the_runtime_stage_copies_the_virtualenv_only_and_runs_as_the_manifests_user(
    dockerfile: list[Instruction],
) -> None:
    assert of(dockerfile, "runtime", "COPY") == ["--from=builder /opt/runtimekit /opt/runtimekit"]
    (env,) = of(dockerfile, "runtime", "ENV")
    assert "PATH=/opt/runtimekit/bin:${PATH}" in env
    assert of(dockerfile, "runtime", "USER") == ["65532:65532"]  # numeric, so runAsNonRoot can verify it
    assert [json.loads(e) for e in of(dockerfile, "runtime", "ENTRYPOINT")] == [["runtimekit"]]
    non_root = {
        c["securityContext"].get("runAsUser") or w["spec"]["template"]["spec"]["securityContext"].get("runAsUser")
        for w in workloads(documents(render_deploy()))
        for c in containers(w)
        if (w["spec"]["template"]["spec"].get("securityContext") or {}).get("runAsNonRoot")
    }
    assert non_root == {65532}


def test_the_build_context_holds_what_the_builder_copies(dockerfile: list[Instruction]) -> None:
    allowed = {
        line[1:].rstrip("/") for line in (ROOT / ".dockerignore").read_text().splitlines() if line.startswith("!")
    }
    sources = [args.split()[0] for args in of(dockerfile, "builder", "COPY")]
    assert sources
    for source in sources:
        assert source.rstrip("/") in allowed, source
        assert (ROOT / source).exists(), source


def test_hadolint_finds_nothing() -> None:
    hadolint = tool("hadolint")
    done = subprocess.run([str(hadolint), str(ROOT / "Dockerfile")], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def make(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), *args], capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize(
    ("docker", "message"),
    [
        pytest.param("/nonexistent/docker", "is not installed", id="no-client"),
        pytest.param("false", "no container engine answers", id="no-engine"),
    ],
)
def test_make_docker_fails_clearly_without_an_engine(docker: str, message: str) -> None:
    done = make("docker", f"DOCKER={docker}")
    assert done.returncode != 0
    assert "make docker: " in done.stderr
    assert message in done.stderr


def test_make_targets_use_the_configured_image() -> None:
    docker = make("-n", "docker", "IMAGE=registry.example.com/rk", "TAG=9.9")
    assert "build --build-arg VERSION=9.9 -t registry.example.com/rk:9.9 ." in docker.stdout
    deploy = make("-n", "deploy", "IMAGE=registry.example.com/rk", "TAG=9.9", "DEPLOY_ARGS=--namespace=gpu")
    assert "deploy/deploy-all.sh deploy --image=registry.example.com/rk:9.9 --namespace=gpu" in deploy.stdout
    default = make("-n", "deploy").stdout
    assert f"--image={DEFAULT_IMAGE}" in default


BUILD_IMAGE = ROOT / "scripts" / "build_image.sh"


def test_build_image_is_valid_bash_and_fails_clearly_on_a_bad_argument() -> None:
    assert subprocess.run(["bash", "-n", str(BUILD_IMAGE)], check=False).returncode == 0
    done = subprocess.run([str(tool("shellcheck")), str(BUILD_IMAGE)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout
    usage = subprocess.run(["bash", str(BUILD_IMAGE), "--help"], capture_output=True, text=True, check=False)
    assert usage.returncode == 0
    assert "--isolation chroot" in usage.stdout
    bad = subprocess.run(["bash", str(BUILD_IMAGE), "--push"], capture_output=True, text=True, check=False)
    assert bad.returncode == 2
    assert bad.stderr.strip() == "build_image.sh: unknown argument '--push' (see --help)"

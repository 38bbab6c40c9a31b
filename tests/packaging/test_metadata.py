"""The package's metadata and version: an SPDX licence, a version written in one place
(runtimekit/_version.py) that every other spelling agrees with, `runtimekit --version` with the
runtime API level and the protocol version, and gRPC calls in src/ that type-check without ignores."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from runtimekit import __version__
from runtimekit._version import DEFAULT_IMAGE, IMAGE_REPOSITORY
from runtimekit.api.runtime_features import API_LEVEL
from runtimekit.protocol import PROTOCOL_VERSION

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_licence_is_an_spdx_expression() -> None:
    assert PYPROJECT["project"]["license"] == "Apache-2.0"


def test_the_build_generates_the_stubs_with_the_tools_it_requires() -> None:
    requires = " ".join(PYPROJECT["build-system"]["requires"])
    assert "grpcio-tools" in requires
    assert "mypy-protobuf" in requires
    assert "from setuptools.command.build_py import build_py" in (ROOT / "setup.py").read_text()


def test_the_version_is_written_in_one_place() -> None:
    assert "version" not in PYPROJECT["project"]
    assert "version" in PYPROJECT["project"]["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "runtimekit._version.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)


def _read(relative: str) -> str:
    return (ROOT / relative).read_text()


def _deploy_all() -> list[str]:
    return re.findall(r'^DEFAULT_IMAGE="(.*)"', _read("deploy/deploy-all.sh"), re.M)


def _manifests() -> list[str]:
    images: set[str] = set()
    for path in sorted((ROOT / "deploy").glob("*/[0-9][0-9]-*.yaml")):
        images |= set(re.findall(r"image: ([^\s\"{]+)", path.read_text()))
        images |= set(re.findall(r"--image=(\S+)", path.read_text()))
    return sorted(images)


def _chart() -> list[str]:
    return [f"{IMAGE_REPOSITORY}:{yaml.safe_load(_read('charts/lj-runtimekit/Chart.yaml'))['appVersion']}"]


def _dockerfile() -> list[str]:
    return [f"{IMAGE_REPOSITORY}:{v}" for v in re.findall(r"^ARG VERSION=(\S+)", _read("Dockerfile"), re.M)]


SPELLINGS = {
    "deploy-all.sh": _deploy_all,
    "deploy/*/*.yaml": _manifests,
    "Chart.yaml": _chart,
    "Dockerfile": _dockerfile,
}


@pytest.mark.parametrize("where", list(SPELLINGS))
def test_every_spelling_of_the_version_agrees(where: str) -> None:
    images = SPELLINGS[where]()
    assert images, f"no version found in {where}"
    assert set(images) == {DEFAULT_IMAGE}


def test_version_prints_the_kit_the_runtime_api_and_the_protocol_versions() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "runtimekit.cli.main", "--version"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"runtimekit {__version__}",
        f"runtime API level {API_LEVEL}",
        f"protocol version {PROTOCOL_VERSION}",
    ]


def test_no_grpc_call_in_src_needs_a_type_ignore() -> None:
    """The generated `_pb2_grpc.pyi` type the stubs, servicers and `add_*_to_server`."""
    grpc_module = re.compile(r"\b\w+_grpc\.|\bpb\.\w+|\bdp\.\w+|\bpr\.\w+")
    offending = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted((ROOT / "src" / "runtimekit").rglob("*.py"))
        if not path.name.endswith(("_pb2.py", "_pb2_grpc.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "type: ignore" in line and grpc_module.search(line)
    ]
    assert offending == []

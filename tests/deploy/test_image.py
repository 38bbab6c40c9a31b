"""The kit's image, built as CI builds it and checked from its own files (`make image-test`).

scripts/build_image.sh builds the Dockerfile with `podman build --isolation chroot` on a Debian
bookworm base made with mmdebstrap, in a podman storage of this test's own. Containers cannot run
here (podman run needs cgroups this machine does not give), so the checks mount the image's
filesystem (`podman image mount`) and run its entry point in a chroot, as the image's user and with
the image's environment: `runtimekit --version`, every command's `--help`, the non-root user, and no
build tools or caches left in the final stage. The build's JSON report (size, seconds) is written to
$RUNTIMEKIT_IMAGE_REPORT when set. Needs root, podman and mmdebstrap (Debian: apt-get install podman
mmdebstrap); skipped without them, failed under RUNTIMEKIT_REQUIRE_TOOLS (CI).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from deploy.manifests import ROOT
from fixtures.waiting import SCALE
from runtimekit import __version__
from runtimekit.cli.main import COMMANDS, version_text

# The build is the module fixture's setup, which pytest-timeout counts in the first test's time: a
# cold build on a busy 2-core machine takes longer than the suite's 300 s per test.
BUILD_SECONDS = 600 * SCALE
pytestmark = [pytest.mark.image, pytest.mark.timeout(BUILD_SECONDS + 120 * SCALE)]

BUILD_IMAGE = ROOT / "scripts" / "build_image.sh"
TAG = f"localhost/lj-runtimekit-image-test:{__version__}"
USER = "65532:65532"
# What the builder stage uses and the runtime stage must not carry.
BUILD_ONLY_PACKAGES = ("pip", "setuptools", "wheel", "build", "grpc_tools", "mypy_protobuf")
BUILD_ONLY_PATHS = ("src", "dist", "wheels", "opt/build", "root/.cache", "etc/pip.conf", "run/secrets")
COMPILERS = ("gcc", "cc", "c++", "g++", "clang", "make", "ld")


@dataclass(frozen=True)
class Built:
    storage: Path
    report: dict[str, Any]

    def podman(self, *args: str) -> str:
        done = subprocess.run(
            ["podman", "--root", str(self.storage), "--runroot", str(self.storage / "run"), *args],
            capture_output=True,
            text=True,
            timeout=120 * SCALE,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "building and mounting the image needs root"
    for tool in ("podman", "mmdebstrap", "chroot"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian: apt-get install podman mmdebstrap)"
    return None


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    missing = _missing()
    if missing:
        if os.environ.get("RUNTIMEKIT_REQUIRE_TOOLS"):
            pytest.fail(missing)
        pytest.skip(missing)
    storage = tmp_path_factory.mktemp("podman")
    done = subprocess.run(
        ["bash", str(BUILD_IMAGE), f"--tag={TAG}", f"--root={storage}"],
        capture_output=True,
        text=True,
        timeout=BUILD_SECONDS,
        check=False,
    )
    try:
        assert done.returncode == 0, done.stderr[-6000:]
        report = json.loads(done.stdout)
        if os.environ.get("RUNTIMEKIT_IMAGE_REPORT"):
            path = Path(os.environ["RUNTIMEKIT_IMAGE_REPORT"])
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(report, indent=2) + "\n")
        yield Built(storage, report)
    finally:
        subprocess.run(
            ["podman", "--root", str(storage), "--runroot", str(storage / "run"), "system", "reset", "--force"],
            capture_output=True,
            timeout=300,
            check=False,
        )
        shutil.rmtree(storage, ignore_errors=True)


@pytest.fixture(scope="module")
def config(built: Built) -> dict[str, Any]:
    inspected: dict[str, Any] = json.loads(built.podman("image", "inspect", TAG))[0]
    return inspected


@pytest.fixture(scope="module")
def rootfs(built: Built) -> Iterator[Path]:
    path = Path(built.podman("image", "mount", TAG))
    try:
        yield path
    finally:
        built.podman("image", "unmount", TAG)


def in_image(rootfs: Path, config: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    """The image's entry point with `args`, in a chroot of its filesystem, as its user, with its env."""
    image = config["Config"]
    chroot = ["chroot", f"--userspec={image['User']}", str(rootfs)]
    return subprocess.run(
        [*chroot, "/usr/bin/env", "-i", *image["Env"], *image["Entrypoint"], *args],
        capture_output=True,
        text=True,
        timeout=120 * SCALE,
        check=False,
    )


def test_the_build_reports_its_size_and_time(built: Built) -> None:
    report = built.report
    assert report["image"] == TAG
    assert report["version"] == __version__
    assert report["base"] == "localhost/lj-runtimekit-base:bookworm"
    assert report["size_bytes"] > 0
    assert report["build_seconds"] > 0


def test_the_image_runs_as_the_manifests_non_root_user(config: dict[str, Any], rootfs: Path) -> None:
    image = config["Config"]
    assert image["User"] == USER
    assert image["Entrypoint"] == ["runtimekit"]
    assert image["Labels"]["org.opencontainers.image.version"] == __version__
    passwd = {line.split(":")[0]: line.split(":") for line in (rootfs / "etc" / "passwd").read_text().splitlines()}
    assert passwd["runtimekit"][2:4] == USER.split(":")


def test_version_in_the_image(config: dict[str, Any], rootfs: Path) -> None:
    done = in_image(rootfs, config, "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout == version_text()


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_has_help_in_the_image(command: str, config: dict[str, Any], rootfs: Path) -> None:
    done = in_image(rootfs, config, command, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: runtimekit {command}")


def test_no_build_tools_or_caches_are_left(rootfs: Path) -> None:
    site = next((rootfs / "opt" / "runtimekit" / "lib").glob("python3*/site-packages"))
    assert (site / "runtimekit").is_dir()
    assert [p for p in BUILD_ONLY_PACKAGES if (site / p).exists()] == []
    assert [p for p in BUILD_ONLY_PATHS if (rootfs / p).exists()] == []
    assert [c for c in COMPILERS if (rootfs / "usr" / "bin" / c).exists()] == []
    assert list((rootfs / "opt").rglob("*.whl")) == []
    assert list((rootfs / "tmp").iterdir()) == []
    caches = [p for home in ("root", "nonexistent") for p in (rootfs / home).glob(".cache")]
    assert caches == []

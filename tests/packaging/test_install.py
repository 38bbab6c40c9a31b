"""Installing the kit as a user does, with no make: `pip install` of a clean clone (git clone of HEAD,
so no generated stubs), of the sdist and of the wheel built from that clone, and `pipx install` of the
clone, each into a fresh virtualenv outside the source tree; then the installed `runtimekit` prints
its versions and brings `runtimekit up` to `ready:`.

The slowest tests of the suite after the image (about a minute together): pip reuses its cache, so
dependencies are not downloaded twice, and installs skip byte-compiling (`--no-compile`), which
changes nothing about what is installed.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import tarfile
import threading
import zipfile
from collections.abc import Mapping
from pathlib import Path

import pytest

from fixtures.waiting import SCALE
from runtimekit.cli.main import version_text

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
STUB_MODULES = (
    "v1beta1/deviceplugin",
    "podresources/v1/podresources",
    "runtimekit/v1/runtime",
    "dra/v1/dra",
    "dra/v1beta1/dra",
    "pluginregistration/v1/registration",
    "drahealth/v1alpha1/health",
)
GENERATED = tuple(f"runtimekit/api/{m}{suffix}" for m in STUB_MODULES for suffix in ("_pb2", "_pb2_grpc"))
# every module that needs the generated stubs, and so fails without them
NEEDS_STUBS = (
    "runtimekit.api.runtime_client",
    "runtimekit.runtime.grpc_api",
    "runtimekit.deviceplugin.server",
    "runtimekit.cluster.kubelet.devicemanager",
)


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without what would let the source tree or the test's virtualenv leak in."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(str(ROOT)))
    return {**env, "KUBERNETES_SERVICE_HOST": "", **extra}


def run(*args: str | Path, cwd: Path, env: Mapping[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=dict(env or clean_env()),
        capture_output=True,
        text=True,
        timeout=600 * SCALE,
        check=False,
    )
    assert done.returncode == 0, f"{' '.join(map(str, args))} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("install")
    assert not path.resolve().is_relative_to(ROOT)
    return path


@pytest.fixture(scope="module")
def clone(work: Path) -> Path:
    """A clean clone of the repository at HEAD: what `pip install git+URL` or a fresh checkout gets."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing to clone")
    target = work / "clone"
    run("git", "clone", "--quiet", ROOT, target, cwd=work)
    assert not list((target / "src").rglob("*_pb2*.py")), "the clone holds generated stubs"
    return target


@pytest.fixture(scope="module")
def dists(clone: Path, work: Path) -> dict[str, Path]:
    """`python -m build` of the clone: the sdist, then the wheel built from that sdist."""
    out = work / "dist"
    run(sys.executable, "-m", "build", "--outdir", out, clone, cwd=work)
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return {"sdist": sdist, "wheel": wheel}


def test_the_sdist_carries_the_protos_and_no_generated_stubs(dists: dict[str, Path]) -> None:
    with tarfile.open(dists["sdist"]) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {"setup.py", "scripts/gen_proto.py", "pyproject.toml"} <= names
    assert {f"proto/{m}.proto" for m in STUB_MODULES} <= names
    assert not [n for n in names if "_pb2" in n]


def test_the_wheel_carries_the_typed_stubs(dists: dict[str, Path]) -> None:
    with zipfile.ZipFile(dists["wheel"]) as wheel:
        names = set(wheel.namelist())
        metadata = next(wheel.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    for module in GENERATED:
        assert {f"{module}.py", f"{module}.pyi"} <= names, module
    assert "runtimekit/py.typed" in names
    assert "License-Expression: Apache-2.0" in metadata.splitlines()
    assert f"Version: {version_text().split()[1]}" in metadata.splitlines()


def fresh_venv(where: Path) -> Path:
    """A new virtualenv (its python); pip runs from outside it (`pip --python`), so none is installed."""
    run(sys.executable, "-m", "venv", "--without-pip", where, cwd=where.parent)
    return where / "bin" / "python"


def check_installed(label: str, bin_dir: Path, python: Path, work: Path) -> None:
    """The installed command prints the versions, imports the stubs from the install, and starts a cluster."""
    assert run(bin_dir / "runtimekit", "--version", cwd=work) == version_text()
    code = "import importlib, sys; print('\\n'.join(importlib.import_module(m).__file__ for m in sys.argv[1:]))"
    files = run(python, "-c", code, *NEEDS_STUBS, "runtimekit.api.runtimekit.v1.runtime_pb2_grpc", cwd=work)
    for file in files.split():
        assert Path(file).resolve().is_relative_to(python.parent.parent.resolve()), file
    assert Path(files.split()[-1]).with_suffix(".pyi").is_file()
    assert_up_gets_ready(bin_dir / "runtimekit", work / f"up-{label}")


def assert_up_gets_ready(runtimekit: Path, state: Path) -> None:
    """`runtimekit up` prints `ready: <kubeconfig>`, and stops with exit 0 on SIGTERM."""
    work = state.parent
    log = work / f"{state.name}.log"
    with log.open("w") as err:
        process = subprocess.Popen(
            [str(runtimekit), "up", "--nodes", "1", "--gpus-per-node", "2", "--state-dir", str(state)],
            cwd=work,
            env=clean_env(),
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    try:
        try:
            first = lines.get(timeout=180 * SCALE)
        except queue.Empty:
            first = "(nothing within the wait)"
        assert first == f"ready: {state / 'kubeconfig'}", f"{first!r}; log:\n{log.read_text()[-3000:]}"
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout=60 * SCALE)
        except subprocess.TimeoutExpired:
            process.kill()
            code = -9
    assert code == 0, log.read_text()[-3000:]


@pytest.mark.parametrize("source", ["checkout", "sdist", "wheel"])
def test_pip_install_gives_a_working_runtimekit(source: str, clone: Path, dists: dict[str, Path], work: Path) -> None:
    target = clone if source == "checkout" else dists[source]
    python = fresh_venv(work / f"venv-{source}")
    run(sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-compile", target, cwd=work)
    check_installed(source, python.parent, python, work)


def test_pipx_install_of_the_checkout_gives_a_working_runtimekit(clone: Path, work: Path) -> None:
    home, bin_dir = work / "pipx-home", work / "pipx-bin"
    env = clean_env(PIPX_HOME=str(home), PIPX_BIN_DIR=str(bin_dir), PIPX_MAN_DIR=str(work / "pipx-man"))
    run(sys.executable, "-m", "pipx", "install", "--pip-args=--no-compile", clone, cwd=work, env=env)
    python = home / "venvs" / "lj-runtimekit" / "bin" / "python"
    check_installed("pipx", bin_dir, python, work)

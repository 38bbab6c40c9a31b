"""`runtimekit up` as a real process: the `ready:` line, what a real kubectl sees, `cluster.json`, and a
clean stop on SIGTERM."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fixtures.apiserver import KUBECTL_BINARIES, KUBECTL_DISPATCHER
from fixtures.waiting import SCALE
from runtimekit.protocol import KitProtocol

P = KitProtocol.default()


@dataclass
class Up:
    process: subprocess.Popen[str]
    lines: queue.Queue[str | None]

    def next_line(self, timeout: float) -> str | None:
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return -9


def start_up(*args: str, log: Path) -> Up:
    process = subprocess.Popen(
        [sys.executable, "-m", "runtimekit.cli.main", "up", *args],
        stdout=subprocess.PIPE,
        stderr=log.open("w"),
        text=True,
        env={**os.environ, "KUBERNETES_SERVICE_HOST": ""},
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return Up(process, lines)


@pytest.fixture
def state_dir() -> Iterator[Path]:
    import shutil

    path = Path(tempfile.mkdtemp(prefix="rk-t-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def kubectl(kubeconfig: Path, home: Path, *args: str) -> str:
    binary = KUBECTL_DISPATCHER or str(next(iter(KUBECTL_BINARIES.values())))
    done = subprocess.run(
        [binary, "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(home)},
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.e2e  # starts `runtimekit up` as a subprocess, as the file's other e2e tests
def test_up_serves_a_cluster_kubectl_sees_and_stops_on_sigterm(state_dir: Path, tmp_path: Path) -> None:
    up = start_up("--nodes", "2", "--gpus-per-node", "2", "--state-dir", str(state_dir), log=tmp_path / "up.log")
    try:
        line = up.next_line(timeout=90)
        assert line == f"ready: {state_dir / 'kubeconfig'}", (tmp_path / "up.log").read_text()[-3000:]
        info = json.loads((state_dir / "cluster.json").read_text())
        assert set(info) == {"api_server", "kubeconfig", "nodes"}
        assert info["api_server"].startswith("http://127.0.0.1:")
        assert info["kubeconfig"] == str(state_dir / "kubeconfig")
        assert [set(n) for n in info["nodes"]] == [{"name", "runtime_socket", "exporter"}] * 2
        assert [n["name"] for n in info["nodes"]] == ["gpu-node-1", "gpu-node-2"]
        assert all(Path(n["runtime_socket"]).is_socket() for n in info["nodes"])
        assert all(n["exporter"].startswith("http://127.0.0.1:") for n in info["nodes"])  # one exporter per node
        if KUBECTL_DISPATCHER is None and not KUBECTL_BINARIES:
            pytest.skip("kubectl is not installed")
        nodes = json.loads(kubectl(state_dir / "kubeconfig", tmp_path, "get", "nodes", "-o", "json"))["items"]
        assert [n["metadata"]["name"] for n in nodes] == ["gpu-node-1", "gpu-node-2"]
        for node in nodes:
            status = node["status"]
            assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "True"
            assert status["allocatable"][P.resources.gpu] == "2"
            assert status["allocatable"][P.resources.core] == "200"
        table = kubectl(state_dir / "kubeconfig", tmp_path, "get", "nodes")
        assert table.count(" Ready ") == 2
    finally:
        code = up.stop()
    assert code == 0, (tmp_path / "up.log").read_text()[-3000:]
    assert up.next_line(timeout=5) is None  # nothing but the ready line on stdout
    assert "embedded cluster stopped" in (tmp_path / "up.log").read_text()


@pytest.mark.e2e  # starts `runtimekit up` as a subprocess, as the file's other e2e tests
def test_up_stops_cleanly_on_a_sigterm_sent_as_soon_as_it_is_ready(state_dir: Path, tmp_path: Path) -> None:
    """A supervisor (or a test) that stops the cluster on seeing `ready:` gets a clean stop, not a kill."""
    args = ("--nodes", "1", "--gpus-per-node", "1", "--no-exporter", "--state-dir", str(state_dir))
    up = start_up(*args, log=tmp_path / "up.log")
    line = up.next_line(timeout=90)
    code = up.stop()
    assert line == f"ready: {state_dir / 'kubeconfig'}", (tmp_path / "up.log").read_text()[-3000:]
    assert code == 0, (tmp_path / "up.log").read_text()[-3000:]
    assert "embedded cluster stopped" in (tmp_path / "up.log").read_text()


def test_up_refuses_bad_options(tmp_path: Path) -> None:
    up = start_up("--gpu-model", "Z80", log=tmp_path / "up.log")
    assert up.process.wait(timeout=60) == 2
    assert "unknown GPU model 'Z80'" in (tmp_path / "up.log").read_text()


def test_up_refuses_mig_options_the_nodes_cannot_have(tmp_path: Path) -> None:
    cases = [
        (["--gpu-model", "A100-80GB", "--mig-mode", "sometimes"], "--mig-mode"),
        (["--gpu-model", "A100-80GB", "--mig-mode", "static"], "no layout"),
        (["--gpu-model", "A100-80GB", "--gpus-per-node", "2", "--mig-mode", "5:dynamic"], "the node has 2 GPUs"),
        (["--gpu-model", "L40S", "--mig-mode", "dynamic"], "has no MIG"),
        (["--direct", "--gpu-model", "A100-80GB", "--mig-mode", "dynamic"], "drop --direct"),
    ]
    for args, reason in cases:
        up = start_up(*args, log=tmp_path / "up.log")
        assert up.process.wait(timeout=60) == 2, args
        assert reason in (tmp_path / "up.log").read_text(), (args, (tmp_path / "up.log").read_text()[-2000:])


@pytest.mark.e2e
def test_up_with_mig_nodes_runs_a_mig_pod_kubectl_applies(state_dir: Path, tmp_path: Path) -> None:
    """GPU 0 dynamic, GPU 1 static (two 3g.40gb), GPU 2 shared by time: kubelet advertises the MIG profiles
    and one whole GPU, and the example MIG pod lands on a 3g.40gb slice."""
    up = start_up(
        *("--nodes", "1", "--gpus-per-node", "3", "--gpu-model", "A100-80GB", "--state-dir", str(state_dir)),
        *("--mig-mode", "0:dynamic,1:static", "--mig-layout", "1:3g.40gb,3g.40gb", "--no-exporter"),
        log=tmp_path / "up.log",
    )
    try:
        line = up.next_line(timeout=90)
        assert line == f"ready: {state_dir / 'kubeconfig'}", (tmp_path / "up.log").read_text()[-3000:]
        if KUBECTL_DISPATCHER is None and not KUBECTL_BINARIES:
            pytest.skip("kubectl is not installed")
        kubeconfig = state_dir / "kubeconfig"
        node = json.loads(kubectl(kubeconfig, tmp_path, "get", "node", "gpu-node-1", "-o", "json"))
        allocatable = node["status"]["allocatable"]
        assert allocatable[P.resources.gpu] == "1"  # only GPU 2 is shared by time
        assert allocatable[P.resources.core] == "100"
        assert allocatable[P.resources.mig_prefix + "3g.40gb"] == "4"  # 2 fit on the dynamic GPU, 2 static
        assert allocatable[P.resources.mig_prefix + "1g.10gb"] == "7"  # dynamic only
        example = Path(__file__).resolve().parents[2] / "examples" / "mig" / "pod.yaml"
        kubectl(kubeconfig, tmp_path, "apply", "-f", str(example))
        pod: dict[str, Any] = {}
        for _ in range(120):
            pod = json.loads(kubectl(kubeconfig, tmp_path, "get", "pod", "mig", "-o", "json"))
            if (pod.get("status") or {}).get("phase") == "Running":
                break
            time.sleep(0.5)
        assert pod["status"]["phase"] == "Running", pod
        annotations = pod["metadata"]["annotations"]
        shares = json.loads(annotations[P.annotations.assignment])["containers"]["training"]
        assert [s["migProfile"] for s in shares] == ["3g.40gb"], shares
    finally:
        code = up.stop()
    assert code == 0, (tmp_path / "up.log").read_text()[-3000:]


@pytest.mark.e2e
def test_up_with_no_options_runs_four_nodes_of_eight_h200_and_cleans_up(tmp_path: Path) -> None:
    up = start_up(log=tmp_path / "up.log")
    try:
        line = up.next_line(timeout=120)
        assert line is not None
        assert line.startswith("ready: "), (tmp_path / "up.log").read_text()[-3000:]
        kubeconfig = Path(line.removeprefix("ready: "))
        info = json.loads((kubeconfig.parent / "cluster.json").read_text())
        assert [n["name"] for n in info["nodes"]] == [f"gpu-node-{i}" for i in range(1, 5)]
        if KUBECTL_DISPATCHER or KUBECTL_BINARIES:
            nodes = json.loads(kubectl(kubeconfig, tmp_path, "get", "nodes", "-o", "json"))["items"]
            assert {n["status"]["allocatable"][P.resources.gpu] for n in nodes} == {"8"}
            assert {n["metadata"]["labels"][P.labels.gpu_model] for n in nodes} == {"H200"}
    finally:
        code = up.stop(signal.SIGINT)
    assert code == 0
    assert not kubeconfig.parent.exists()  # the temporary state folder goes with the cluster


@pytest.mark.e2e
def test_up_stops_within_a_second_of_sigterm(tmp_path: Path) -> None:
    """The whole default cluster (four nodes, their runtimes, device plugins and exporters, the webhook,
    the scheduler and the controllers) stops in under a second: its informers leave without waiting
    for a bookmark, and the parts stop side by side. It took about 5 s before."""
    up = start_up(log=tmp_path / "up.log")
    line = up.next_line(timeout=120)
    assert line is not None
    assert line.startswith("ready: "), (tmp_path / "up.log").read_text()[-3000:]
    time.sleep(1.0)  # informers and watches settled, as a user's cluster is
    began = time.monotonic()
    code = up.stop()
    took = time.monotonic() - began
    assert code == 0, (tmp_path / "up.log").read_text()[-3000:]
    assert took < 1.0 * SCALE, f"runtimekit up took {took:.2f} s to stop"


def test_up_help_says_which_scheduler_names_are_answered() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "runtimekit.cli.main", "up", "--help"], capture_output=True, text=True, check=True
    )
    text = " ".join(done.stdout.split())
    assert "--scheduler-name NAME" in text
    assert "default-scheduler (so pods with no schedulerName are scheduled)" in text


def test_the_scheduler_answers_to_the_protocol_default_and_added_names() -> None:
    from runtimekit.cli.embedded import ClusterOptions, answered_names

    assert answered_names(ClusterOptions(), P) == (P.scheduler_name, "default-scheduler")
    options = ClusterOptions(scheduler_names=("default-scheduler", "volcano", "volcano"))
    assert answered_names(options, P) == (P.scheduler_name, "default-scheduler", "volcano")
    assert answered_names(ClusterOptions(scheduler=False), P) == ()


CUSTOM_CONF = """\
actions: "enqueue, allocate, print"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: logprint
- plugins:
  - name: predicates
  - name: gpushare
  - name: stamp
"""


@pytest.mark.e2e
def test_up_loads_custom_plugins_that_reach_the_pods(state_dir: Path, tmp_path: Path) -> None:
    """`up --scheduler-plugins-dir` hands the folder to the scheduler: the example's `print` action and
    `logprint` plugin log the job, and `stamp` annotates the pod it bound through its PreBind."""
    if KUBECTL_DISPATCHER is None and not KUBECTL_BINARIES:
        pytest.skip("kubectl is not installed")
    conf = tmp_path / "custom.conf"
    conf.write_text(CUSTOM_CONF)
    plugins = Path(__file__).resolve().parents[2] / "examples" / "plugins"
    log = tmp_path / "up.log"
    up = start_up(
        *("--nodes", "1", "--gpus-per-node", "2", "--no-exporter", "--state-dir", str(state_dir)),
        *("--scheduler-conf", str(conf), "--scheduler-plugins-dir", str(plugins)),
        log=log,
    )
    try:
        assert up.next_line(timeout=90) == f"ready: {state_dir / 'kubeconfig'}", log.read_text()[-3000:]
        manifest = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p1", "namespace": "default"},
            "spec": {
                "schedulerName": P.scheduler_name,
                "containers": [{"name": "main", "image": "cuda:12", "resources": {"limits": {P.resources.core: "30"}}}],
            },
        }
        (tmp_path / "pod.json").write_text(json.dumps(manifest))
        kubectl(state_dir / "kubeconfig", tmp_path, "apply", "-f", str(tmp_path / "pod.json"))
        deadline = time.monotonic() + 60
        pod: dict[str, Any] = {}
        while time.monotonic() < deadline:
            pod = json.loads(kubectl(state_dir / "kubeconfig", tmp_path, "get", "pod", "p1", "-o", "json"))
            if pod["status"].get("phase") == "Running":
                break
            time.sleep(0.5)
        assert pod["status"].get("phase") == "Running", pod["status"]
        placed = pod["metadata"]["annotations"]["stamp.example.com/placed"]
        assert placed.startswith("gpu-node-1 gpus=")
        assert P.annotations.assignment in pod["metadata"]["annotations"]
    finally:
        code = up.stop()
    assert code == 0, log.read_text()[-3000:]
    text = log.read_text()
    for kind, name in (("action", "print"), ("plugin", "logprint"), ("plugin", "stamp")):  # those the conf names
        assert f"imported the {kind} {name} from {plugins / name}.py" in text
    assert "Job default/p1 is ready, detail info: queue default, minMember 1, tasks: p1 Binding on gpu-node-1" in text

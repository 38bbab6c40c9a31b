"""The job-agent command, job names, and the controller's extension points (its work queue is
runtimekit.base.workqueue, tested in tests/base)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtimekit.cli.main import main
from runtimekit.controller.jobs import FileJobTemplate, JobSpec, job_name
from runtimekit.controller.trigger import LabelTrigger, load_trigger
from runtimekit.protocol import KitProtocol
from runtimekit.runtime.daemon import RuntimeDaemon
from runtimekit.runtime.isolation import make_isolation
from runtimekit.runtime.service import NodeRuntime
from runtimekit.runtime.simulated import SimulatedBackend, parse_gpu_spec
from runtimekit.runtime.values import RuntimeSettings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def socket() -> Iterator[str]:
    folder = Path(tempfile.mkdtemp(prefix="rka-"))
    service = NodeRuntime(
        RuntimeSettings("n", folder / "state", KitProtocol.default(), "0.1.0", 30.0),
        SimulatedBackend("n", parse_gpu_spec("1xT4")),
        make_isolation("none"),
    )
    daemon = RuntimeDaemon(service, str(folder / "r.sock"), reconcile_interval_s=0).start()
    yield str(folder / "r.sock")
    daemon.stop()
    shutil.rmtree(folder, ignore_errors=True)


def test_job_agent_switches_and_reports(socket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "termination-log"
    log.touch()
    assert main(["job-agent", "--action", "disable", "--socket", socket, "--termination-log", str(log)]) == 0
    assert "runtime on n disabled" in capsys.readouterr().out
    assert main(["job-agent", "--action", "enable", "--socket", socket, "--termination-log", str(log)]) == 0
    assert log.read_text() == "runtime on n enabled"


def test_job_agent_fails_readably_without_a_runtime(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "termination-log"
    code = main(
        [
            "job-agent",
            "--action",
            "enable",
            "--socket",
            str(tmp_path / "none.sock"),
            "--timeout",
            "0.5",
            "--termination-log",
            str(log),
        ]
    )
    assert code == 1
    message = capsys.readouterr().err.strip()
    assert message.startswith("job-agent: enable failed: the runtime at ")
    assert "did not answer within 0.5 s" in message
    assert log.read_text() == message


def test_job_names_are_deterministic_and_short() -> None:
    assert job_name("lj-runtimekit", "enable", "node-1", 3) == "lj-runtimekit-enable-node-1-3"
    long = job_name("lj-runtimekit", "disable", "n" * 80 + ".example.com", 12)
    assert len(long) <= 52
    assert long == job_name("lj-runtimekit", "disable", "n" * 80 + ".example.com", 12)


def test_trigger_and_template_extension_points() -> None:
    trigger = load_trigger(f"{ROOT}/examples/controller/gpu_nodes.py:GpuNodesTrigger", KitProtocol.default())
    gpu = {"metadata": {"labels": {"lj_runtimekit_enable": "true", "aliyun.com/gpu-count": "8"}}}
    cpu = {"metadata": {"labels": {"lj_runtimekit_enable": "true"}}}
    assert trigger.desired(gpu) == "enable"
    assert trigger.desired(cpu) is None
    assert LabelTrigger(KitProtocol.default()).desired(cpu) == "enable"
    template = FileJobTemplate(ROOT / "examples" / "controller" / "job-template.yaml")
    job = template.render(JobSpec("j", "ns", "node-9", "disable", 4, "img:1", "/run/x/runtime.sock"))
    assert job["metadata"]["labels"]["runtimekit.aliyun.com/change"] == "4"
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["job-agent", "--action", "disable", "--socket", "/run/x/runtime.sock"]
    with pytest.raises(ValueError, match=r"module:attribute"):
        load_trigger("nocolon", KitProtocol.default())

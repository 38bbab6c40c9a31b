"""The logic of the real-GPU checks under benchmarks/gpu/, on recorded outputs (no GPU here): reading
nvidia-smi's XML, compute-apps and pmon outputs, holding the kit's readings against them, and the
sharing check's verdicts (shares against rates, the memory limit, neighbours after a crash, attribution).
The checks themselves skip cleanly without a driver; a dry run of the sharing check drives the real
runtime and exporter processes (simulated backend) with CPU clients, so its orchestration runs here."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks" / "gpu"))

import check_sharing  # noqa: E402
import smi  # noqa: E402

RECORDED = ROOT / "tests" / "data" / "gpu" / "nvidia-smi-q-575.xml"

# `nvidia-smi pmon -c 1 -s um` on a recent driver: fb and ccpm columns, '-' where there is no sample, a
# row of dashes for a GPU with no process, a PID listed twice (graphics and compute)
PMON = """\
# gpu         pid   type     sm    mem    enc    dec    jpg    ofa     fb   ccpm    command \n\
# Idx           #    C/G      %      %      %      %      %      %     MB     MB    name \n\
    0       1312     G     24      3      -      -      -      -     97      0    Hyprland       \n\
    0       1941   C+G      -      -      -      -      -      -      5      0    voxtype-osd-gtk\n\
    1          -     -      -      -      -      -      -      -      -      -    -              \n\
    0       4711     C     35      7      0      -      -      -   4096      0    python3\n\
"""


def test_nvidia_smi_xml_is_read_into_the_kits_units() -> None:
    driver, gpus = smi.parse_query(RECORDED.read_text())
    assert driver == "575.51.02"
    gpu = gpus["GPU-529b3263-c96d-b557-bc75-697f04917eda"]
    assert (gpu.pci_bus_id, gpu.minor, gpu.product) == ("00000000:01:00.0", 0, "NVIDIA GeForce RTX 4070 Laptop GPU")
    assert (gpu.memory_total_mib, gpu.memory_used_mib, gpu.memory_reserved_mib) == (8188, 2026, 390)
    assert (gpu.utilization_percent, gpu.memory_utilization_percent, gpu.temperature_celsius) == (30, 30, 41)
    assert (gpu.power_watts, gpu.power_limit_watts) == (11.26, 95.0)  # instant draw, current limit (R570+)
    assert (gpu.sm_clock_mhz, gpu.memory_clock_mhz, gpu.mig_mode) == (675, 810, "N/A")


def test_older_drivers_power_elements_are_read_too() -> None:
    xml = """<nvidia_smi_log><driver_version>535.104.05</driver_version><gpu id="00000000:19:00.0">
      <uuid>GPU-a</uuid><power_readings><power_draw>69.35 W</power_draw>
      <enforced_power_limit>700.00 W</enforced_power_limit></power_readings>
      <fb_memory_usage><total>81559 MiB</total><used>0 MiB</used></fb_memory_usage>
      <temperature><gpu_temp>N/A</gpu_temp></temperature></gpu></nvidia_smi_log>"""
    _, gpus = smi.parse_query(xml)
    gpu = gpus["GPU-a"]
    assert (gpu.power_watts, gpu.power_limit_watts, gpu.memory_reserved_mib) == (69.35, 700.0, None)
    assert gpu.temperature_celsius is None  # N/A is no reading, not zero


@pytest.mark.parametrize("text", ["", "NVIDIA-SMI has failed", "<other/>"])
def test_what_is_not_nvidia_smis_xml_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not nvidia-smi -q -x output"):
        smi.parse_query(text)


def test_kit_readings_are_held_against_nvidia_smis_with_tolerances() -> None:
    _, gpus = smi.parse_query(RECORDED.read_text())
    gpu = next(iter(gpus.values()))
    same = {
        "uuid": gpu.uuid,
        "pci_bus_id": "00000000:01:00.0".lower(),  # NVML and sysfs spell hex digits differently
        "memory_total_mib": 8188,
        "memory_used_mib": 2026 + 20,  # moved a little between the two reads
        "temperature_celsius": 42,
        "power_watts": 14.0,
        "power_limit_watts": 95.0,
        "utilization_percent": 35,
        "sm_clock_mhz": 705,
        "memory_clock_mhz": 810,
        "memory_utilization_percent": None,  # the kit has no such reading: not compared
    }
    assert smi.compare(same, gpu) == []
    # a used reading that counts the driver's reservation, another GPU's UUID, a stale power limit
    wrong = same | {"memory_used_mib": 2026 + 390, "uuid": "GPU-other", "power_limit_watts": 55.0}
    assert smi.compare(wrong, gpu) == [
        "memory_used_mib: kit 2416 against nvidia-smi 2026.0",
        "power_limit_watts: kit 55.0 against nvidia-smi 95.0",
        "uuid: kit GPU-other against nvidia-smi GPU-529b3263-c96d-b557-bc75-697f04917eda",
    ]


def test_pmon_rows_by_pid_with_dashes_as_no_sample() -> None:
    rows = smi.parse_pmon(PMON)
    assert sorted(rows) == [1312, 1941, 4711]  # the dashed row of an idle GPU is no process
    assert rows[1312] == {"gpu": 0, "type": "G", "sm_percent": 24, "mem_percent": 3, "command": "Hyprland"}
    assert (rows[1941]["sm_percent"], rows[1941]["type"]) == (None, "C+G")
    assert rows[4711]["sm_percent"] == 35


def test_compute_apps_rows() -> None:
    text = "4711, GPU-529b3263-c96d-b557-bc75-697f04917eda, 4096, python3\n484, GPU-x, [N/A], nvidia-cuda-mps-server\n"
    got = smi.parse_compute_apps(text)
    assert [(p.pid, p.gpu_uuid, p.memory_mib, p.name) for p in got] == [
        (4711, "GPU-529b3263-c96d-b557-bc75-697f04917eda", 4096, "python3"),
        (484, "GPU-x", None, "nvidia-cuda-mps-server"),
    ]
    assert smi.parse_compute_apps("No running processes found\n") == []
    with pytest.raises(ValueError, match="not a compute-apps row"):
        smi.parse_compute_apps("pid, used_memory [MiB]\n")


# -- the sharing check's verdicts --------------------------------------------------------------------


def record(client: str, window: int, rate: float, action: str = "run", **extra: Any) -> dict[str, Any]:
    steps = extra.pop("timeline", [int(rate * 0.25 * (i + 1)) for i in range(24)])
    return {"name": client, "window": window, "action": action, "rate": rate, "tflops": rate, "timeline": steps} | extra


def report(rates: dict[str, dict[str, float]], **extra: Any) -> dict[str, Any]:
    """A raw report as `check_sharing.check` writes it: per client its windows' records."""
    windows = [name for name, _ in check_sharing.schedule(False)]
    results: dict[str, list[dict[str, Any]]] = {}
    for window, members in rates.items():
        for client, rate in members.items():
            results.setdefault(client, []).append(record(client, windows.index(window), rate))
    base = {"bare": {"rate": 100.0}, "windows": windows, "results": results, "readings": {}, "pids": {}}
    return base | extra


GOOD = {
    "mem-only alone": {"mem-only": 97.0},
    "30 alone": {"c30": 41.0},  # alone, a share may run above itself: not judged
    "30+70": {"c30": 29.0, "c70": 72.0},
    "20+30+50": {"c20": 21.0, "c30": 28.0, "c50": 48.0},
}


def test_shares_within_ten_percent_of_their_rate_pass() -> None:
    verdict = check_sharing.evaluate(report(GOOD))
    assert verdict["failures"] == []
    assert verdict["rates"]["30+70"]["c30"] == {"relative": 0.29, "share": 0.3, "tflops": 29.0, "within_10pct": True}
    assert "within_10pct" not in verdict["rates"]["30 alone"]["c30"]


def test_a_limit_that_does_not_hold_is_a_failure() -> None:
    """Time slicing without MPS splits a busy GPU evenly, whatever the shares."""
    verdict = check_sharing.evaluate(report(GOOD | {"30+70": {"c30": 50.0, "c70": 50.0}}))
    assert verdict["failures"] == [
        "30+70: c30 ran at 0.500 of the GPU against a share of 0.3",
        "30+70: c70 ran at 0.500 of the GPU against a share of 0.7",
    ]


def test_a_memory_only_share_throttled_to_one_percent_is_a_failure() -> None:
    verdict = check_sharing.evaluate(report(GOOD | {"mem-only alone": {"mem-only": 1.2}}))
    assert verdict["failures"] == ["mem-only alone: mem-only ran at 0.012 of the GPU against a share of 1.0"]


def with_events(oom_error: str, neighbour_steps: list[int]) -> dict[str, Any]:
    raw = report(GOOD)
    windows = raw["windows"]
    oom, crash = windows.index("oom beside 70"), windows.index("crash beside 70")
    raw["results"]["oom"] = [record("oom", oom, 30.0, "oom", event_at_s=3.0, oom_error=oom_error)]
    raw["results"]["crash"] = [record("crash", crash, 30.0, "crash", event_at_s=3.0, crashed=True)]
    raw["results"]["c70"] += [
        record("c70", oom, 70.0, timeline=neighbour_steps),
        record("c70", crash, 70.0, timeline=neighbour_steps),
    ]
    return raw


def test_out_of_memory_and_a_crash_leave_the_neighbour_running() -> None:
    running = [17 * (i + 1) for i in range(24)]
    verdict = check_sharing.evaluate(with_events("OutOfMemoryError: CUDA out of memory. Tried to allocate", running))
    assert (verdict["oom_refused"], verdict["oom_neighbour_ran_on"], verdict["crash_neighbour_ran_on"]) == (
        True,
        True,
        True,
    )
    assert verdict["failures"] == []


def test_an_allocation_granted_beyond_the_limit_and_a_stalled_neighbour_are_failures() -> None:
    stalled = [17 * (i + 1) for i in range(12)] + [17 * 12] * 12  # nothing finished after the event
    verdict = check_sharing.evaluate(with_events("", stalled))
    assert verdict["failures"] == [
        "oom: asking beyond the limit gave '', not CUDA's out-of-memory error",
        "oom: the neighbour stopped",
        "crash: the neighbour stopped when a client died",
    ]


def test_attribution_is_held_against_nvidia_smi() -> None:
    raw = report(GOOD)
    raw["pids"] = {"c30": 4711, "c70": 4712}
    raw["readings"]["30+70"] = {
        "runtime": [
            {"pod": "c30", "pids": [4711], "memory_used_mib": "1100", "sm_percent": 29.0, "sm_known": True},
            {"pod": "c70", "pids": [], "memory_used_mib": "0", "sm_known": True},
        ],
        "compute_apps": "4711, GPU-a, 1500, python3\n4712, GPU-a, 1100, python3\n",
        "pmon": PMON,
    }
    found = check_sharing.evaluate(raw)["attribution"]["30+70"]
    assert found["clients"]["c30"] == {
        "pid": 4711,
        "runtime_pids": [4711],
        "runtime_memory_mib": 1100,
        "runtime_sm_percent": 29.0,
        "smi_memory_mib": 1500,
        "pmon_sm_percent": 35,
    }
    assert found["problems"] == [
        "c30: runtime 1100 MiB against nvidia-smi 1500.0 MiB",
        "c70 (pid 4712) not attributed to its container by the runtime",
    ]


def test_the_checks_skip_without_a_driver() -> None:
    env = {**os.environ, "PATH": "/nonexistent", "PYTHONPATH": str(ROOT / "src")}
    for isolation in ("mps", "hami-core"):
        done = subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "gpu" / "check_sharing.py"), "--isolation", isolation],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["result"].startswith("skipped")


def dry_run(isolation: str, folder: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "gpu" / "check_sharing.py"),
            f"--isolation={isolation}",
            "--dry-run",
            "--window=0.5",
            "--size=32",
            f"--keep={folder}",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )
    raw: dict[str, Any] = json.loads(done.stdout)
    assert "error" not in raw, raw.get("error")
    return raw


@pytest.mark.slow
def test_a_dry_run_drives_the_runtime_and_exporter_processes(tmp_path: Path) -> None:
    """The simulated backend and CPU clients stand in for the GPU: the environment each client gets is
    what the runtime's Allocate wrote, every window of the schedule has its records, the crash client
    died by SIGKILL, and usage was read from the runtime while 30+70 and 20+30+50 ran."""
    raw = dry_run("mps", tmp_path)
    shares = {name: env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] for name, env in raw["envs"].items()}
    assert shares == {"mem-only": "100", "c30": "30", "c70": "70", "c20": "20", "c50": "50", "oom": "30", "crash": "30"}
    assert raw["envs"]["oom"]["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=2048M"
    assert raw["same_env_when_held_again"] == {"30+70": True, "20+30+50": True}
    seen = {(raw["windows"][r["window"]], c) for c, records in raw["results"].items() for r in records}
    wanted = {(w, c) for w, members in check_sharing.schedule(False) for c in members}
    assert seen == wanted
    assert raw["exit_codes"]["crash"] == -9
    assert raw["exit_codes"]["c70"] == 0
    assert {u["pod"] for u in raw["readings"]["20+30+50"]["runtime"]} == {"c20", "c30", "c50"}
    assert "runtimekit_gpu_memory_used_bytes" in raw["readings"]["30+70"]["metrics"]


@pytest.mark.slow
def test_a_dry_run_under_hami_core_gives_each_client_the_runtimes_environment(tmp_path: Path) -> None:
    """Under hami-core each client runs with HAMi-core's limits and its own shared region, as the
    runtime writes them (the dry run keeps the runtime's library folder inside its scratch folder)."""
    raw = dry_run("hami-core", tmp_path)
    limits = {name: env["CUDA_DEVICE_SM_LIMIT"] for name, env in raw["envs"].items()}
    assert limits == {"mem-only": "0", "c30": "30", "c70": "70", "c20": "20", "c50": "50", "oom": "30", "crash": "30"}
    regions = {env["CUDA_DEVICE_MEMORY_SHARED_CACHE"] for env in raw["envs"].values()}
    assert len(regions) == len(raw["envs"])  # one region per container
    assert raw["envs"]["oom"]["CUDA_DEVICE_MEMORY_LIMIT_0"] == "2048m"
    assert raw["exit_codes"]["crash"] == -9
    assert not list((tmp_path / "vgpu" / "containers").iterdir())  # every folder removed at release


def test_the_whole_run_writes_its_files_and_skips_without_a_driver(tmp_path: Path) -> None:
    if shutil.which("nvidia-smi"):
        pytest.skip("a GPU is here: run_all.sh would run the real checks")
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable, "CARRY": str(tmp_path / "no-carry")}
    done = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "gpu" / "run_all.sh")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    written = sorted(p.name for p in tmp_path.iterdir() if p.is_file())
    assert written == [
        "env.txt",
        "hami-build.log",
        "hami.json",
        "mig.json",
        "mps.json",
        "nvidia-smi-q.xml",
        "nvml.json",
        "stderr.log",
    ]
    for name in ("nvml.json", "mig.json", "mps.json", "hami.json"):
        assert json.loads((tmp_path / name).read_text())["result"].startswith("skipped"), name


# -- the served check and the results page -----------------------------------------------------------


@pytest.fixture
def served(tmp_path: Path) -> Any:
    """A runtime on one simulated H200 served over gRPC: (exporter data, the exporter's scrape)."""
    from prometheus_client import CollectorRegistry

    from runtimekit.api.runtime_client import RuntimeClient
    from runtimekit.exporter.collector import RuntimeCollector
    from runtimekit.exporter.exposition import Exposition
    from runtimekit.protocol import KitProtocol
    from runtimekit.runtime.daemon import RuntimeDaemon
    from runtimekit.runtime.isolation import make_isolation
    from runtimekit.runtime.service import NodeRuntime
    from runtimekit.runtime.simulated import SimulatedBackend
    from runtimekit.runtime.values import RuntimeSettings

    settings = RuntimeSettings("node-a", tmp_path / "state", KitProtocol.default())
    runtime = NodeRuntime(settings, SimulatedBackend("node-a", [("H200", 1)], seed=3), make_isolation("none"))
    daemon = RuntimeDaemon(runtime, str(tmp_path / "rt.sock"), reconcile_interval_s=0).start()
    client = RuntimeClient(daemon.socket_path, timeout_s=5.0)
    try:
        data = client.exporter_data()  # an idle GPU: its readings hold still between the two reads
        registry = CollectorRegistry()
        registry.register(RuntimeCollector(client, KitProtocol.default(), "node-a"))
        metrics = Exposition(registry).render().decode()
    finally:
        client.close()
        daemon.stop()
    return data, metrics


def recorded_as(gpu: Any) -> str:
    """The recorded nvidia-smi output, rewritten to say what a served GPU reads (its UUID and values)."""
    xml = RECORDED.read_text().replace("GPU-529b3263-c96d-b557-bc75-697f04917eda", gpu.uuid)
    for element, value in (
        ("total", f"{gpu.memory_total_mib} MiB"),
        ("used", f"{gpu.memory_used_mib} MiB"),
        ("gpu_util", f"{gpu.utilization_percent:.0f} %"),
        ("memory_util", f"{gpu.memory_utilization_percent:.0f} %"),
        ("gpu_temp", f"{gpu.temperature_celsius:.0f} C"),
        ("instant_power_draw", f"{gpu.power_watts:.2f} W"),
        ("current_power_limit", f"{gpu.power_limit_watts:.2f} W"),
        ("sm_clock", f"{gpu.sm_clock_mhz:.0f} MHz"),
        ("mem_clock", f"{gpu.memory_clock_mhz:.0f} MHz"),
    ):
        xml = re.sub(rf"<{element}>[^<]*</{element}>", f"<{element}>{value}</{element}>", xml, count=1)
    return xml


def test_the_served_readings_are_held_against_nvidia_smi(served: Any) -> None:
    import check_nvml

    data, metrics = served
    (gpu,) = data.gpus
    raw = {gpu.uuid: {"pci_bus_id": "00000000:01:00.0", "v1": {}, "v2": {}}}
    failures: list[str] = []
    agreeing = check_nvml.held_against_smi(data, metrics, recorded_as(gpu), raw, failures)
    assert failures == []
    assert agreeing["differences"][gpu.uuid] == {"runtime": [], "exporter": []}
    assert "runtimekit_gpu_memory_used_bytes" in agreeing["metric_families"]
    # the recorded laptop GPU as it is: another card than the simulated H200, every difference named
    other = RECORDED.read_text().replace("GPU-529b3263-c96d-b557-bc75-697f04917eda", gpu.uuid)
    report = check_nvml.held_against_smi(data, metrics, other, raw, failures)
    runtime = report["differences"][gpu.uuid]["runtime"]
    assert f"memory_total_mib: kit {gpu.memory_total_mib} against nvidia-smi 8188.0" in runtime
    assert any(d.startswith("power_limit_watts: kit 700.0") for d in runtime)
    assert report["differences"][gpu.uuid]["exporter"]  # the scrape differs the same way
    assert any(f.startswith("GPU 0 exporter: memory_total_mib") for f in failures)


def test_a_gpu_nvidia_smi_does_not_list_is_a_failure(served: Any) -> None:
    import check_nvml

    data, metrics = served
    failures: list[str] = []
    check_nvml.held_against_smi(data, metrics, RECORDED.read_text(), {}, failures)
    assert failures == [f"GPU 0 ({data.gpus[0].uuid}): not in nvidia-smi -q -x"]


def test_the_results_page_from_one_runs_files(served: Any, tmp_path: Path) -> None:
    """report.py renders what a run wrote: the readings, the simulator's assumptions against the real
    GPU (the recorded laptop GPU here, so they differ), each isolation's windows, and every failure."""
    import check_nvml
    import report as page

    data, metrics = served
    (gpu,) = data.gpus
    failures: list[str] = []
    xml = RECORDED.read_text().replace("GPU-529b3263-c96d-b557-bc75-697f04917eda", gpu.uuid)
    held = check_nvml.held_against_smi(data, metrics, xml, {gpu.uuid: {"pci_bus_id": "x"}}, failures)
    nvml = {
        "result": "failed",
        "failures": failures,
        "devices": [{"index": 0, "uuid": gpu.uuid, "model": "H200", "memory_mib": 8188}],
        "served": held,
    }
    (tmp_path / "nvml.json").write_text(json.dumps(nvml))
    (tmp_path / "nvidia-smi-q.xml").write_text(xml)
    (tmp_path / "env.txt").write_text("NVIDIA-SMI 575.51.02\n")
    sharing = report(GOOD | {"30+70": {"c30": 50.0, "c70": 50.0}})
    sharing["readings"]["30+70"] = {
        "runtime": [],
        "runtime_unattributed": [{"gpu_uuid": gpu.uuid, "memory_mib": "512"}],
        "compute_apps": "",
        "pmon": "",
    }
    sharing["pids"] = {"c30": 1, "c70": 2}
    sharing |= {"result": "failed", "verdict": check_sharing.evaluate(sharing)}
    (tmp_path / "hami.json").write_text(json.dumps(sharing))
    text = page.render(tmp_path)
    assert "| memory_total_mib | 143771 | 8188.0 |" in text  # runtime against nvidia-smi
    assert "| memory_total_mib | 143771.0 | 8188 | differs |" in text  # simulator against the real GPU
    assert "| used_beyond_containers_mib | 300.0 | 512.0 | differs |" in text
    assert "| 30+70 | c30 | 0.3 | 0.5 | 50.0 | **no** |" in text
    assert "## MPS isolation\n\nCheck: missing: no mps.json." in text
    assert "- HAMi-core: 30+70: c30 ran at 0.500 of the GPU against a share of 0.3" in text
    assert "- simulated: H200 memory_total_mib: simulated 143771.0, real 8188" in text

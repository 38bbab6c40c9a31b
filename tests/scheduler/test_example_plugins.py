"""The custom-plugin example (examples/plugins) loads from a directory and runs."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from runtimekit.cli.main import main
from runtimekit.model import PodKey
from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.framework import BuildContext, Framework, load_conf, parse_conf
from scheduler.helpers import job_of, share, static_cache

ROOT = Path(__file__).resolve().parents[2]


def test_logprint_logs_one_line_per_job_as_volcanos_tutorial_does(caplog: pytest.LogCaptureFixture) -> None:
    registry = builtin_registry()
    assert registry.add_directory(ROOT / "examples" / "plugins") == ["logprint", "print", "stamp"]
    framework = Framework(load_conf(ROOT / "examples" / "scheduler" / "print.conf"), registry, BuildContext())
    c = static_cache("n1", gpus=1)
    c.add_job(job_of("fits", share(600)))
    c.add_job(job_of("waits", share(600), created=1.0))
    gang = job_of("gang", share(300), share(300), share(300), min_member=3, created=2.0)
    gang.namespace = "team-a"
    c.add_job(gang)
    with caplog.at_level(logging.INFO, logger="runtimekit.plugins.logprint"):
        framework.run_once(c)
    assert [r.getMessage() for r in caplog.records] == [
        "[demo] Job default/fits is ready, detail info: queue default, minMember 1, tasks: fits-0 Bound on n1",
        "[demo] Job default/waits is pending",
        "[demo] Job team-a/gang is pending",  # three 30 % shares do not fit in the 40 % left
    ]


def test_print_hands_running_jobs_to_the_printers_too(caplog: pytest.LogCaptureFixture) -> None:
    registry = builtin_registry()
    registry.add_directory(ROOT / "examples" / "plugins")
    framework = Framework(load_conf(ROOT / "examples" / "scheduler" / "print.conf"), registry, BuildContext())
    assert framework.needs_running
    c = static_cache("n1", gpus=1)
    c.add_job(job_of("first", share(600)))
    framework.run_once(c)  # binds it
    c.add_job(job_of("second", share(300), created=1.0))
    with caplog.at_level(logging.INFO, logger="runtimekit.plugins.logprint"):
        framework.run_once(c)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "[demo] Job default/first is ready, detail info: queue default, minMember 1, tasks: first-0 Bound on n1",
        "[demo] Job default/second is ready, detail info: queue default, minMember 1, tasks: second-0 Bound on n1",
    ]


STAMP = """
actions: "allocate"
tiers:
- plugins:
  - name: gang
  - name: predicates
  - name: gpushare
  - name: stamp
    arguments: {{stamp.maxInFlight: {cap}, stamp.holdNamespaces: "{hold}"}}
"""


def stamp_framework(cap: int = 4, hold: str = "") -> Framework:
    registry = builtin_registry()
    registry.add_directory(ROOT / "examples" / "plugins")
    return Framework(parse_conf(STAMP.format(cap=cap, hold=hold)), registry, BuildContext())


def test_stamp_annotates_each_pod_with_its_node_and_the_gpus_gpushare_wrote() -> None:
    c = static_cache("n1", gpus=2)
    c.add_job(job_of("two", share(300, count=2)))
    stamp_framework().run_once(c)
    assert c.bindings[PodKey("two-0")].annotations == {"stamp.example.com/placed": "n1 gpus=0,1"}


def test_stamp_refuses_a_reserve_beyond_its_cap_so_a_larger_gang_waits() -> None:
    c = static_cache("n1", gpus=2)
    c.add_job(job_of("gang", share(300), share(300), share(300), min_member=3))
    stamp_framework(cap=2).run_once(c)
    assert c.bound == {}
    assert "2 pods are already on their way to n1" in c.unschedulable[PodKey("gang-2")].message
    stamp_framework(cap=3).run_once(c)
    assert len(c.bound) == 3


def test_stamp_holds_binds_of_a_namespace_and_the_pod_stays_pending() -> None:
    c = static_cache("n1")
    c.add_job(job_of("held", share(300)))
    stamp_framework(hold="default").run_once(c)
    assert c.bound == {}
    assert "binds in namespace default are on hold" in c.unschedulable[PodKey("held-0")].message


@pytest.mark.parametrize("conf", ["volcano-scheduler.conf", "gpushare.conf", "print.conf", "stamp.conf"])
def test_example_confs_build(conf: str) -> None:
    registry = builtin_registry()
    registry.add_directory(ROOT / "examples" / "plugins")
    Framework(load_conf(ROOT / "examples" / "scheduler" / conf), registry, BuildContext())


def test_scheduler_refuses_to_start_with_an_unknown_plugin(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "bad.conf"
    conf.write_text('actions: "allocate"\ntiers:\n- plugins:\n  - name: logprint\n')
    assert main(["scheduler", "--config", str(conf)]) == 2
    assert "unknown plugin 'logprint'" in capsys.readouterr().err


@pytest.mark.parametrize("flags", [["--event-qps", "-1"], ["--event-burst", "0"]])
def test_scheduler_refuses_a_bad_event_rate(flags: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scheduler", *flags]) == 2
    assert "--event-qps must be 0 (no limit) or more" in capsys.readouterr().err

"""The custom-plugin example (examples/plugins) loads from a directory and runs."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from runtimekit.cli.main import main
from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.framework import BuildContext, Framework, load_conf
from scheduler.helpers import job_of, share, static_cache

ROOT = Path(__file__).resolve().parents[2]


def test_print_action_and_logprint_plugin(caplog: pytest.LogCaptureFixture) -> None:
    registry = builtin_registry()
    assert registry.load_directory(ROOT / "examples" / "plugins") == ["logprint", "print"]
    framework = Framework(load_conf(ROOT / "examples" / "scheduler" / "print.conf"), registry, BuildContext())
    c = static_cache("n1", gpus=1)
    c.add_job(job_of("fits", share(600)))
    c.add_job(job_of("waits", share(600), created=1.0))
    with caplog.at_level(logging.INFO, logger="runtimekit.plugins.logprint"):
        framework.run_once(c)
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("[demo] session ")
    assert line.endswith("pending jobs ['waits']; ready jobs ['fits']")


@pytest.mark.parametrize("conf", ["volcano-scheduler.conf", "gpushare.conf", "print.conf"])
def test_example_confs_build(conf: str) -> None:
    registry = builtin_registry()
    registry.load_directory(ROOT / "examples" / "plugins")
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

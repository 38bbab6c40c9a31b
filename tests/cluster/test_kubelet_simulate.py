"""What a simulated container does, by its command line (`cluster.kubelet.simulate.plan`): output,
run time and exit code of what the simulator can interpret; running forever otherwise."""

from __future__ import annotations

from typing import Any

import pytest

from runtimekit.cluster.kubelet.simulate import MAX_RUN_S, plan


def container(command: list[str] | None = None, args: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": "c", "image": "busybox"}
    if command is not None:
        out["command"] = command
    if args is not None:
        out["args"] = args
    return out


@pytest.mark.parametrize(
    ("command", "args", "output", "run_s", "code"),
    [
        (["echo", "hi"], None, ["hi"], 0.0, 0),
        (["sh", "-c", "echo a; sleep 2; echo b"], None, ["a", "b"], 2.0, 0),
        (["sh", "-c", "exit 3"], None, [], 0.0, 3),
        (["/bin/bash", "-c", "--"], ["echo x && false || echo y"], ["x", "y"], 0.0, 0),
        (["sleep", "5"], None, [], 5.0, 0),
        (["sleep"], ["1m"], [], 60.0, 0),
        (["sh", "-c", "false"], None, [], 0.0, 1),
        (["sh", "-c", "echo $GREETING from $HOSTNAME"], None, ["hello from pod-1"], 0.0, 0),
        (["printf", "%s-%s\\n", "a", "b"], None, ["a-b"], 0.0, 0),
    ],
    ids=["echo", "sh-sleep", "exit-3", "bash-c-dashdash", "sleep", "sleep-1m", "false", "env", "printf"],
)
def test_commands_that_finish(
    command: list[str], args: list[str] | None, output: list[str], run_s: float, code: int
) -> None:
    got = plan(container(command, args), {"GREETING": "hello", "HOSTNAME": "pod-1"}, "pod-1")
    assert [o.text for o in got.output] == output
    assert (got.run_s, got.exit_code) == (run_s, code)


@pytest.mark.parametrize(
    ("command", "args"),
    [
        (None, None),
        (["nginx", "-g", "daemon off;"], None),
        (["sleep", "infinity"], None),
        (["bash", "-c", "sleep 86400"], None),
        (["sleep"], [str(int(MAX_RUN_S) + 1)]),
        (["sh", "-c", "while true; do echo x; sleep 1; done"], None),
        (["sh", "-c", "echo start; tail -f /dev/null"], None),
        (["sh"], None),
    ],
    ids=["image-entrypoint", "server", "infinity", "day", "over-cap", "loop", "program", "interactive"],
)
def test_commands_that_keep_running(command: list[str] | None, args: list[str] | None) -> None:
    assert plan(container(command, args), {}, "p").run_s is None


def test_output_before_a_long_running_command_is_kept() -> None:
    got = plan(container(["sh", "-c", "echo start; python serve.py"]), {}, "p")
    assert ([o.text for o in got.output], got.run_s) == (["start"], None)

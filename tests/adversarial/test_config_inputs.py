"""Broken and hostile configuration files: protocol files, scheduler confs and trace files. Each is
refused by name (the file, the key or line and column, what is wrong) on one line, before anything
runs; none gives a traceback, none is silently accepted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from runtimekit.model.trace import TraceError, read_node_list, read_pod_list
from runtimekit.protocol import ProtocolError, load_protocol
from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.framework import BuildContext, ConfError, Framework, load_conf
from runtimekit.scheduler.framework.arguments import ArgumentError

PROTOCOLS = [
    pytest.param(
        "resources.core: aliyun.com/gpu\n",
        "key 'resources.core' names 'aliyun.com/gpu', which resources.gpu names already",
        id="core equals gpu",
    ),
    pytest.param(
        "resources.memory: aliyun.com/gpu-core.percentage\n",
        "key 'resources.memory' names 'aliyun.com/gpu-core.percentage', which resources.core names already",
        id="memory equals core",
    ),
    pytest.param(
        "resources.migPrefix: aliyun.com/gpu\n",
        "key 'resources.migPrefix' has a bad value 'aliyun.com/gpu': it is a prefix of resources.gpu",
        id="migPrefix a prefix of gpu",
    ),
    pytest.param(
        "resources.migPrefix: aliyun.com/\n",
        "it is a prefix of resources.gpu 'aliyun.com/gpu', which would be read as a MIG slice",
        id="migPrefix a prefix of all",
    ),
    pytest.param(
        "resources.gpu: example.com/a\nresources.gpu: example.com/b\n",
        "line 2: key 'resources.gpu' is given twice (first on line 1)",
        id="duplicate key",
    ),
    pytest.param(
        "resources:\n  gpu: example.com/a\n  core: example.com/c\n  gpu: example.com/b\n",
        "line 4: key 'gpu' is given twice (first on line 2)",
        id="duplicate nested key",
    ),
    pytest.param(
        "labels.state: lj_runtimekit_enable\n",
        "key 'labels.state' has the same value 'lj_runtimekit_enable' as 'labels.enable'",
        id="equal label keys",
    ),
    pytest.param(
        "annotations.allocated: runtimekit.aliyun.com/gpu-assignment\n",
        "key 'annotations.allocated' has the same value 'runtimekit.aliyun.com/gpu-assignment' as "
        "'annotations.assignment'",
        id="equal annotation keys",
    ),
]


@pytest.mark.parametrize(("text", "message"), PROTOCOLS)
def test_a_protocol_with_colliding_or_repeated_names_is_refused(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "protocol.yaml"
    path.write_text(text)
    with pytest.raises(ProtocolError) as refused:
        load_protocol(path)
    assert str(refused.value).startswith(f"{path}: ")
    assert message in str(refused.value)
    assert "\n" not in str(refused.value)


CONF_HEAD = 'actions: "allocate"\ntiers:\n- plugins:\n'
CONFS = [
    pytest.param(
        CONF_HEAD + "  - name: gpushare\n- plugins:\n  - name: gpushare\n",
        ConfError,
        "tiers[1].plugins[0]: plugin 'gpushare' is listed twice (first at tiers[0].plugins[0])",
        id="plugin in two tiers",
    ),
    pytest.param(
        CONF_HEAD + "  - name: priority\n  - name: priority\n",
        ConfError,
        "tiers[0].plugins[1]: plugin 'priority' is listed twice (first at tiers[0].plugins[0])",
        id="plugin twice in a tier",
    ),
    pytest.param(
        CONF_HEAD + "  - name: gpushare\n    arguments: {gpushare.weight: .nan}\n",
        ArgumentError,
        "gpushare: gpushare.weight must be a finite number, got nan",
        id="gpushare weight NaN",
    ),
    pytest.param(
        CONF_HEAD + "  - name: gpushare\n    arguments: {gpushare.weight: .inf}\n",
        ArgumentError,
        "gpushare: gpushare.weight must be a finite number, got inf",
        id="gpushare weight infinite",
    ),
    pytest.param(
        CONF_HEAD + "  - name: gpushare\n    arguments: {gpushare.weight: '-inf'}\n",
        ArgumentError,
        "gpushare: gpushare.weight must be a finite number, got '-inf'",
        id="gpushare weight '-inf' as text",
    ),
    pytest.param(
        CONF_HEAD + "  - name: nodeorder\n    arguments: {leastrequested.weight: NaN}\n",
        ArgumentError,
        "must be a finite number, got 'NaN'",
        id="nodeorder weight NaN as text",
    ),
    pytest.param(
        CONF_HEAD + "  - name: binpack\n    arguments: {binpack.weight: .nan}\n",
        ArgumentError,
        "binpack: argument 'binpack.weight' must be a finite number, got nan",
        id="binpack weight NaN",
    ),
    pytest.param(
        CONF_HEAD + "  - name: mig\n    arguments: {mig.weight: 1e999}\n",
        ArgumentError,
        "must be a finite number",
        id="mig weight 1e999",
    ),
    pytest.param(
        'actions: "allocate"\nactions: "enqueue"\ntiers: []\n',
        ConfError,
        "line 2: key 'actions' is given twice (first on line 1)",
        id="duplicate top-level key",
    ),
]


@pytest.mark.parametrize(("text", "error", "message"), CONFS)
def test_a_scheduler_conf_with_bad_weights_or_repeated_plugins_is_refused(
    tmp_path: Path, text: str, error: type[Exception], message: str
) -> None:
    path = tmp_path / "scheduler.conf"
    path.write_text(text)
    with pytest.raises(error) as refused:
        Framework(load_conf(path), builtin_registry(), BuildContext())
    assert message in str(refused.value)
    assert "\n" not in str(refused.value)


NODES_HEAD = "sn,cpu_milli,memory_mib,gpu,model\n"
PODS_HEAD = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
TRACES = [
    pytest.param(
        "pods",
        PODS_HEAD + "a,1000,1024,1e30,1000\n",
        ":2: column 'num_gpu' must be at most 64: '1e30'",
        id="num_gpu 1e30",
    ),
    pytest.param(
        "pods",
        PODS_HEAD + "a,1000,1024,1,1500\n",
        ":2: column 'gpu_milli' must be at most 1000: '1500'",
        id="gpu_milli 1500",
    ),
    pytest.param(
        "pods", PODS_HEAD + "a,1e30,1024,1,500\n", ":2: column 'cpu_milli' must be at most", id="cpu_milli 1e30"
    ),
    pytest.param(
        "pods",
        PODS_HEAD + "a,1000,1024,1,500\nb,1,1,0,0\na,1,1,0,0\n",
        ":4: pod 'a' appears twice (first on line 2)",
        id="duplicate pod names",
    ),
    pytest.param(
        "pods",
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time\n"
        "a,1000,1024,1,500,10,20\nb,1000,1024,1,500,30,\nc,1000,1024,1,500,50,40\n",
        ":4: pod 'c' is deleted before it is created: column 'deletion_time' 40 is before 'creation_time' 50",
        id="deleted before created",
    ),
    pytest.param(
        "nodes",
        NODES_HEAD + "n1,64000,262144,8,Z9000\n",
        ":2: column 'model': unknown GPU model 'Z9000'",
        id="unknown model",
    ),
    pytest.param(
        "nodes",
        NODES_HEAD + "n1,64000,262144,1e30,A100\n",
        ":2: column 'gpu' must be at most 64: '1e30'",
        id="node gpu 1e30",
    ),
]


@pytest.mark.parametrize(("kind", "text", "message"), TRACES)
def test_a_trace_with_impossible_values_is_refused_by_file_line_and_column(
    tmp_path: Path, kind: str, text: str, message: str
) -> None:
    path = tmp_path / f"{kind}.csv"
    path.write_text(text)
    with pytest.raises(TraceError) as refused:
        (read_pod_list if kind == "pods" else read_node_list)(path)
    assert str(refused.value).startswith(f"{path}:")
    assert message in str(refused.value)


NOT_UTF8 = b"resources.gpu: example.com/\xff\xfegpu\n"


@pytest.mark.parametrize(
    ("args", "name"),
    [
        pytest.param(["protocol", "check", "{file}"], "protocol.yaml", id="protocol"),
        pytest.param(["scheduler", "--config", "{file}"], "scheduler.conf", id="scheduler conf"),
        pytest.param(["simulate", "--pods", "{file}", "--seeds", "1", "--quiet"], "pods.csv", id="trace"),
    ],
)
def test_a_file_that_is_not_utf8_gets_one_line(tmp_path: Path, args: list[str], name: str) -> None:
    path = tmp_path / name
    path.write_bytes(NOT_UTF8)
    command = [sys.executable, "-m", "runtimekit.cli.main", *(a.replace("{file}", str(path)) for a in args)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if str(path) in line]
    assert len(lines) == 1, result.stderr
    assert "not UTF-8 text (byte 0xff at offset 27)" in lines[0]


DEEP = "x: " + "[" * 50_000 + "]" * 50_000 + "\n"  # PyYAML's recursion gave out: a RecursionError traceback


@pytest.mark.parametrize(
    ("args", "name", "code"),
    [
        pytest.param(["protocol", "check", "{file}"], "protocol.yaml", 2, id="protocol"),
        pytest.param(["scheduler", "--config", "{file}"], "scheduler.conf", 2, id="scheduler conf"),
        pytest.param(["scheduler", "--check-conf", "{file}"], "scheduler.conf", 1, id="scheduler check-conf"),
    ],
)
def test_a_file_nested_50000_deep_gets_one_line(tmp_path: Path, args: list[str], name: str, code: int) -> None:
    path = tmp_path / name
    path.write_text(DEEP)
    command = [sys.executable, "-m", "runtimekit.cli.main", *(a.replace("{file}", str(path)) for a in args)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == code
    output = result.stdout + result.stderr
    assert "Traceback" not in output
    lines = [line for line in output.splitlines() if "levels" in line]
    assert lines == [f"error: {path}: not valid YAML: line 1: lists and mappings nested deeper than 100 levels"]


@pytest.mark.parametrize("command", ["scheduler", "device-plugin", "controller"])
def test_a_missing_kubeconfig_is_one_line(tmp_path: Path, command: str) -> None:
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    missing = tmp_path / "nowhere" / "kubeconfig"
    result = subprocess.run(
        [sys.executable, "-m", "runtimekit.cli.main", command, "--kubeconfig", str(missing)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if "kubeconfig" in line]
    assert len(lines) == 1, result.stderr
    assert f"cannot use kubeconfig {missing}: Configuration file {missing} not found" in lines[0]

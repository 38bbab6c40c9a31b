"""The protocol in the components' ConfigMaps: `runtimekit protocol check` passes over deploy/ and the
Helm render, fails (naming the key) as soon as one ConfigMap diverges, every key is a chart value, and
the shipped values are the built-in defaults."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from deploy.manifests import CHART, DEPLOY, render_chart, render_deploy, run_deploy_all
from runtimekit.cli.main import main
from runtimekit.protocol import PROTOCOL_VERSION, KitProtocol, load_protocol
from runtimekit.protocol.loader import DEFAULTS, load_protocol_sources
from runtimekit.protocol.presets import PRESETS, preset_protocol, preset_text

CONFIGMAPS = sorted(DEPLOY.glob("*/02-configmap.yaml"))


def check(capsys: pytest.CaptureFixture[str], *files: Path) -> tuple[int, str, str]:
    code = main(["protocol", "check", *map(str, files)])
    out, err = capsys.readouterr()
    return code, out, err


def test_every_component_has_a_configmap_with_the_protocol() -> None:
    assert [p.parent.name for p in CONFIGMAPS] == [
        "controller",
        "deviceplugin",
        "exporter",
        "runtime",
        "scheduler",
        "webhook",
    ]


def test_the_configmaps_of_deploy_agree(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = check(capsys, *CONFIGMAPS, DEPLOY / "protocol.yaml")
    assert code == 0
    assert "ok: 7 protocols agree" in out


@pytest.mark.parametrize(
    ("component", "line", "replacement", "key"),
    [
        ("scheduler", "memoryUnit: 1Gi", "memoryUnit: 2Gi", "memoryUnit"),
        ("deviceplugin", "resources.gpu: aliyun.com/gpu", "resources.gpu: example.com/gpu", "resources.gpu"),
        ("controller", "labels.enable: lj_runtimekit_enable", "labels.enable: gpu-sharing", "labels.enable"),
        (
            "exporter",
            "sockets.runtime: /run/lj-runtimekit/runtime.sock",
            "sockets.runtime: /run/x.sock",
            "sockets.runtime",
        ),
    ],
)
def test_a_diverging_configmap_fails_the_check(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, component: str, line: str, replacement: str, key: str
) -> None:
    copies = []
    for path in CONFIGMAPS:
        copy = tmp_path / f"{path.parent.name}.yaml"
        shutil.copyfile(path, copy)
        copies.append(copy)
    edited = tmp_path / f"{component}.yaml"
    text = edited.read_text()
    assert text.count(f"    {line}\n") == 1
    edited.write_text(text.replace(f"    {line}\n", f"    {replacement}\n"))
    code, _, err = check(capsys, *copies)
    assert code == 1
    assert f"differs: {key}:" in err
    assert f"{edited}:kube-system/lj-runtimekit-" in err


def test_the_shipped_protocol_is_the_built_in_default() -> None:
    assert load_protocol(DEPLOY / "protocol.yaml") == KitProtocol.default()


def test_configmaps_hold_the_text_of_deploy_protocol_yaml() -> None:
    body = "".join(line for line in (DEPLOY / "protocol.yaml").read_text().splitlines(True) if not line.startswith("#"))
    for path in CONFIGMAPS:
        (configmap,) = (d for d in yaml.safe_load_all(path.read_text()) if d["kind"] == "ConfigMap")
        assert configmap["data"]["protocol.yaml"] == body, path


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in data.items():
        if isinstance(value, dict):
            out |= flatten(value, f"{prefix}{name}.")
        else:
            out[f"{prefix}{name}"] = value
    return out


def test_the_chart_has_a_value_for_every_protocol_key() -> None:
    values = flatten(yaml.safe_load((CHART / "values.yaml").read_text())["protocol"])
    assert values.pop("preset") == ""
    as_text = {k: ("true" if v is True else "false" if v is False else str(v)) for k, v in values.items()}
    assert as_text == dict(DEFAULTS)


@pytest.mark.parametrize("name", list(PRESETS))
def test_the_preset_files_of_the_chart_and_of_deploy_are_what_the_cli_writes(name: str) -> None:
    assert (CHART / "files" / "presets" / f"{name}.yaml").read_text() == preset_text(name)
    assert (DEPLOY / "presets" / f"{name}.yaml").read_text() == preset_text(name)


@pytest.mark.parametrize("name", list(PRESETS))
def test_a_preset_by_name_reaches_every_configmap_both_ways(
    name: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for way, text in (
        ("helm", render_chart("--set", f"protocol.preset={name}")),
        ("deploy", render_deploy(f"--preset={name}")),
    ):
        rendered = tmp_path / f"{way}.yaml"
        rendered.write_text(text)
        found = load_protocol_sources(rendered)
        assert len(found) == 6, way  # every component's ConfigMap
        assert all(protocol == preset_protocol(name) for _, protocol in found), way
        assert all(protocol.version == PROTOCOL_VERSION for _, protocol in found), way


def test_the_device_plugin_settings_go_with_a_preset(tmp_path: Path) -> None:
    rendered = tmp_path / "chart.yaml"
    settings = ("memoryScaling=1.5", "defaultMemory=512", "defaultCores=20")
    settings = tuple(f"protocol.rules.{setting}" for setting in settings)
    rendered.write_text(render_chart("--set", "protocol.preset=hami", *(a for s in settings for a in ("--set", s))))
    found = load_protocol_sources(rendered)
    rules = preset_protocol("hami").rules
    expected = msgspec.structs.replace(rules, memory_scaling=1.5, default_memory=512, default_cores=20)
    assert {protocol.rules for _, protocol in found} == {expected}
    assert all(protocol.resources == preset_protocol("hami").resources for _, protocol in found)


def test_deploy_all_refuses_an_unknown_preset() -> None:
    done = run_deploy_all("render", "--preset=koordinator")
    assert done.returncode == 2
    assert "--preset 'koordinator' is not a preset (known: gpushare hami nvidia volcano-vgpu)" in done.stderr


def test_version_two_chart_values_render_as_the_protocol_reads_them(tmp_path: Path) -> None:
    rendered = tmp_path / "chart.yaml"
    rendered.write_text(
        render_chart(
            "--set",
            "protocol.rules.modelMatch=contains",
            "--set",
            "protocol.aliases.memory=a.com/m\\, b.com/n",
            "--set",
            "protocol.resources.gpuReplicas=10",
            "--set",
            "protocol.resources.memoryAdvertised=false",
            "--set",
            "protocol.schedulerAliases=hami-scheduler",
            "--set",
            "protocol.rules.memoryScaling=1.5",
            "--set",
            "protocol.rules.defaultMemory=512",
            "--set",
            "protocol.rules.defaultCores=20",
        )
    )
    [(_, protocol), *rest] = load_protocol_sources(rendered)
    assert all(other == protocol for _, other in rest)
    assert protocol.names("memory") == ("aliyun.com/gpu-memory", "a.com/m", "b.com/n")
    assert (protocol.resources.gpu_replicas, protocol.resources.memory_advertised) == (10, False)
    assert (protocol.rules.model_match, protocol.scheduler_aliases) == ("contains", ("hami-scheduler",))
    rules = protocol.rules
    assert (rules.memory_scaling, rules.default_memory, rules.default_cores) == (1.5, 512, 20)


def test_helm_renders_agreeing_configmaps(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rendered = tmp_path / "chart.yaml"
    rendered.write_text(
        render_chart("--set", "protocol.resources.gpu=example.com/gpu", "--set", "protocol.memoryUnit=512Mi")
    )
    code, out, _ = check(capsys, rendered)
    assert code == 0
    assert "ok: 6 protocols agree" in out
    protocol = load_protocol(DEPLOY / "protocol.yaml")
    code, _, err = check(capsys, rendered, DEPLOY / "protocol.yaml")
    assert code == 1
    assert "differs: resources.gpu" in err
    assert "differs: memoryUnit" in err
    assert protocol.resources.gpu == "aliyun.com/gpu"

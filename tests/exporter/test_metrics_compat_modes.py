"""Which peers' names the exporter writes: the `nvidia` preset turns on dcgm-exporter's, `hami` HAMi's,
the config's `metricsCompat` and `--metrics-compat` choose otherwise; a bad name stops the exporter."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import generate_latest

from exporter.conftest import Node
from runtimekit.exporter.compat import parse_modes, resolve_modes
from runtimekit.exporter.config import ConfigError, ExporterConfig, load_config
from runtimekit.exporter.extensions import ExtensionContext
from runtimekit.exporter.health import HealthDetector
from runtimekit.exporter.registry import build_registry
from runtimekit.protocol import KitProtocol, load_protocol
from runtimekit.protocol.presets import PRESETS, preset_protocol, preset_text


@pytest.mark.parametrize(
    ("preset", "modes"),
    [("nvidia", ("dcgm",)), ("hami", ("hami",)), ("gpushare", ()), ("volcano-vgpu", ())],
)
def test_a_presets_protocol_decides_by_default(preset: str, modes: tuple[str, ...], tmp_path: Path) -> None:
    assert resolve_modes(("preset",), preset_protocol(preset)) == modes
    # a protocol.yaml written from the preset (as `runtimekit up --protocol nvidia` does) counts the same
    path = tmp_path / "protocol.yaml"
    path.write_text(preset_text(preset))
    assert resolve_modes(ExporterConfig().metrics_compat, load_protocol(str(path))) == modes


def test_the_default_protocol_writes_no_peer_names() -> None:
    assert resolve_modes(("preset",), KitProtocol.default()) == ()
    assert set(PRESETS) >= {"nvidia", "hami"}


def test_config_and_flag_choose_otherwise(tmp_path: Path) -> None:
    path = tmp_path / "exporter.yaml"
    path.write_text("metricsCompat: dcgm, hami\n")
    assert resolve_modes(load_config(path).metrics_compat, preset_protocol("nvidia")) == ("dcgm", "hami")
    path.write_text("metrics-compat: []\n")
    assert resolve_modes(load_config(path).metrics_compat, preset_protocol("nvidia")) == ()
    path.write_text("metricsCompat: [preset, dcgm]\n")
    assert resolve_modes(load_config(path).metrics_compat, preset_protocol("nvidia")) == ("dcgm",)
    assert parse_modes("none") == ()
    assert parse_modes("hami, dcgm") == ("hami", "dcgm")


def test_a_bad_name_is_refused_with_the_key(tmp_path: Path) -> None:
    path = tmp_path / "exporter.yaml"
    path.write_text("metricsCompat: [nvidia]\n")
    with pytest.raises(ConfigError, match="metricsCompat: unknown 'nvidia'; known: dcgm, hami, preset"):
        load_config(path)
    with pytest.raises(ValueError, match="--metrics-compat 'dcgm-exporter'"):
        parse_modes("dcgm-exporter")


def test_the_registry_of_an_nvidia_node_writes_dcgm_names(node: Node) -> None:
    config = ExporterConfig()
    context = ExtensionContext(node.client, preset_protocol("nvidia"), config, "node-a")
    text = generate_latest(build_registry(context, HealthDetector(node.client, config.health))).decode()
    assert "DCGM_FI_DEV_GPU_TEMP{" in text
    assert "runtimekit_gpu_temperature_celsius{" in text
    assert "hami_" not in text

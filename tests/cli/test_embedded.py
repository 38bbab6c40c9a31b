"""The embedded cluster's options as `runtimekit up` passes them: the gpu-memory unit of each node
(`--memory-unit`): one for every node, one per node by name, or both; a bad entry is refused with a
message naming it. The GPU models of the nodes (`--gpu-model`, several in turn) and `--protocol`, a
file or a preset's name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runtimekit.cli.embedded import ClusterOptions, protocol_file
from runtimekit.protocol import ProtocolError, load_protocol
from runtimekit.protocol.presets import preset_protocol

DEFAULT = 1024


@pytest.mark.parametrize(
    ("spec", "units"),
    [
        pytest.param("", [1024, 1024, 1024], id="default-the-protocols"),
        pytest.param("512Mi", [512, 512, 512], id="one-for-every-node"),
        pytest.param("gpu-node-2=512Mi", [1024, 512, 1024], id="one-node"),
        pytest.param("2Gi,gpu-node-3=256Mi", [2048, 2048, 256], id="a-default-and-one-node"),
        pytest.param("gpu-node-1=1Gi, gpu-node-2=1024Mi", [1024, 1024, 1024], id="spaces-and-spellings"),
    ],
)
def test_memory_units_per_node(spec: str, units: list[int]) -> None:
    options = ClusterOptions(nodes=3, memory_unit=spec)
    options.validate()
    assert options.memory_units(DEFAULT) == dict(zip(options.node_names(), units, strict=True))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param("lots", "--memory-unit 'lots': 'lots' is not a quantity", id="not-a-quantity"),
        pytest.param("1000k", "must be a positive whole number of MiB", id="not-whole-MiB"),
        pytest.param("gpu-node-9=1Gi", "no node 'gpu-node-9' (nodes: gpu-node-1, gpu-node-2)", id="unknown-node"),
        pytest.param("1Gi,2Gi", "one unit for all nodes at most", id="two-defaults"),
        pytest.param("gpu-node-1=1Gi,gpu-node-1=2Gi", "node 'gpu-node-1' is named twice", id="named-twice"),
    ],
)
def test_bad_memory_units_are_refused_with_the_entry_named(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        ClusterOptions(nodes=2, memory_unit=spec).validate()


@pytest.mark.parametrize(
    ("spec", "models"),
    [
        pytest.param("H200", ["H200", "H200", "H200"], id="one-for-every-node"),
        pytest.param("A100-40GB,H200", ["A100-40GB", "H200", "A100-40GB"], id="in-turn"),
        pytest.param(" A100 , T4", ["A100-80GB", "T4", "A100-80GB"], id="aliases-and-spaces"),
    ],
)
def test_gpu_models_are_given_to_the_nodes_in_turn(spec: str, models: list[str]) -> None:
    options = ClusterOptions(nodes=3, gpu_model=spec)
    options.validate()
    assert [options.gpu_model_of(i) for i in (1, 2, 3)] == models


@pytest.mark.parametrize(
    ("options", "message"),
    [
        pytest.param(ClusterOptions(gpu_model="A100,Z9"), "unknown GPU model 'Z9'", id="unknown-model"),
        pytest.param(ClusterOptions(gpu_model=" , "), "--gpu-model names no model", id="no-model"),
        pytest.param(ClusterOptions(gpu_model="A100,T4", mig_mode="static"), "has no MIG", id="one-without-mig"),
    ],
)
def test_bad_gpu_models_are_refused(options: ClusterOptions, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        options.validate()


def test_protocol_takes_a_file_or_a_preset_by_name(tmp_path: Path) -> None:
    own = tmp_path / "mine.yaml"
    own.write_text("resources.gpu: example.com/gpu\n")
    assert protocol_file(str(own), tmp_path) == str(own)
    assert protocol_file(None, tmp_path) is None
    written = protocol_file("hami", tmp_path)
    assert written == str(tmp_path / "protocol.yaml")
    assert load_protocol(written) == preset_protocol("hami")
    with pytest.raises(ProtocolError, match=r"--protocol 'hmai': no such file, and no such preset \(hami, "):
        protocol_file("hmai", tmp_path)
    assert protocol_file("missing/protocol.yaml", tmp_path) == "missing/protocol.yaml"  # the loader says why

"""The embedded cluster's options as `runtimekit up` passes them: the gpu-memory unit of each node
(`--memory-unit`): one for every node, one per node by name, or both; a bad entry is refused with a
message naming it."""

from __future__ import annotations

import re

import pytest

from runtimekit.cli.embedded import ClusterOptions

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

"""benchmarks/cluster_shapes.py: the users'-cluster node lists and the openb pod lists scaled to them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from runtimekit.model.trace import read_node_list, read_pod_list

POD_LIST = """name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos
p0,8000,81106,1,500,G2|T4,LS
p1,4000,1000,0,0,,BE
"""


@pytest.fixture
def shapes(bench_script: Callable[[str], ModuleType]) -> ModuleType:
    return bench_script("cluster_shapes")


@pytest.mark.parametrize(
    ("shape", "nodes", "models", "mib_per_gpu"),
    [("h200", 400, {"H200": 3200}, 262_144), ("h200-l40s", 500, {"H200": 1600, "L40S": 1600}, 196_608)],
)
def test_shapes_have_the_documented_nodes_and_scale_memory_to_the_gpu(
    shapes: ModuleType, tmp_path: Path, shape: str, nodes: int, models: dict[str, int], mib_per_gpu: int
) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "openb_pod_list_x.csv").write_text(POD_LIST)
    shapes.write_shape(shape, str(tmp_path / "in"), tmp_path / "out", ["x"])
    node_list = read_node_list(tmp_path / "out" / shape / "openb_node_list_gpu_node.csv")
    assert len(node_list) == nodes
    per_model: dict[str, int] = {}
    for node in node_list:
        per_model[node.model] = per_model.get(node.model, 0) + node.gpus
    assert per_model == models
    assert sum(n.memory_mib for n in node_list) == mib_per_gpu * sum(models.values())
    pods = read_pod_list(tmp_path / "out" / shape / f"openb_pod_list_{shape}-x.csv")
    # a pod asking openb's memory per GPU asks the shape's; specs name openb's models, so they go
    assert [(p.memory_mib, p.gpu_spec, p.cpu_milli, p.gpu_milli) for p in pods] == [
        (round(81106 * mib_per_gpu / (503_828_480 / 6212)), "", 8000, 500),
        (round(1000 * mib_per_gpu / (503_828_480 / 6212)), "", 4000, 0),
    ]
    first = (tmp_path / "out" / shape / "openb_node_list_gpu_node.csv").read_bytes()
    shapes.write_shape(shape, str(tmp_path / "in"), tmp_path / "again", ["x"])
    assert (tmp_path / "again" / shape / "openb_node_list_gpu_node.csv").read_bytes() == first


def test_a_shifted_list_name_reads_both_lists(shapes: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    node_list = "sn,cpu_milli,memory_mib,gpu,model\nn0,8000,9000,2,T4\n"
    (tmp_path / "a" / "openb_node_list_gpu_node.csv").write_text(node_list)
    (tmp_path / "a" / "openb_pod_list_one.csv").write_text(POD_LIST)
    (tmp_path / "b" / "openb_pod_list_two.csv").write_text(POD_LIST.replace("p0", "q0").replace("p1,", "q1,"))
    nodes, first, second = shapes.list_inputs(f"{tmp_path / 'a'},{tmp_path / 'b'}", "one+two")
    assert [n.name for n in nodes] == ["n0"]
    assert [p.name for p in first] == ["p0", "p1"]
    assert [p.name for p in second] == ["q0", "q1"]
    assert shapes.list_inputs(str(tmp_path / "a"), "one")[2] == []

"""MIG geometry, slice arithmetic, and MIG slots in the ledger."""

from __future__ import annotations

import pytest

from runtimekit.model import (
    Ledger,
    LedgerError,
    MigMode,
    NodeCapacity,
    NodeInventory,
    NodeName,
    Placement,
    PodKey,
    Slot,
)
from runtimekit.model.gpu import GPU_MODELS, Gpu, MigInstance, simulated_uuid
from runtimekit.model.mig import MIG_GEOMETRY, geometry, layout_from_names, mask, placeable
from runtimekit.runtime.nvml import short_model

CAP = NodeCapacity(64000, 1 << 40, 110)


def test_every_geometry_is_consistent() -> None:
    for geo in MIG_GEOMETRY.values():
        compute = 7 if geo.slices == 8 else 4
        for profile in geo.profiles:
            assert profile.compute_slices <= compute
            assert all(s >= 0 and s + profile.size <= geo.slices for s in profile.starts), profile
        assert geo.profiles[-1].size == geo.slices  # the whole-GPU profile


@pytest.mark.parametrize(
    ("occupied", "expected"),
    [
        (0, {"1g.18gb": 7, "1g.35gb": 4, "2g.35gb": 3, "3g.71gb": 2, "4g.71gb": 1, "7g.141gb": 1}),
        (mask(0, 1), {"1g.18gb": 6, "1g.35gb": 3, "2g.35gb": 2, "3g.71gb": 1, "4g.71gb": 0, "7g.141gb": 0}),
        (mask(4, 4), {"1g.18gb": 4, "1g.35gb": 2, "2g.35gb": 2, "3g.71gb": 1, "4g.71gb": 1, "7g.141gb": 0}),
    ],
)
def test_placeable_counts(occupied: int, expected: dict[str, int]) -> None:
    geo = geometry("H200")
    assert geo is not None
    assert placeable(geo, occupied) == expected


def test_static_layouts() -> None:
    geo = geometry("A100-80GB")
    assert geo is not None
    assert layout_from_names(geo, ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]) == [
        ("2g.20gb", 0),
        ("1g.10gb", 2),
        ("1g.10gb", 3),
        ("3g.40gb", 4),
    ]
    with pytest.raises(ValueError, match="more compute slices"):
        layout_from_names(geo, ["4g.40gb", "4g.40gb"])
    with pytest.raises(ValueError, match="does not fit one A100-80GB"):
        layout_from_names(geo, ["4g.40gb", "1g.20gb", "1g.20gb", "1g.10gb"])
    with pytest.raises(ValueError, match="no MIG profile '1g.18gb'"):
        layout_from_names(geo, ["1g.18gb"])


def mig_node(mode: MigMode, instances: tuple[MigInstance, ...] = ()) -> NodeInventory:
    gpus = (
        Gpu(0, simulated_uuid("m", 0), "A100-80GB", 81920, mig_mode=mode, mig_devices=instances),
        Gpu(1, simulated_uuid("m", 1), "A100-80GB", 81920),
    )
    return NodeInventory(NodeName("m"), gpus)


def test_dynamic_slices_are_booked_and_refused_when_they_overlap() -> None:
    ledger = Ledger()
    ledger.set_node(mig_node(MigMode.DYNAMIC), CAP)
    ledger.reserve(PodKey("a"), Placement(NodeName("m"), 100, 0, (Slot(0, 0, 40192, "3g.40gb", 0),)))
    with pytest.raises(LedgerError, match="slices 2-3 are taken"):
        ledger.reserve(PodKey("b"), Placement(NodeName("m"), 100, 0, (Slot(0, 0, 19968, "2g.20gb", 2),)))
    with pytest.raises(LedgerError, match="cannot start at slice 5"):
        ledger.reserve(PodKey("b"), Placement(NodeName("m"), 100, 0, (Slot(0, 0, 19968, "2g.20gb", 5),)))
    with pytest.raises(LedgerError, match="not in MIG mode"):
        ledger.reserve(PodKey("b"), Placement(NodeName("m"), 100, 0, (Slot(1, 0, 9728, "1g.10gb", 0),)))
    ledger.reserve(PodKey("b"), Placement(NodeName("m"), 100, 0, (Slot(0, 0, 19968, "2g.20gb", 4),)))
    assert ledger.table.mig[ledger.table.row("m")][0].occupied == mask(0, 6)
    ledger.release(PodKey("a"))
    assert ledger.table.mig[ledger.table.row("m")][0].occupied == mask(4, 2)
    # the MIG GPU is not offered to shares, the other GPU is
    assert ledger.table.gpu_usable[ledger.table.row("m")] == 1


def test_static_layout_offers_only_existing_instances() -> None:
    layout = (MigInstance("MIG-a", "3g.40gb", 0), MigInstance("MIG-b", "3g.40gb", 4))
    ledger = Ledger()
    ledger.set_node(mig_node(MigMode.STATIC, layout), CAP)
    state = ledger.table.mig[ledger.table.row("m")][0]
    assert state.options("3g.40gb") == [0, 4]
    assert state.options("1g.10gb") == []
    with pytest.raises(LedgerError, match="no 1g.10gb instance at slice 0"):
        ledger.reserve(PodKey("x"), Placement(NodeName("m"), 0, 0, (Slot(0, 0, 9728, "1g.10gb", 0),)))
    ledger.reserve(PodKey("x"), Placement(NodeName("m"), 0, 0, (Slot(0, 0, 40192, "3g.40gb", 4),)))
    assert state.options("3g.40gb") == [0]


def test_inventory_annotation_round_trips_mig_devices() -> None:
    inventory = mig_node(MigMode.STATIC, (MigInstance("MIG-a", "7g.80gb", 0),))
    again = NodeInventory.from_annotation("m", inventory.to_annotation())
    assert again == inventory


def test_changing_mig_mode_under_booked_slices_drops_the_booking() -> None:
    ledger = Ledger()
    ledger.set_node(mig_node(MigMode.DYNAMIC), CAP)
    ledger.reserve(PodKey("a"), Placement(NodeName("m"), 0, 0, (Slot(0, 0, 9728, "1g.10gb", 0),)))
    dropped = ledger.set_node(mig_node(MigMode.OFF), CAP)
    assert [pod for pod, _ in dropped] == ["a"]


@pytest.mark.parametrize(
    ("product", "board", "sxm"),
    [
        ("NVIDIA H200 NVL", "H200-NVL", "H200"),
        ("NVIDIA H100 PCIe", "H100-PCIe", "H100-80GB"),
        ("NVIDIA A100 80GB PCIe", "A100-80GB-PCIe", "A100-80GB"),
        ("NVIDIA A100-PCIE-40GB", "A100-PCIE-40GB", "A100-40GB"),
    ],
)
def test_pcie_and_nvl_boards_have_their_sxm_boards_mig_layout(product: str, board: str, sxm: str) -> None:
    """The runtime names a real GPU by its product name (an H200 NVL is `H200-NVL`): the scheduler must
    know that board's MIG layout, or a node of them in MIG mode offers no MIG slot at all."""
    assert short_model(product) == board
    geo, same = geometry(board), geometry(sxm)
    assert geo is not None
    assert same is not None
    assert (geo.model, geo.slices, geo.profiles) == (board, same.slices, same.profiles)
    gpu = Gpu(0, simulated_uuid("nvl", 0), board, GPU_MODELS[board].memory_mib, mig_mode=MigMode.DYNAMIC)
    ledger = Ledger()
    ledger.set_node(NodeInventory(NodeName("nvl"), (gpu,)), CAP)
    state = ledger.table.mig[ledger.table.row("nvl")][0]
    assert state is not None
    smallest = geo.profiles[0]
    assert state.options(smallest.name) == list(smallest.starts)

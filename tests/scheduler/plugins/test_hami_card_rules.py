"""HAMi's per-card rules under a protocol with a split count (the `hami` preset): a card holds at most
`deviceSplitCount` shares, `gpucores: 100` takes a card alone, a share without cores does not join a
card whose cores are all used.

`FIT_CASES` are HAMi's own `TestDevices_Fit` cases (pkg/device/nvidia/device_test.go) as data: each
card's `Used` / `Count` / `Usedmem` / `Totalmem` / `Usedcores` becomes a table whose card has `Used`
holders and `Count` as the split count; HAMi's reason becomes the kit's. The cases about card types,
UUIDs and quotas are the selector's and the request's (tests/model, test_gpushare_presets.py); the
`gpucores` above 100 case is the request's (tests/model/test_request.py). The live cases run the
same rules through the scheduler's cache and binder, as HAMi's users meet them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from runtimekit.model import Gpu, GpuKind, GpuRequest, NodeCapacity, NodeInventory, NodeTable, Placement, Slot
from runtimekit.protocol.presets import preset_protocol
from runtimekit.scheduler.plugins.gpushare.fit import (
    REASON_ALONE,
    REASON_CORE,
    REASON_MEMORY,
    REASON_NO_CORE,
    REASON_NO_GPU,
    REASON_SPLIT,
    REASON_TOO_BIG,
    explain_misfit,
    fit_rows,
    fitting_gpus,
)
from scheduler.fake_api import FakeApi, node_object, pod_object
from scheduler.plugins.test_gpushare_presets import make, placed, reasons, schedule

HAMI = preset_protocol("hami")


@dataclass(frozen=True)
class Card:
    """One of HAMi's `DeviceUsage` in a test case."""

    used: int = 0
    count: int = 100
    usedmem: int = 0
    totalmem: int = 128
    usedcores: int = 0
    health: bool = True


def table_of(cards: list[Card]) -> NodeTable:
    """One node whose GPUs are the cards, each holding `used` shares that together take `usedcores`
    and `usedmem`."""
    inventory = NodeInventory.simulated("node", "T4", len(cards))
    gpus = tuple(
        Gpu(g.index, g.uuid, g.model, card.totalmem, card.health) for g, card in zip(inventory.gpus, cards, strict=True)
    )
    table = NodeTable()
    table.add_node(NodeInventory(inventory.node, gpus), NodeCapacity(10**6, 10**6 << 20, pods=10**4))
    for column, card in enumerate(cards):
        for k in range(card.used):
            first = k == 0
            slot = Slot(column, card.usedcores * 10 if first else 0, card.usedmem if first else 0)
            table.take(Placement(inventory.node, slots=(slot,)), allow_unusable=True)
    return table


def share(nums: int, memreq: int = 0, mem_percent: int = 0, cores: int = 0) -> GpuRequest:
    """HAMi's ContainerDeviceRequest as the kit parses it (`MemPercentagereq` 0 with a memory amount:
    the amount; neither: all of the card's memory)."""
    memory = memreq or None
    percent = None if memory is not None else (mem_percent or 100)
    return GpuRequest(GpuKind.SHARE, nums, cores * 10, memory, memory_percent=percent)


FIT_CASES = [
    pytest.param([Card(), Card()], share(1, 64, cores=50), "", id="fit success"),
    pytest.param([Card()], share(1, 512, cores=50), REASON_TOO_BIG, id="fit fail: memory not enough"),
    pytest.param(
        [Card(used=1, totalmem=1024, usedcores=100)], share(1, 512, cores=50), REASON_CORE, id="core not enough"
    ),
    pytest.param([Card(used=100, totalmem=1280)], share(1, 512, cores=50), REASON_SPLIT, id="fit fail: card overused"),
    pytest.param([Card(used=20, totalmem=1280)], share(1, 512, cores=100), REASON_ALONE, id="card exclusively"),
    pytest.param(
        [Card(used=20, totalmem=1280, usedcores=100)],
        share(1, 512, cores=0),
        REASON_NO_CORE,
        id="fit fail: CardComputeUnitsExhausted",
    ),
    pytest.param(
        [Card(used=20, totalmem=1280, usedcores=10)],
        share(2, 512, cores=20),
        REASON_CORE,
        id="fit fail: AllocatedCardsInsufficientRequest",
    ),
    pytest.param(
        [Card(totalmem=1280), Card(totalmem=1280)],
        share(3, 512, cores=20),
        REASON_CORE,
        id="fit fail: partial allocation AllocatedCardsInsufficientRequest for multiple cards",
    ),
    pytest.param(
        [Card(used=20, totalmem=1280, usedcores=10)], share(1, mem_percent=10, cores=20), "", id="memory percentage"
    ),
    pytest.param(
        [Card(used=20, totalmem=1280, usedcores=10, health=False)],
        share(1, mem_percent=10, cores=20),
        REASON_NO_GPU,
        id="fit fail: CardNotHealth",
    ),
    # pkg/scheduler/score_test.go Test_fitInCertainDevice (a card of Totalcore 1 there is one whose
    # cores are all used here: the kit's cards have 100 %)
    pytest.param(
        [Card(used=5, count=4, totalmem=8192, usedmem=2048, usedcores=1)],
        share(1, 1024, cores=1),
        REASON_SPLIT,
        id="device count less than device used",
    ),
    pytest.param(
        [Card(used=1, count=4, totalmem=8000, usedmem=8000, usedcores=1)],
        share(1, mem_percent=100, cores=100),
        REASON_MEMORY,
        id="card insufficient remaining memory",
    ),
    pytest.param(
        [Card(used=1, count=4, totalmem=8192, usedmem=2048)],
        share(1, 100, cores=100),
        REASON_ALONE,
        id="the container wants exclusive access to an entire card, but the card is already in use",
    ),
    pytest.param(
        [Card(used=1, count=4, totalmem=8192, usedmem=2048, usedcores=100)],
        share(1, 1024, cores=0),
        REASON_NO_CORE,
        id="can't allocate core=0 job to an already full GPU",
    ),
    # beyond HAMi's table: a card one short of its split count still takes a share; memory first
    pytest.param([Card(used=99, totalmem=1280)], share(1, 512, cores=50), "", id="one slot left"),
    pytest.param(
        [Card(used=1, totalmem=1280, usedmem=1000)], share(1, 512, cores=100), REASON_MEMORY, id="memory before alone"
    ),
]


@pytest.mark.parametrize(("cards", "request_", "reason"), FIT_CASES)
def test_hamis_fit_cases(cards: list[Card], request_: GpuRequest, reason: str) -> None:
    split = cards[0].count
    table = table_of(cards)
    rows = table.active_rows()
    passed, _ = fit_rows(table, rows, request_, split)
    assert bool(passed[0]) == (not reason)
    assert (fitting_gpus(table, 0, request_, split).size >= request_.count) == (not reason)
    if reason:
        first = next(why for why, mask in explain_misfit(table, rows, request_, split) if mask[0])
        assert first == reason


def test_without_a_split_count_only_free_amounts_count() -> None:
    """The kit's own protocols (one device per GPU) keep their rules: placements stay as they were."""
    for cards, request_ in (
        ([Card(used=20, totalmem=1280)], share(1, 512, cores=100)),
        ([Card(used=20, totalmem=1280, usedcores=100)], share(1, 512, cores=0)),
        ([Card(used=100, totalmem=1280)], share(1, 512, cores=50)),
    ):
        table = table_of(cards)
        assert fit_rows(table, table.active_rows(), request_, split=1)[0].all()


def test_holders_are_given_back() -> None:
    table = table_of([Card(used=3, totalmem=1280)])
    placement = Placement(table.node_names()[0], slots=(Slot(0, 0, 0),))
    table.give(placement)
    assert table.holders[0, 0] == 2
    assert np.array_equal(table.copy().holders, table.holders)


# -- through the scheduler ------------------------------------------------------------------------


@pytest.fixture
def one_card() -> FakeApi:
    api = FakeApi()
    api.add_node(node_object("node", gpus=1, model="H200"))
    return api


def test_the_eleventh_pod_on_a_card_stays_pending_instead_of_failing_at_kubelet(one_card: FakeApi) -> None:
    cache, framework = make(one_card)
    for i in range(11):
        one_card.add_pod(
            pod_object(f"p{i}", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 100}, scheduler="hami-scheduler")
        )
    schedule(cache, framework)
    bound = [i for i in range(11) if placed(one_card, f"p{i}")[0]]
    assert len(bound) == HAMI.resources.gpu_replicas == 10
    pending = next(f"p{i}" for i in range(11) if i not in bound)
    assert any(REASON_SPLIT in m for m in reasons(one_card, pending)), reasons(one_card, pending)


def test_all_cores_take_a_card_alone_and_a_share_without_cores_needs_some(one_card: FakeApi) -> None:
    cache, framework = make(one_card)
    one_card.add_pod(
        pod_object("memory-only", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000}, scheduler="hami-scheduler")
    )
    schedule(cache, framework)
    assert placed(one_card, "memory-only")[0] == "node"
    alone = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000, "nvidia.com/gpucores": 100}
    one_card.add_pod(pod_object("alone", alone, scheduler="hami-scheduler"))
    schedule(cache, framework)
    assert placed(one_card, "alone") == ("", [])
    assert any(REASON_ALONE in m for m in reasons(one_card, "alone")), reasons(one_card, "alone")
    one_card.delete_pod("default/memory-only")
    schedule(cache, framework)
    node, [held] = placed(one_card, "alone")
    assert (node, held["coreMilli"]) == ("node", 1000)
    one_card.add_pod(pod_object("late", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000}, scheduler="hami-scheduler"))
    schedule(cache, framework)
    assert placed(one_card, "late") == ("", [])
    assert any(REASON_NO_CORE in m for m in reasons(one_card, "late")), reasons(one_card, "late")


def bare(name: str, limits: dict[str, int]) -> dict[str, object]:
    """A pod as HAMi's examples write it: GPU limits, no CPU or memory request."""
    pod = pod_object(name, limits, scheduler="hami-scheduler")
    del pod["spec"]["containers"][0]["resources"]["requests"]
    return pod


@pytest.mark.parametrize(
    ("late", "reason"),
    [
        pytest.param({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000}, REASON_NO_CORE, id="CardComputeUnitsExhausted"),
        pytest.param(
            {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 99},
            REASON_MEMORY,
            id="CardInsufficientMemory",
        ),
    ],
)
def test_a_full_card_says_the_cards_reason_not_the_queues(one_card: FakeApi, late: dict[str, int], reason: str) -> None:
    """A cluster one queue fills is that queue's deserved share: proportion calls the queue overused
    and allocate skips it, but the reason the pod reads is the card's, as HAMi gives it."""
    cache, framework = make(one_card)
    one_card.add_pod(bare("alone", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000, "nvidia.com/gpucores": 100}))
    schedule(cache, framework)
    assert placed(one_card, "alone")[0] == "node"
    one_card.add_pod(bare("late", late))
    schedule(cache, framework)
    assert placed(one_card, "late") == ("", [])
    got = reasons(one_card, "late")
    assert got, one_card.events
    assert all(reason in m for m in got), got
    assert not any("overused" in m for m in got), got

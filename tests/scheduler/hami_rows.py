"""HAMi's own scheduler test cases as rows for the end-to-end runner (live_tables.py), under the
`hami` preset: `TestDevices_Fit` (pkg/device/nvidia/device_test.go) and `Test_fitInCertainDevice`
(pkg/scheduler/score_test.go), the card states those cases start from made by pods the scheduler
places first (a card's `Used` holders, the first holding `Usedcores` and `Usedmem`, the others
1 MiB each), then the case's request as a pod: it binds, or stays pending with the reason HAMi gives
(the kit's words for it, scheduler/plugins/gpushare/fit.py). HAMi's split count is the preset's
(`deviceSplitCount` 10); a case of a card used by as many pods as its count uses that count.
Also the behaviours of HAMi's docs the kit's live tests cover (eleven pods on a card, exclusive
cores). Cases about what the kit does not have are in MISSING, with the reason."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runtimekit.model import Gpu, NodeInventory
from runtimekit.protocol.presets import preset_protocol
from runtimekit.scheduler.framework.conf import DEFAULT_CONF_TEXT
from runtimekit.scheduler.plugins.gpushare.fit import (
    REASON_ALONE,
    REASON_CORE,
    REASON_MEMORY,
    REASON_NO_CORE,
    REASON_NO_GPU,
    REASON_SPLIT,
    REASON_TOO_BIG,
)
from scheduler.live_tables import Outcome, Row
from scheduler.volcano_cases import Case

HAMI = preset_protocol("hami")
SPLIT = HAMI.resources.gpu_replicas
TABLE = "hami/device_fit"


@dataclass(frozen=True)
class Card:
    """One of HAMi's `DeviceUsage` in a test case."""

    used: int = 0
    usedmem: int = 0
    totalmem: int = 128
    usedcores: int = 0
    health: bool = True


def hami_node(name: str, cards: list[Card], model: str = "T4") -> dict[str, Any]:
    inventory = NodeInventory.simulated(name, model, len(cards), cards[0].totalmem)
    gpus = tuple(
        Gpu(g.index, g.uuid, g.model, c.totalmem, c.health) for g, c in zip(inventory.gpus, cards, strict=True)
    )
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {HAMI.labels.gpu_model: model},
            "annotations": {HAMI.annotations.node_devices: NodeInventory(inventory.node, gpus).to_annotation()},
        },
        "spec": {},
        "status": {
            "allocatable": {"cpu": "1000", "memory": "4000Gi", "pods": "1000"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def hami_pod(name: str, limits: Mapping[str, int], annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A pod as HAMi's examples write it: GPU limits, a small CPU request."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {}, "annotations": dict(annotations or {})},
        "spec": {
            "schedulerName": HAMI.scheduler_name,
            "containers": [
                {
                    "name": "main",
                    "resources": {"limits": {k: str(v) for k, v in limits.items()}, "requests": {"cpu": "10m"}},
                }
            ],
        },
    }


def request(nums: int, memreq: int = 0, mem_percent: int = 0, cores: int = 0) -> dict[str, int]:
    """HAMi's ContainerDeviceRequest as pod limits (no memory: the whole card's, as HAMi defaults it)."""
    limits = {"nvidia.com/gpu": nums}
    if memreq:
        limits["nvidia.com/gpumem"] = memreq
    elif mem_percent:
        limits["nvidia.com/gpumem-percentage"] = mem_percent
    if cores:
        limits["nvidia.com/gpucores"] = cores
    return limits


def holders(cards: list[Card]) -> list[dict[str, Any]]:
    """The pods that leave a one-card node as the case's card: the first takes the used memory, the
    last ones the used cores (in parts of at most 50, since a share of all cores takes a card alone
    and a share without cores joins no card whose cores are all used: those come first)."""
    (card,) = cards
    cores = [0] * card.used
    left, k = card.usedcores, card.used - 1
    while left > 0 and k >= 0:
        cores[k] = left if card.used == 1 else min(left, 50)
        left -= cores[k]
        k -= 1
    return [
        hami_pod(f"holder-{k}", request(1, max(card.usedmem, 1) if k == 0 else 1, cores=cores[k]))
        for k in range(card.used)
    ]


@dataclass(frozen=True)
class Probe:
    """The case: a node's cards, the request, and HAMi's verdict ("" binds, else the reason)."""

    name: str
    cards: list[Card]
    limits: dict[str, int]
    reason: str
    notes: str = ""
    extra: list[dict[str, Any]] = field(default_factory=list)


def expect_reason(pod: str, reason: str) -> Any:
    def check(got: Outcome) -> str:
        messages = got.reasons.get(pod, [])
        if any(reason in m for m in messages):
            return ""
        return f"{pod} reads {messages[-1:] or 'nothing'}, expected '{reason}'"

    return check


def row(probe: Probe) -> Row:
    case = Case(probe.name, DEFAULT_CONF_TEXT, nodes=[hami_node("node", probe.cards)], pods=[])
    batches = [holders(probe.cards)] if len(probe.cards) == 1 and probe.cards[0].used else []
    batches.append([hami_pod("probe", probe.limits)])
    expected_binds = {f"default/{p['metadata']['name']}": "node" for p in batches[0]} if len(batches) == 2 else {}
    if not probe.reason:
        expected_binds["default/probe"] = "node"
    return Row(
        TABLE,
        case,
        binds=expected_binds,
        evicted=[],
        protocol=HAMI,
        later=batches,
        check=expect_reason("probe", probe.reason) if probe.reason else None,
    )


PROBES = [
    Probe("fit success", [Card(), Card()], request(1, 64, cores=50), ""),
    Probe("fit fail: memory not enough", [Card()], request(1, 512, cores=50), REASON_TOO_BIG),
    Probe("core not enough", [Card(used=1, totalmem=1024, usedcores=100)], request(1, 512, cores=50), REASON_CORE),
    Probe("fit fail: card overused", [Card(used=SPLIT, totalmem=1280)], request(1, 512, cores=50), REASON_SPLIT),
    Probe("card exclusively", [Card(used=SPLIT // 2, totalmem=1280)], request(1, 512, cores=100), REASON_ALONE),
    Probe(
        "fit fail: CardComputeUnitsExhausted",
        [Card(used=SPLIT // 2, totalmem=1280, usedcores=100)],
        request(1, 512),
        REASON_NO_CORE,
    ),
    Probe(
        "fit fail: AllocatedCardsInsufficientRequest",
        [Card(used=SPLIT // 2, totalmem=1280, usedcores=10)],
        request(2, 512, cores=20),
        REASON_CORE,
    ),
    Probe(
        "fit fail: partial allocation AllocatedCardsInsufficientRequest for multiple cards",
        [Card(totalmem=1280), Card(totalmem=1280)],
        request(3, 512, cores=20),
        REASON_CORE,
    ),
    Probe(
        "memory percentage",
        [Card(used=SPLIT // 2, totalmem=1280, usedcores=10)],
        request(1, mem_percent=10, cores=20),
        "",
    ),
    Probe(
        "fit fail: CardNotHealth",
        [Card(totalmem=1280, health=False)],
        request(1, mem_percent=10, cores=20),
        REASON_NO_GPU,
    ),
    # pkg/scheduler/score_test.go Test_fitInCertainDevice
    Probe(
        "device count less than device used",
        [Card(used=SPLIT, totalmem=8192, usedmem=2048, usedcores=1)],
        request(1, 1024, cores=1),
        REASON_SPLIT,
    ),
    Probe(
        "card insufficient remaining memory",
        [Card(used=1, totalmem=8000, usedmem=8000, usedcores=1)],
        request(1, mem_percent=100, cores=100),
        REASON_MEMORY,
    ),
    Probe(
        "the container wants exclusive access to an entire card, but the card is already in use",
        [Card(used=1, totalmem=8192, usedmem=2048)],
        request(1, 100, cores=100),
        REASON_ALONE,
    ),
    Probe(
        "can't allocate core=0 job to an already full GPU",
        [Card(used=1, totalmem=8192, usedmem=2048, usedcores=100)],
        request(1, 1024),
        REASON_NO_CORE,
    ),
]

# HAMi's cases about what the kit does not have, or has elsewhere: (table, test, cases, reason).
MISSING = [
    (
        TABLE,
        "TestDevices_Fit: card type and UUID selection, quotas",
        8,
        "selector and quota cases: tests/model, test_gpushare_presets.py (not live)",
    ),
    (
        "hami/scheduler",
        "pkg/scheduler/scheduler_test.go (Filter/Bind through HAMi's extender API)",
        1,
        "HAMi's own extender wire format",
    ),
]


def example_rows() -> list[Row]:
    """HAMi's examples/nvidia that choose a card (specify_card_type_to_use.yaml,
    specify_card_type_not_use.yaml, specify_uuid_to_use.yaml) on a node of A100s and one of H200s."""
    nodes = [
        hami_node("a100-node", [Card(totalmem=81920)] * 2, "A100-80GB"),
        hami_node("h200-node", [Card(totalmem=143771)] * 2, "H200"),
    ]
    h200_gpu1 = NodeInventory.simulated("h200-node", "H200", 2).gpus[1].uuid
    limits = request(1, 3000)
    examples = [
        ("specify_card_type_to_use", {"nvidia.com/use-gputype": "A100,V100"}, "a100-node"),
        ("specify_card_type_not_use", {"nvidia.com/nouse-gputype": "A100"}, "h200-node"),
        ("specify_uuid_to_use", {"nvidia.com/use-gpuuuid": f"GPU-x,{h200_gpu1}"}, "h200-node"),
    ]
    return [
        Row(
            "hami/examples",
            Case(name, DEFAULT_CONF_TEXT, nodes=nodes, pods=[]),
            binds={"default/gpu-pod": node},
            evicted=[],
            protocol=HAMI,
            later=[[hami_pod("gpu-pod", limits, annotations)]],
        )
        for name, annotations, node in examples
    ]


def rows() -> list[Row]:
    return [row(p) for p in PROBES] + example_rows()

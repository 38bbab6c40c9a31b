"""A runtime under `rules.memoryScaling` (HAMi's deviceMemoryScaling): each GPU offers its memory times
the factor, so grants up to that much are booked, and with `--isolation hami-core` the container is
told `CUDA_OVERSUBSCRIBE=true`, as HAMi's device plugin (server.go) tells HAMi-core when the factor is
above 1."""

from __future__ import annotations

import pytest
from runtime_helpers import NODE, RuntimeFactory

from runtimekit.api.runtime_client import Share
from runtimekit.base.rpcerrors import Code, ServiceError
from runtimekit.model import simulated_uuid
from runtimekit.protocol import KitProtocol
from runtimekit.protocol.loader import parse_protocol_mapping
from runtimekit.runtime.allocations import PodRef
from runtimekit.runtime.values import AllocateInput

GPU0 = simulated_uuid(NODE, 0)
H200_MIB = 143771


def ask(uid: str, share: tuple[str, int, int]) -> AllocateInput:
    return AllocateInput(PodRef("default", f"pod-{uid}", uid), "main", (Share(*share),))


def scaled(factor: float) -> KitProtocol:
    return parse_protocol_mapping({"rules.memoryScaling": factor}, "test")


def test_a_gpu_offers_and_books_its_scaled_memory(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(protocol=scaled(1.5))
    offered = H200_MIB * 3 // 2
    assert [v.info.memory_mib for v in runtime.devices.snapshot().devices] == [offered, offered]
    runtime.allocate(ask("u1", (GPU0, 500, H200_MIB)))  # all of the card's own memory
    runtime.allocate(ask("u2", (GPU0, 500, offered - H200_MIB)))  # and the rest of what it offers
    with pytest.raises(ServiceError) as exc:
        runtime.allocate(ask("u3", (GPU0, 0, 1)))
    assert exc.value.code is Code.RESOURCE_EXHAUSTED


def test_without_scaling_the_card_offers_its_own_memory(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime()
    with pytest.raises(ServiceError):
        runtime.allocate(ask("u1", (GPU0, 500, H200_MIB + 1)))


@pytest.mark.parametrize(("factor", "told"), [(2.0, True), (1.5, True), (1.0, False), (0.5, False)])
def test_hami_core_is_told_memory_is_oversubscribed(make_runtime: RuntimeFactory, factor: float, told: bool) -> None:
    runtime = make_runtime(isolation="hami-core", protocol=scaled(factor))
    envs = runtime.allocate(ask("u1", (GPU0, 300, 1024))).edits.envs
    assert envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "1024m"
    assert envs.get("CUDA_OVERSUBSCRIBE") == ("true" if told else None)


def test_a_whole_card_is_limited_to_what_it_offers(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(isolation="hami-core", protocol=scaled(2.0))
    envs = runtime.allocate(ask("u1", (GPU0, 1000, 0))).edits.envs
    assert envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == f"{H200_MIB * 2}m"

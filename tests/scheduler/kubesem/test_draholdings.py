"""What allocated claims hold, kept claim by claim (`HoldingsTracker`): after any run of claim
changes it equals a fresh reading of every claim, reads again only the claims whose objects changed,
and leaves the versions it handed out as they were; and the DRA store's catalogs keep the slices'
index across claim changes, so the allocator's selector memo and the UUID index survive a binding."""

from __future__ import annotations

import random
from typing import Any, cast

import pytest

from runtimekit.kube.objects import KubeObject, ResourceClaim, ResourceSlice
from runtimekit.kube.semantics.draalloc import DevicePools
from runtimekit.scheduler.cache import dra as store_kinds
from runtimekit.scheduler.cache.dra import DraStore
from runtimekit.scheduler.kubesem import draholdings
from runtimekit.scheduler.kubesem.draholdings import Holdings, HoldingsTracker

DRIVER = "gpu.runtimekit.aliyun.com"
NODES, GPUS = 4, 2


def gpu(node: int, index: int) -> dict[str, Any]:
    return {
        "name": f"gpu-{index}",
        "attributes": {"uuid": {"string": f"GPU-{node}-{index}"}},
        "capacity": {"core": {"value": "100"}, "memory": {"value": "16Gi"}},
        "allowMultipleAllocations": True,
    }


def node_slice(node: int, generation: int = 1) -> ResourceSlice:
    spec = {
        "driver": DRIVER,
        "nodeName": f"n{node}",
        "pool": {"name": f"n{node}", "generation": generation, "resourceSliceCount": 1},
        "devices": [gpu(node, i) for i in range(GPUS)],
    }
    return cast(ResourceSlice, {"metadata": {"name": f"n{node}"}, "spec": spec})


SLICES = [node_slice(n) for n in range(NODES)]


def result(node: int, index: int, core: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {"request": "gpu", "driver": DRIVER, "pool": f"n{node}", "device": f"gpu-{index}"}
    if core is not None:  # a share; None: the GPU whole
        out["shareID"] = f"share-{node}-{index}-{core}"
        out["consumedCapacity"] = {"core": str(core), "memory": f"{core // 10}Gi"}
    return out


def claim(name: str, *results: dict[str, Any]) -> ResourceClaim:
    body: dict[str, Any] = {"metadata": {"name": name, "namespace": "default"}, "spec": {"devices": {"requests": []}}}
    if results:
        body["status"] = {"allocation": {"devices": {"results": list(results)}}}
    return cast(ResourceClaim, body)


def random_claim(rng: random.Random, name: str) -> ResourceClaim:
    picks = [
        result(rng.randrange(NODES), rng.randrange(GPUS), rng.choice([None, 10, 25, 50]))
        for _ in range(rng.randrange(3))
    ]
    return claim(name, *picks)


def same(a: Holdings, b: Holdings) -> bool:
    return dict(a.in_use.parts) == dict(b.in_use.parts) and {k: sorted(map(repr, v)) for k, v in a.uses.items()} == {
        k: sorted(map(repr, v)) for k, v in b.uses.items()
    }


@pytest.mark.parametrize("seed", range(5))
def test_tracker_equals_a_fresh_reading_after_any_changes(seed: int) -> None:
    rng = random.Random(seed)
    pools = DevicePools(SLICES)
    tracker = HoldingsTracker()
    claims: dict[str, ResourceClaim] = {}
    handed: list[tuple[Holdings, Holdings]] = []
    for _ in range(60):
        name = f"default/c{rng.randrange(12)}"
        if name in claims and rng.random() < 0.3:
            del claims[name]
        else:
            claims[name] = random_claim(rng, name)
        got = tracker.read(dict(claims), pools)
        assert same(got, Holdings.of(dict(claims), pools))
        handed.append((got, Holdings.of(dict(claims), pools)))
    assert any(h.in_use.parts for h, _ in handed)  # the run held devices at some point
    for got, fresh in handed:  # a version handed out earlier is not changed by the later ones
        assert same(got, fresh)


def test_only_changed_claims_are_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[str] = []
    real = draholdings._read

    def counting(claim: ResourceClaim, pools: DevicePools) -> Any:
        read.append(str((claim.get("metadata") or {}).get("name")))
        return real(claim, pools)

    monkeypatch.setattr(draholdings, "_read", counting)
    pools = DevicePools(SLICES)
    tracker = HoldingsTracker()
    claims = {f"default/c{i}": claim(f"c{i}", result(i % NODES, 0, 10)) for i in range(8)}
    first = tracker.read(dict(claims), pools)
    assert len(read) == 8
    read.clear()
    claims["default/c3"] = claim("c3", result(3, 1, None))
    second = tracker.read(dict(claims), pools)
    assert read == ["c3"]
    assert [u.uuid for u in second.uses["GPU-3-1"]] == ["GPU-3-1"]
    assert "GPU-3-1" not in first.uses
    read.clear()
    assert tracker.read(dict(claims), pools) is second  # nothing changed: the same version
    assert read == []
    tracker.read(dict(claims), DevicePools(SLICES))  # new slices: every claim is read against them
    assert len(read) == 8


def test_a_claim_let_go_frees_its_pool() -> None:
    pools = DevicePools(SLICES)
    tracker = HoldingsTracker()
    held = tracker.read({"default/a": claim("a", result(1, 0, None))}, pools)
    assert held.in_use.in_pools([(DRIVER, "n1")]).exclusive == {(DRIVER, "n1", "gpu-0")}
    freed = tracker.read({"default/a": claim("a")}, pools)
    assert freed.in_use.parts == {}
    assert freed.uses == {}
    assert held.in_use.in_pools([(DRIVER, "n1")]).exclusive == {(DRIVER, "n1", "gpu-0")}


def test_store_catalogs_keep_the_slices_index_across_claim_changes() -> None:
    store = DraStore()
    for item in SLICES:
        store.apply(store_kinds.SLICES, "ADDED", cast(KubeObject, item))
    before = store.frozen()
    store.apply(store_kinds.CLAIMS, "ADDED", cast(KubeObject, claim("a", result(0, 1, 25))))
    after = store.frozen()
    assert after is not before
    assert after.pools is before.pools
    assert after.by_uuid is before.by_uuid
    assert [u.milli for u in after.held.uses["GPU-0-1"]] == [250]
    assert before.held.uses == {}
    store.apply(store_kinds.SLICES, "MODIFIED", cast(KubeObject, node_slice(0, generation=2)))
    changed = store.frozen()
    assert changed.pools is not after.pools
    assert [u.milli for u in changed.held.uses["GPU-0-1"]] == [250]  # read again against the new slices

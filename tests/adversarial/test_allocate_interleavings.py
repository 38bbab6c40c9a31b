"""Issue 23 item 3: under any interleaving of creations, bindings, kubelet admissions, deletions and
reconciliations, every container sees exactly its own pod's assignment, and no pod that still exists
is refused. Driven on one node's real parts (`interleavings.py`): kubelet's device manager and
PodResources, the device plugin and the runtime over gRPC unix sockets; each seed is one
interleaving, repeatable. `make test` runs a short fixed set; the slow suite (`make test-slow`, in
CI) runs a thousand, in chunks of 250; RUNTIMEKIT_INTERLEAVINGS=N runs N more from seed 1000."""

from __future__ import annotations

import os

import pytest

from adversarial.interleavings import Outcome, run

CI_SEEDS = 1000
CHUNK = 250  # interleavings per test: each chunk stays well inside the suite's per-test timeout
ON_DEMAND = int(os.environ.get("RUNTIMEKIT_INTERLEAVINGS", "0") or 0)


def chunks(first: int, count: int) -> list[range]:
    return [range(start, min(start + CHUNK, first + count)) for start in range(first, first + count, CHUNK)]


def seeds_id(seeds: range) -> str:
    return f"seeds {seeds.start}-{seeds.stop - 1}"


def check(outcome: Outcome, expected: int) -> None:
    print(
        f"\ninterleavings {outcome.interleavings}, pods {outcome.pods}, admitted {outcome.admitted}, refused as "
        f"deleted {outcome.refused_deleted}, mismatches {len(outcome.mismatches)}, spurious refusals "
        f"{len(outcome.spurious)}, left over {len(outcome.leftovers)}"
    )
    assert outcome.interleavings == expected
    assert outcome.admitted > outcome.interleavings  # the interleavings did admit pods
    assert not outcome.mismatches, "\n".join(outcome.mismatches[:10])
    assert not outcome.spurious, "\n".join(outcome.spurious[:10])
    assert not outcome.leftovers, "\n".join(outcome.leftovers[:10])


def test_a_short_fixed_set_of_interleavings() -> None:
    check(run(range(20)), 20)


@pytest.mark.slow
@pytest.mark.parametrize("seeds", chunks(0, CI_SEEDS), ids=seeds_id)
def test_a_thousand_interleavings(seeds: range) -> None:
    check(run(seeds), len(seeds))


@pytest.mark.slow
@pytest.mark.skipif(not ON_DEMAND, reason="RUNTIMEKIT_INTERLEAVINGS=N runs N more")
@pytest.mark.parametrize("seeds", chunks(CI_SEEDS, ON_DEMAND) or [range(0)], ids=seeds_id)
def test_more_interleavings_on_demand(seeds: range) -> None:
    check(run(seeds), len(seeds))

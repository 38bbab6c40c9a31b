"""The collector settings scheduling runs with: set inside the block, restored after it (even on error),
and set for good by a scheduler process."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from runtimekit.scheduler.collector import SCHEDULING_THRESHOLDS, fewer_collections, tune_process


@pytest.fixture
def thresholds() -> Iterator[tuple[int, int, int]]:
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield gc.get_threshold()
    gc.unfreeze()
    gc.set_threshold(*saved)


def test_fewer_collections_inside_the_block_only(thresholds: tuple[int, int, int]) -> None:
    with fewer_collections():
        assert gc.get_threshold() == SCHEDULING_THRESHOLDS
    assert gc.get_threshold() == thresholds
    with pytest.raises(RuntimeError), fewer_collections():
        raise RuntimeError("a failed replay")
    assert gc.get_threshold() == thresholds


def test_a_scheduler_process_freezes_its_start_up_and_keeps_the_thresholds(thresholds: tuple[int, int, int]) -> None:
    assert SCHEDULING_THRESHOLDS[0] > thresholds[0]
    gc.unfreeze()
    tune_process()
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == SCHEDULING_THRESHOLDS

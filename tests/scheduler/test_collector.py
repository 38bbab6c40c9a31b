"""The collector settings scheduling runs with: set inside the block, restored after it (even on error),
and set for good by a scheduler process."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from runtimekit.scheduler.collector import SCHEDULING_THRESHOLDS, fewer_collections, freeze_once_synced, tune_process


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


def _scanned(obj: object) -> bool:
    """Whether the collector still scans `obj` (frozen objects are in none of its generations)."""
    return any(o is obj for o in gc.get_objects())


class _Listed:
    """A stand-in for `Scheduler.synced`: True once `listed` is set; never, when the scheduler stops first."""

    def __init__(self) -> None:
        self.listed = threading.Event()
        self.give_up = threading.Event()

    def __call__(self, timeout: float | None) -> bool:
        while not self.listed.wait(0.01):
            if self.give_up.is_set():
                return False
        return True


def test_what_the_informers_listed_is_frozen_once_they_have_synced(thresholds: tuple[int, int, int]) -> None:
    gc.unfreeze()
    listed = _Listed()
    thread = freeze_once_synced(listed)
    caches = [[i] for i in range(1000)]  # what the informers list before they are synced
    assert thread.is_alive()  # start-up does not wait for the listing
    assert _scanned(caches)
    listed.listed.set()
    thread.join(5.0)
    assert not thread.is_alive()
    assert not _scanned(caches)
    assert not _scanned(caches[-1])


def test_nothing_is_frozen_when_the_informers_never_sync(thresholds: tuple[int, int, int]) -> None:
    gc.unfreeze()
    listed = _Listed()
    thread = freeze_once_synced(listed)
    caches = [[i] for i in range(10)]
    listed.give_up.set()
    thread.join(5.0)
    assert not thread.is_alive()
    assert gc.get_freeze_count() == 0
    assert _scanned(caches)

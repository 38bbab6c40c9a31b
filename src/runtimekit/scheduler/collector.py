"""CPython's garbage collector, tuned for scheduling.

A scheduler holds millions of long-lived objects in its caches (node tables, FGD's memo of
fragmentation values and node states) and allocates short-lived ones on every decision (tasks,
placements, small arrays). With CPython's default thresholds (700, 10, 10) the collector runs a
young collection every 700 net allocations, and as the caches grow it keeps running full
collections that walk all of them: 10-20 % of the in-process scheduling time at 5,000 nodes
(benchmarks/bench_scheduler_inprocess.py). Almost everything a decision allocates is freed by
reference counting; the collector is only needed for reference cycles, which are rare here.

`SCHEDULING_THRESHOLDS` collects the young generation every 50,000 net allocations and the whole
heap every 100 middle-generation collections (about every 100 million allocations). Callers: the
`runtimekit scheduler` process for its lifetime (`tune_process`, then `freeze_once_synced` for what its
informers list at start: at 5,000 nodes the middle-generation collections walked those caches, about
30 ms each, a dozen per 10,000 pods), trace replay for each run (`fewer_collections`).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

SCHEDULING_THRESHOLDS = (50_000, 20, 100)


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Collect with `SCHEDULING_THRESHOLDS` inside the block; the previous thresholds come back after."""
    previous = gc.get_threshold()
    gc.set_threshold(*SCHEDULING_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*previous)


def tune_process() -> None:
    """For a scheduling process, once its start-up is done: what exists now (modules, configuration)
    is never scanned again (`gc.freeze`), and collections follow `SCHEDULING_THRESHOLDS`."""
    gc.freeze()
    gc.set_threshold(*SCHEDULING_THRESHOLDS)


def freeze_once_synced(synced: Callable[[float | None], bool]) -> threading.Thread:
    """Once `synced(None)` returns True (a scheduler's informers have listed the cluster), what exists
    then, the caches of every node and pod listed included, is never scanned again (`gc.freeze`).
    Runs on a daemon thread so that start-up and the stop signal do not wait for the listing."""

    def freeze() -> None:
        if synced(None):
            gc.freeze()

    thread = threading.Thread(target=freeze, name="gc-freeze-once-synced", daemon=True)
    thread.start()
    return thread

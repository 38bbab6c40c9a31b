from __future__ import annotations

from runtimekit.sim.columns import bucket_columns


def test_a_column_is_the_mean_over_its_events_rounded() -> None:
    # 10 GPUs (10,000 milli). Arrived % rounds to the column; allocation % is rounded to 2 dp first.
    arrived = [40, 60, 140, 1000, 1040, 1990]  # 0.4 % -> 0, 0.6 % -> 1, 1.4 % -> 1, 10 %, 10.4 % -> 10, 19.9 % -> 20
    used = [40, 60, 140, 900, 1000, 1001]
    cols = bucket_columns(arrived, used, total_gpus=10, last=21)
    assert cols["0"] == 0.4
    assert cols["1"] == round((0.6 + 1.4) / 2, 2)
    assert cols["10"] == round((9.0 + 10.0) / 2, 2)
    assert cols["20"] == 10.01


def test_an_empty_column_borrows_its_neighbours_or_stays_empty() -> None:
    cols = bucket_columns([100, 300], [100, 250], total_gpus=10, last=6)
    assert cols["1"] == 1.0
    assert cols["2"] == round((1.0 + 2.5) / 2, 2)  # nothing at 2: mean over columns 1..3
    assert cols["5"] is None

"""Exponential back-off: the delay rule, the cap, jitter bounds, and the count a loop keeps."""

from __future__ import annotations

import pytest

from runtimekit.base.backoff import Backoff


@pytest.mark.parametrize(
    ("attempt", "delay"),
    [
        pytest.param(0, 0.2, id="first"),
        pytest.param(1, 0.4, id="doubles"),
        pytest.param(3, 1.6, id="fourth"),
        pytest.param(5, 5.0, id="capped"),
        pytest.param(5000, 5.0, id="no-overflow"),
    ],
)
def test_delay_grows_by_the_factor_up_to_the_cap(attempt: int, delay: float) -> None:
    assert Backoff(initial=0.2, maximum=5.0).delay(attempt) == pytest.approx(delay)


def test_jitter_spreads_the_delay_within_its_bounds() -> None:
    bounds: list[tuple[float, float]] = []

    def rand(low: float, high: float) -> float:
        bounds.append((low, high))
        return high

    backoff = Backoff(initial=1.0, maximum=30.0, jitter=0.2, rand=rand)
    assert backoff.delay(2) == pytest.approx(4.8)
    assert bounds == [(0.8, 1.2)]


def test_next_counts_and_reset_starts_over() -> None:
    backoff = Backoff(initial=0.1, maximum=2.0)
    assert [backoff.next() for _ in range(6)] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6, 2.0])
    backoff.reset()
    assert backoff.next() == pytest.approx(0.1)


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"initial": 0.0}, id="zero-initial"),
        pytest.param({"initial": 2.0, "maximum": 1.0}, id="cap-below-initial"),
        pytest.param({"factor": 0.5}, id="shrinking"),
        pytest.param({"jitter": 1.0}, id="jitter-to-zero"),
    ],
)
def test_nonsense_settings_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="bad back-off"):
        Backoff(**kwargs)

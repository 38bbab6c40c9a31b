"""RFC 3339 times as Kubernetes writes (metav1.Time, metav1.MicroTime) and reads them."""

from __future__ import annotations

import pytest

from runtimekit.base.timestamps import parse_rfc3339, rfc3339

EPOCH = 1714564800.25  # 2024-05-01T12:00:00.25Z


def test_whole_seconds_and_microseconds() -> None:
    assert rfc3339(EPOCH) == "2024-05-01T12:00:00Z"
    assert rfc3339(EPOCH, micro=True) == "2024-05-01T12:00:00.250000Z"
    assert rfc3339().endswith("Z")


@pytest.mark.parametrize(
    ("text", "epoch"),
    [
        pytest.param("2024-05-01T12:00:00Z", 1714564800.0, id="seconds"),
        pytest.param("2024-05-01T12:00:00.250000Z", EPOCH, id="micro"),
        pytest.param("2024-05-01T14:00:00+02:00", 1714564800.0, id="offset"),
        pytest.param("2024-05-01T12:00:00", 1714564800.0, id="no-offset-is-utc"),
        pytest.param("yesterday", None, id="words"),
        pytest.param("", None, id="empty"),
        pytest.param(None, None, id="none"),
        pytest.param(1714564800, None, id="a-number"),
    ],
)
def test_parse(text: object, epoch: float | None) -> None:
    assert parse_rfc3339(text) == epoch


def test_round_trip() -> None:
    assert parse_rfc3339(rfc3339(EPOCH, micro=True)) == EPOCH

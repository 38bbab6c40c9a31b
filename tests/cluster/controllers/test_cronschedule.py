"""Cron schedules as robfig/cron's standard parser reads them (kube's CronJob controller): the next
run after a time, as a table; and the schedules it refuses."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from runtimekit.cluster.controllers.cronschedule import Schedule, ScheduleError

MONDAY = datetime(2024, 1, 1, 10, 30, tzinfo=UTC)  # a Monday
CASES = [
    ("@hourly", "", datetime(2024, 1, 1, 11, 0)),
    ("@daily", "", datetime(2024, 1, 2, 0, 0)),
    ("@midnight", "", datetime(2024, 1, 2, 0, 0)),
    ("@weekly", "", datetime(2024, 1, 7, 0, 0)),
    ("@monthly", "", datetime(2024, 2, 1, 0, 0)),
    ("@yearly", "", datetime(2025, 1, 1, 0, 0)),
    ("*/15 * * * *", "", datetime(2024, 1, 1, 10, 45)),
    ("30 10 * * *", "", datetime(2024, 1, 2, 10, 30)),  # strictly after
    ("0 9 * * MON-FRI", "", datetime(2024, 1, 2, 9, 0)),
    ("0 0 13 * 5", "", datetime(2024, 1, 5, 0, 0)),  # both day fields restricted: either
    ("0 0 29 2 *", "", datetime(2024, 2, 29, 0, 0)),
    ("5,10 1-3/2 * JAN ?", "", datetime(2024, 1, 2, 1, 5)),
    ("0 9 * * *", "America/New_York", datetime(2024, 1, 1, 14, 0)),
    ("0 9 * * *", "Asia/Tokyo", datetime(2024, 1, 2, 0, 0)),
]


@pytest.mark.parametrize(("text", "tz", "expected"), CASES, ids=[f"{c[0]} {c[1]}".strip() for c in CASES])
def test_next_run(text: str, tz: str, expected: datetime) -> None:
    got = Schedule.parse(text).next_after(MONDAY.timestamp(), tz)
    assert got == expected.replace(tzinfo=UTC).timestamp()


def test_an_impossible_date_has_no_next_run() -> None:
    assert Schedule.parse("0 0 30 2 *").next_after(MONDAY.timestamp()) is None


@pytest.mark.parametrize("text", ["* * * *", "60 * * * *", "* 24 * * *", "* * * 13 *", "*/0 * * * *", "x * * * *"])
def test_refused(text: str) -> None:
    with pytest.raises(ScheduleError):
        Schedule.parse(text)


def test_unknown_time_zone_is_refused() -> None:
    with pytest.raises(ScheduleError):
        Schedule.parse("@daily").next_after(0, "Mars/Olympus")

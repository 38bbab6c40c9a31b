"""Cron schedules as kube's CronJob controller reads them (robfig/cron's standard parser): five
fields (minute hour day-of-month month day-of-week) with `*`, `?`, lists, ranges, `/step` and the
names JAN-DEC and SUN-SAT, or a descriptor (@yearly, @annually, @monthly, @weekly, @daily,
@midnight, @hourly). When both day fields are restricted a day matching either runs (cron's rule).
`Schedule.next_after(t, tz)` is the first run strictly after `t` (Unix seconds) in time zone `tz`
(an IANA name; "" is UTC, as kube-controller-manager's own zone is in the kit). Pure; called by
`cronjobs.CronJobController` and its tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = {
    n: i + 1 for i, n in enumerate(["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"])
}
_DAYS = {n: i for i, n in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}
_SEARCH_YEARS = 5  # robfig/cron gives up after five years without a match (e.g. Feb 30)


class ScheduleError(ValueError):
    """An unparseable schedule, worded as kube's validation words it."""


def _value(text: str, names: dict[str, int]) -> int:
    upper = text.upper()
    if upper in names:
        return names[upper]
    if not text.isdigit():
        raise ScheduleError(f"failed to parse int from {text}")
    return int(text)


def _field(text: str, low: int, high: int, names: dict[str, int]) -> tuple[frozenset[int], bool]:
    """The values a field allows, and whether it was a star (`*` or `?`)."""
    values: set[int] = set()
    star = False
    for part in text.split(","):
        span, _, step_text = part.partition("/")
        step = _value(step_text, {}) if step_text else 1
        if step < 1:
            raise ScheduleError(f"step of range should be a positive number: {part}")
        if span in ("*", "?"):
            start, end, star = low, high, star or not step_text
        elif "-" in span:
            first, _, last = span.partition("-")
            start, end = _value(first, names), _value(last, names)
        else:
            start = _value(span, names)
            end = high if step_text else start
        if start < low or end > high or start > end:
            raise ScheduleError(f"end of range ({end}) above maximum ({high}): {part}")
        values.update(range(start, end + 1, step))
    return frozenset(values), star


@dataclass(frozen=True)
class Schedule:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    any_day: bool  # day of month was a star
    any_weekday: bool

    @classmethod
    def parse(cls, text: str) -> Schedule:
        spec = DESCRIPTORS.get(text.strip(), text.strip())
        fields = spec.split()
        if len(fields) != 5:
            raise ScheduleError(f"expected exactly 5 fields, found {len(fields)}: {text}")
        minutes, _ = _field(fields[0], 0, 59, {})
        hours, _ = _field(fields[1], 0, 23, {})
        days, any_day = _field(fields[2], 1, 31, {})
        months, _ = _field(fields[3], 1, 12, _MONTHS)
        weekdays, any_weekday = _field(fields[4], 0, 6, _DAYS)
        return cls(minutes, hours, days, months, weekdays, any_day, any_weekday)

    def _day_matches(self, t: datetime) -> bool:
        dom, dow = t.day in self.days, (t.weekday() + 1) % 7 in self.weekdays
        if self.any_day or self.any_weekday:
            return dom and dow
        return dom or dow

    def next_after(self, after: float, tz: str = "") -> float | None:
        """The first run strictly after `after` (Unix seconds), None when none comes within five years."""
        zone = _zone(tz)
        t = datetime.fromtimestamp(after, zone).replace(second=0, microsecond=0, tzinfo=None) + timedelta(minutes=1)
        limit = t.year + _SEARCH_YEARS
        while t.year <= limit:
            if t.month not in self.months:
                t = (t.replace(day=1, hour=0, minute=0) + timedelta(days=32)).replace(day=1)
            elif not self._day_matches(t):
                t = t.replace(hour=0, minute=0) + timedelta(days=1)
            elif t.hour not in self.hours:
                t = t.replace(minute=0) + timedelta(hours=1)
            elif t.minute not in self.minutes:
                t += timedelta(minutes=1)
            else:
                return t.replace(tzinfo=zone).timestamp()
        return None


def _zone(tz: str) -> tzinfo:
    if not tz:
        return UTC
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(f"unknown time zone {tz}") from None

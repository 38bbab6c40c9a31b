"""RFC 3339 times as Kubernetes writes them: UTC with a `Z`, whole seconds for `metav1.Time`
(`2024-05-01T12:00:00Z`), microseconds for `metav1.MicroTime` (leases, events.k8s.io). Parsing
takes any RFC 3339 / ISO 8601 form with an offset and answers None for what it cannot read, so
callers decide what an unreadable time means.
Callers: the kube layer (events, leases, bindings), the embedded cluster, the controller, the
device plugin.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

_SECONDS = "%Y-%m-%dT%H:%M:%SZ"
_MICROSECONDS = "%Y-%m-%dT%H:%M:%S.%fZ"


def rfc3339(epoch_s: float | None = None, *, micro: bool = False) -> str:
    """`epoch_s` (default: now) as `metav1.Time`, or as `metav1.MicroTime` with `micro`."""
    when = time.time() if epoch_s is None else epoch_s
    if micro:
        return datetime.fromtimestamp(when, UTC).strftime(_MICROSECONDS)
    global _last
    second = int(when // 1)
    last = _last  # one read: another thread may replace it meanwhile
    if last[0] != second:  # an API server stamps thousands of objects within one second
        last = _last = (second, time.strftime(_SECONDS, time.gmtime(second)))
    return last[1]


_last: tuple[int, str] = (0, time.strftime(_SECONDS, time.gmtime(0)))


def parse_rfc3339(text: object) -> float | None:
    """Seconds since the epoch of an RFC 3339 time (`Z` or an offset; fractions kept); None when
    `text` is not a string or not such a time. A time without an offset is read as UTC."""
    if not isinstance(text, str) or not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()

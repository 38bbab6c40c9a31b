"""`objects.timestamp`: an RFC 3339 time as seconds since the epoch (0 for a missing or unreadable
one), each text parsed once: a new pod's creationTimestamp is read by its task and by the Watched
metric, and a burst of pods shares a few."""

from __future__ import annotations

import pytest

from runtimekit.base.timestamps import parse_rfc3339
from runtimekit.scheduler.cache import objects

TEXTS: list[object] = [
    "2026-12-05T11:44:22Z",
    "2026-12-05T11:44:22.250Z",
    "2026-12-05T12:44:22+01:00",
    "2026-12-05T11:44:22",
    "",
    "yesterday",
    None,
    17,
]


def test_it_reads_as_parse_rfc3339_and_each_text_once(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[object] = []

    def counted(text: object) -> float | None:
        parsed.append(text)
        return parse_rfc3339(text)

    monkeypatch.setattr(objects, "parse_rfc3339", counted)
    monkeypatch.setattr(objects, "_TIMES", {})
    for _ in range(3):
        assert [objects.timestamp(t) for t in TEXTS] == [parse_rfc3339(t) or 0.0 for t in TEXTS]
    texts = [t for t in TEXTS if isinstance(t, str)]
    assert sorted(map(str, [t for t in parsed if isinstance(t, str)])) == sorted(texts)
    assert objects.timestamp("2026-12-05T11:44:22Z") == 1796471062.0

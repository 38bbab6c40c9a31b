"""The checkpoint and switch files: atomic writes, round trips, and corruption that is detected, not read as empty."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtimekit.base.files import write_atomic
from runtimekit.runtime.allocations import Allocation, Grant, PodRef
from runtimekit.runtime.state import (
    CheckpointCorrupt,
    ConfigState,
    StateDir,
    decode_checkpoint,
    encode_checkpoint,
)

ALLOCATIONS = [
    Allocation(PodRef("ns", "a", "uid-a"), "main", (Grant("GPU-1", 1, 500, 1024),), 1000, ("GPU-1::3",), ("r/core",)),
    Allocation(PodRef("ns", "b", "uid-b"), "c", (Grant("MIG-9", 0, 0, 0, "GPU-0"),), 2000),
]


def test_round_trip() -> None:
    assert decode_checkpoint(encode_checkpoint("n1", ALLOCATIONS)) == ("n1", ALLOCATIONS)
    assert decode_checkpoint(encode_checkpoint('n"2', [])) == ('n"2', [])


def test_body_is_canonical_json() -> None:
    doc = json.loads(encode_checkpoint("n1", ALLOCATIONS))
    assert (
        json.dumps(doc["data"], sort_keys=True, separators=(",", ":")) in encode_checkpoint("n1", ALLOCATIONS).decode()
    )


def _edit(raw: bytes) -> bytes:
    doc = json.loads(raw)
    doc["data"]["allocations"][0]["grants"][0]["coreMilli"] = 100
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        pytest.param(lambda raw: raw[: len(raw) // 2], "not JSON", id="truncated"),
        pytest.param(lambda raw: b"", "not JSON", id="empty"),
        pytest.param(lambda raw: b"\xff\xfe", "not JSON", id="binary"),
        pytest.param(lambda raw: b"[]", "not a RuntimeCheckpoint", id="wrong-shape"),
        pytest.param(_edit, "checksum mismatch", id="edited"),
        pytest.param(lambda raw: raw.replace(b'"version":2', b'"version":9'), "unsupported version", id="version"),
    ],
)
def test_damage_is_detected(damage: object, reason: str) -> None:
    raw = damage(encode_checkpoint("n1", ALLOCATIONS))  # type: ignore[operator]
    with pytest.raises(CheckpointCorrupt, match=reason):
        decode_checkpoint(raw)


def test_state_dir(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    assert state.load_allocations() is None
    assert state.load_config() == ConfigState(True, "", 0)
    state.save_allocations("n1", ALLOCATIONS)
    state.save_config(ConfigState(False, "drain", 5))
    assert state.load_allocations() == ("n1", ALLOCATIONS)
    assert state.load_config() == ConfigState(False, "drain", 5)
    aside = state.set_aside_checkpoint(77)
    assert aside.name == "checkpoint.json.corrupt-77"
    assert state.load_allocations() is None
    state.config.write_text("{")
    with pytest.raises(CheckpointCorrupt):
        state.load_config()


# -- the journal ---------------------------------------------------------------------------------
A, B = ALLOCATIONS
C = Allocation(PodRef("ns", "c", "uid-c"), "main", (Grant("GPU-2", 2, 250, 512),), 3000)


def _checkpoint_allocations(state: StateDir) -> list[Allocation]:
    return decode_checkpoint(state.checkpoint.read_bytes())[1]


def test_changes_after_the_first_go_to_the_journal_and_come_back(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    state.save_allocations("n1", [A])  # first save: the checkpoint is written whole
    state.save_allocations("n1", [A, B])
    state.save_allocations("n1", [B, C])  # A removed, C added: two lines
    state.save_allocations("n1", [B, C])  # nothing changed: nothing written
    assert _checkpoint_allocations(state) == [A]
    assert len(state.journal.read_bytes().splitlines()) == 3
    loaded = StateDir(tmp_path).load_allocations()  # as after a crash
    assert loaded is not None
    assert sorted(loaded[1], key=lambda a: a.pod.uid) == [B, C]


def test_close_folds_the_journal_into_the_checkpoint(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    state.save_allocations("n1", [A])
    state.save_allocations("n1", [A, C])
    state.close()  # a runtime stopped cleanly leaves one file, so an older runtime rolled back to misses nothing
    assert _checkpoint_allocations(state) == [A, C]
    assert state.journal.read_bytes() == b""


def test_a_checkpoint_written_before_the_journal_is_read(tmp_path: Path) -> None:
    body = json.dumps({"allocations": [], "node": "n1"}, sort_keys=True, separators=(",", ":"))
    from runtimekit.runtime.state import _checksum

    doc = f'{{"kind":"RuntimeCheckpoint","version":1,"checksum":"{_checksum(body)}","data":{body}}}'
    (tmp_path / "checkpoint.json").write_text(doc)
    assert StateDir(tmp_path).load_allocations() == ("n1", [])
    assert json.loads(encode_checkpoint("n1", []))["version"] == 2  # what an older runtime refuses and rebuilds


def test_the_checkpoint_is_rewritten_and_the_journal_emptied_every_so_often(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("runtimekit.runtime.state.COMPACT_EVERY", 2)
    state = StateDir(tmp_path)
    state.save_allocations("n1", [])
    state.save_allocations("n1", [A])
    state.save_allocations("n1", [A, B])  # the journal holds 2 lines now
    state.save_allocations("n1", [B])  # so this one rewrites the checkpoint
    assert _checkpoint_allocations(state) == [B]
    assert state.journal.read_bytes() == b""
    assert StateDir(tmp_path).load_allocations() == ("n1", [B])


def test_a_start_rewrites_the_checkpoint_on_the_first_change(tmp_path: Path) -> None:
    first = StateDir(tmp_path)
    first.save_allocations("n1", [A])
    first.save_allocations("n1", [A, B])  # a crash: the change is in the journal only
    assert _checkpoint_allocations(first) == [A]
    second = StateDir(tmp_path)
    assert second.load_allocations() == ("n1", [A, B])
    second.save_allocations("n1", [A, B, C])
    assert _checkpoint_allocations(second) == [A, B, C]
    assert second.journal.read_bytes() == b""


def test_an_incomplete_last_line_is_ignored(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    state.save_allocations("n1", [A])
    state.save_allocations("n1", [A, B])  # then the runtime crashes: no close
    with state.journal.open("ab") as journal:  # a crash in the middle of writing the next change
        journal.write(state.journal.read_bytes()[:30])
    assert StateDir(tmp_path).load_allocations() == ("n1", [A, B])


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        pytest.param(lambda raw: raw.replace(b"uid-b", b"uid-x"), "journal line 1: checksum mismatch", id="edited"),
        pytest.param(lambda raw: b"\n" + raw, "journal line 1: checksum mismatch", id="blank-line"),
        pytest.param(lambda raw: raw[5:], "journal line 1: checksum mismatch", id="cut-at-the-start"),
    ],
)
def test_a_damaged_journal_is_detected(tmp_path: Path, damage: object, reason: str) -> None:
    state = StateDir(tmp_path)
    state.save_allocations("n1", [A])
    state.save_allocations("n1", [A, B])
    state.journal.write_bytes(damage(state.journal.read_bytes()))  # type: ignore[operator]
    with pytest.raises(CheckpointCorrupt, match=reason):
        StateDir(tmp_path).load_allocations()


def test_journal_lines_the_checkpoint_already_holds_are_skipped(tmp_path: Path) -> None:
    from runtimekit.runtime.state import journal_line

    state = StateDir(tmp_path)
    write_atomic(state.checkpoint, encode_checkpoint("n1", [A], seq=5))
    state.journal.write_text(journal_line(4, ("uid-a", "main"), None) + journal_line(6, ("uid-b", "c"), None))
    assert state.load_allocations() == ("n1", [A])


def test_a_journal_without_its_checkpoint_is_corrupt_and_set_aside_with_it(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    state.save_allocations("n1", [A])
    state.save_allocations("n1", [A, B])
    state.checkpoint.unlink()
    with pytest.raises(CheckpointCorrupt, match="checkpoint.journal without checkpoint.json"):
        state.load_allocations()
    state.set_aside_checkpoint(9)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.journal.corrupt-9"]
    assert state.load_allocations() is None


def save_with_failing_sync(
    state: StateDir, allocations: list[Allocation], monkeypatch: pytest.MonkeyPatch, message: str
) -> None:
    """Save while fdatasync fails with `message` (the line may reach the file); the save must raise it."""

    def broken(fd: int) -> None:
        raise OSError(message)

    with monkeypatch.context() as patch:
        patch.setattr("runtimekit.runtime.state.os.fdatasync", broken)
        with pytest.raises(OSError, match=message):
            state.save_allocations("n1", allocations)


def test_a_failed_journal_write_is_followed_by_a_whole_rewrite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = StateDir(tmp_path)
    state.save_allocations("n1", [A])
    save_with_failing_sync(state, [A, B], monkeypatch, "disk gone")
    state.save_allocations("n1", [A, C])  # what the caller holds after giving B back
    assert _checkpoint_allocations(state) == [A, C]
    assert state.journal.read_bytes() == b""
    assert StateDir(tmp_path).load_allocations() == ("n1", [A, C])


def test_a_line_that_reached_the_disk_before_its_write_failed_is_not_replayed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = StateDir(tmp_path)
    state.save_allocations("n1", [A])
    save_with_failing_sync(state, [A, B], monkeypatch, "gone")  # the line for B is in the file, unacknowledged
    stale = state.journal.read_bytes()
    state.save_allocations("n1", [A])  # B was given back: the whole checkpoint is rewritten
    state.journal.write_bytes(stale)  # as if the runtime died before emptying the journal
    assert StateDir(tmp_path).load_allocations() == ("n1", [A])

"""The checkpoint and switch files: atomic writes, round trips, and corruption that is detected, not read as empty."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtimekit.runtime.allocations import Allocation, Grant, PodRef
from runtimekit.runtime.state import (
    CheckpointCorrupt,
    ConfigState,
    StateDir,
    decode_checkpoint,
    encode_checkpoint,
    write_atomic,
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
        pytest.param(lambda raw: raw.replace(b'"version":1', b'"version":9'), "unsupported version", id="version"),
    ],
)
def test_damage_is_detected(damage: object, reason: str) -> None:
    raw = damage(encode_checkpoint("n1", ALLOCATIONS))  # type: ignore[operator]
    with pytest.raises(CheckpointCorrupt, match=reason):
        decode_checkpoint(raw)


def test_write_atomic_replaces_and_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "file.json"
    write_atomic(target, b"one")
    write_atomic(target, b"two")
    assert target.read_bytes() == b"two"
    assert sorted(p.name for p in target.parent.iterdir()) == ["file.json"]


def test_write_atomic_keeps_the_old_file_when_writing_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "file.json"
    write_atomic(target, b"old")

    def broken_fsync(fd: int) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr("runtimekit.runtime.state.os.fsync", broken_fsync)
    with pytest.raises(OSError, match="disk gone"):
        write_atomic(target, b"new")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.json"]


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

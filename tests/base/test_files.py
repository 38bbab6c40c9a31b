"""Atomic replacement: the new content or the old one, never a partial file or a leftover."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtimekit.base.files import replacing, write_atomic


@pytest.mark.parametrize("durable", [True, False], ids=["durable", "fast"])
def test_write_replaces_the_whole_file(tmp_path: Path, durable: bool) -> None:
    target = tmp_path / "deep" / "state.json"
    write_atomic(target, "old", durable=durable)
    write_atomic(target, b"new", durable=durable)
    assert target.read_bytes() == b"new"
    assert sorted(p.name for p in target.parent.iterdir()) == ["state.json"]


def test_a_failing_flush_to_disk_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "file.json"
    write_atomic(target, b"old")

    def broken_fsync(fd: int) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr("runtimekit.base.files.os.fsync", broken_fsync)
    with pytest.raises(OSError, match="disk gone"):
        write_atomic(target, b"new")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.json"]


def test_a_failure_inside_the_block_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "plot.png"
    target.write_text("old")

    def render() -> None:
        with replacing(target, suffix=".png") as tmp:
            tmp.write_text("half")
            raise RuntimeError("renderer broke")

    with pytest.raises(RuntimeError, match="renderer"):
        render()
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["plot.png"]


def test_the_temporary_file_is_beside_the_target(tmp_path: Path) -> None:
    target = tmp_path / "report.csv"
    with replacing(target, suffix=".csv") as tmp:
        assert tmp.parent == tmp_path
        assert tmp.suffix == ".csv"
        tmp.write_text("a,b\n")
    assert target.read_text() == "a,b\n"

"""The key ring: signatures name their key, the previous key still verifies, a changed folder is read
again, and a ring without a usable key cannot be made."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtimekit.base.keyring import KeyRing, KeyRingError, ensure_key_folder

A, B = b"a" * 32, b"b" * 40


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_signature_names_its_key_and_verifies_with_that_key_only() -> None:
    ring = KeyRing.from_secrets(A)
    signature = ring.sign(b"message")
    scheme, key_id, mac = signature.split(".")
    assert (scheme, key_id, len(mac)) == ("v1", ring.key_ids[0], 64)
    assert ring.verify(b"message", signature) == ""
    assert ring.verify(b"other message", signature) == f"signature does not match (key {key_id})"
    assert "neither the current nor the previous key" in KeyRing.from_secrets(B).verify(b"message", signature)


@pytest.mark.parametrize(
    "signature", ["", "v1", "v1.abc", "v2.abc.def", "garbage"], ids=["empty", "scheme", "no mac", "v2", "garbage"]
)
def test_malformed_signatures_are_refused_with_a_reason(signature: str) -> None:
    assert KeyRing.from_secrets(A).verify(b"m", signature).startswith("malformed signature")


def test_the_previous_key_verifies_but_never_signs() -> None:
    old = KeyRing.from_secrets(A).sign(b"m")
    rotated = KeyRing.from_secrets(B, A)
    assert rotated.verify(b"m", old) == ""
    assert rotated.sign(b"m").split(".")[1] == KeyRing.from_secrets(B).key_ids[0]


@pytest.mark.parametrize(
    ("files", "problem"),
    [
        pytest.param({}, "no key file", id="no current"),
        pytest.param({"current": b"short\n"}, "is 5 bytes long; a key needs at least 32", id="too short"),
        pytest.param({"current": A, "previous": b"x"}, "is 1 bytes long", id="previous too short"),
    ],
)
def test_a_folder_without_a_usable_key_is_refused(tmp_path: Path, files: dict[str, bytes], problem: str) -> None:
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    with pytest.raises(KeyRingError, match=problem):
        KeyRing.from_folder(tmp_path)


def test_a_changed_folder_is_read_again_and_an_unreadable_one_keeps_the_keys(tmp_path: Path) -> None:
    (tmp_path / "current").write_bytes(A + b"\n")  # surrounding whitespace is not part of the key
    clock = Clock()
    ring = KeyRing.from_folder(tmp_path, reload_s=1.0, clock=clock)
    first = ring.key_ids
    (tmp_path / "current").write_bytes(B)
    assert ring.key_ids == first  # not looked at again before reload_s
    clock.now = 2.0
    assert ring.key_ids == KeyRing.from_secrets(B).key_ids
    assert ring.generation == 1
    (tmp_path / "current").write_bytes(b"x")  # a bad edit: the last good keys stay
    clock.now = 4.0
    assert ring.key_ids == KeyRing.from_secrets(B).key_ids


def test_ensure_key_folder_makes_a_private_key_once(tmp_path: Path) -> None:
    folder = ensure_key_folder(tmp_path / "keys")
    key = (folder / "current").read_bytes()
    assert len(key.strip()) >= 32
    assert os.stat(folder / "current").st_mode & 0o777 == 0o600
    ensure_key_folder(folder)
    assert (folder / "current").read_bytes() == key
    assert KeyRing.from_folder(folder).key_ids

"""The key ring: signatures name their key, the previous and the next key verify but never sign, every
two neighbouring states of a rotation accept each other's signatures, a changed folder (a plain one or
a Secret volume) is read again, and a ring without a usable key cannot be made."""

from __future__ import annotations

import itertools
import os
import threading
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from fixtures.secretvolume import SecretVolume
from runtimekit.base import keyring as keyring_module
from runtimekit.base.keyring import Key, KeyRing, KeyRingError, ensure_key_folder

A, B, C = b"a" * 32, b"b" * 40, b"c" * 36


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
    refused = KeyRing.from_secrets(B).verify(b"message", signature)
    assert refused == f"signed with key {key_id}, which is not one of the keys held (current {Key.of(B).id})"


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


def test_the_next_key_verifies_but_never_signs() -> None:
    staged = KeyRing.from_secrets(A, next_=B)
    assert staged.sign(b"m").split(".")[1] == Key.of(A).id
    assert staged.verify(b"m", KeyRing.from_secrets(B).sign(b"m")) == ""
    assert staged.key_ids == (Key.of(A).id, Key.of(B).id)


# The states of the Secret through two rotations (docs/security.md#rotation): stage, promote, retire;
# or stage again while the last key is still `previous` (retiring is optional).
STATES = {
    "initial": {"current": A},
    "staged": {"current": A, "next": B},
    "promoted": {"current": B, "previous": A},
    "retired": {"current": B},
    "staged again": {"current": B, "next": C},
    "promoted again": {"current": C, "previous": B},
    "staged, not retired": {"current": B, "previous": A, "next": C},
}
ROTATIONS = (
    ("initial", "staged", "promoted", "retired", "staged again", "promoted again"),
    ("promoted", "staged, not retired", "promoted again"),
)
STEPS = [step for rotation in ROTATIONS for step in itertools.pairwise(rotation)]


def ring_of(files: dict[str, bytes]) -> KeyRing:
    return KeyRing.from_secrets(files["current"], files.get("previous"), files.get("next"))


@pytest.mark.parametrize(
    ("signer", "verifier"),
    STEPS + [(after, before) for before, after in STEPS],
    ids=lambda state: state,
)
def test_neighbouring_states_of_a_rotation_accept_each_others_signatures(signer: str, verifier: str) -> None:
    """The signer (scheduler) and a verifier (device plugin) see the Secret at different times: one of
    them a step ahead of the other, either way round, never fails a signature."""
    signature = ring_of(STATES[signer]).sign(b"an assignment")
    assert ring_of(STATES[verifier]).verify(b"an assignment", signature) == ""


@pytest.mark.parametrize(
    ("signer", "verifier"),
    [
        pytest.param({"current": B, "previous": A}, {"current": A}, id="the new key signs before verifiers hold it"),
        pytest.param({"current": A}, {"current": B}, id="the old key signs after verifiers dropped it"),
    ],
)
def test_a_signer_ahead_of_what_a_verifier_holds_is_refused(
    signer: dict[str, bytes], verifier: dict[str, bytes]
) -> None:
    """Why the new key is staged first: promoting in one step (the procedure of earlier releases) fails
    every pod a lagging device plugin admits."""
    signature = ring_of(signer).sign(b"m")
    assert "which is not one of the keys held" in ring_of(verifier).verify(b"m", signature)


def test_a_secret_volume_is_read_whole_through_its_data_link(tmp_path: Path) -> None:
    """kubelet swaps `..data` first and makes the link of a new key after it: between the two, the ring
    already holds the whole new version (`previous` included), not half of it."""
    volume = SecretVolume(tmp_path / "mount")
    volume.write({"current": A, "next": B})
    clock = Clock()
    ring = KeyRing.from_folder(volume.folder, reload_s=1.0, clock=clock)
    old_signature = ring.sign(b"m")
    finish = volume.swap({"current": B, "previous": A})  # promoted: no `previous` link yet, `next` dangles
    clock.now = 2.0
    assert ring.keys.describe() == f"current {Key.of(B).id}, previous {Key.of(A).id}"
    assert ring.verify(b"m", old_signature) == ""
    finish()
    clock.now = 4.0
    assert ring.keys.describe() == f"current {Key.of(B).id}, previous {Key.of(A).id}"
    assert ring.generation == 1
    assert sorted(p.name for p in volume.folder.iterdir() if not p.name.startswith("..")) == ["current", "previous"]


def test_a_signature_by_a_key_not_held_makes_the_ring_look_at_its_folder_at_once(tmp_path: Path) -> None:
    (tmp_path / "current").write_bytes(A)
    clock = Clock()
    ring = KeyRing.from_folder(tmp_path, reload_s=60.0, clock=clock)
    (tmp_path / "next").write_bytes(B)  # staged just now, long before the next periodic look
    assert ring.verify(b"m", KeyRing.from_secrets(B).sign(b"m")) == ""
    assert ring.generation == 1
    assert "which is not one of the keys held" in ring.verify(b"m", KeyRing.from_secrets(C).sign(b"m"))


def test_the_generation_follows_the_folder_without_another_call(tmp_path: Path) -> None:
    """Callers key cached verdicts on the generation: asking for it looks at the folder (at most every
    reload_s), so a verdict cached under old keys is not served after the keys changed."""
    (tmp_path / "current").write_bytes(A)
    clock = Clock()
    ring = KeyRing.from_folder(tmp_path, reload_s=1.0, clock=clock)
    (tmp_path / "next").write_bytes(B)
    assert ring.generation == 0
    clock.now = 1.0
    assert ring.generation == 1


def test_a_caller_during_a_reload_gets_the_new_keys(tmp_path: Path) -> None:
    """While one thread reads a changed folder, another that asks for the keys waits for that read; it is
    not handed the old keys because the look has begun."""
    (tmp_path / "current").write_bytes(A)
    clock = Clock()
    ring = KeyRing.from_folder(tmp_path, reload_s=1.0, clock=clock)
    (tmp_path / "current").write_bytes(B)
    clock.now = 2.0
    reading, release = threading.Event(), threading.Event()
    real_read = keyring_module._read_folder

    def slow_read(folder: Path, source: Path) -> Any:
        reading.set()
        release.wait(5)
        return real_read(folder, source)

    seen: list[str] = []
    with mock.patch.object(keyring_module, "_read_folder", slow_read):
        first = threading.Thread(target=lambda: seen.append(ring.sign(b"m").split(".")[1]))
        first.start()
        assert reading.wait(5)
        second = threading.Thread(target=lambda: seen.append(ring.sign(b"m").split(".")[1]))
        second.start()
        second.join(0.2)
        release.set()
        first.join(5)
        second.join(5)
    assert seen == [Key.of(B).id, Key.of(B).id]

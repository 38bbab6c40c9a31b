"""Issue 33 item 1: the scheduler books a bound pod's GPUs only from an assignment that is its own
(signed over the pod's UID and the text) and equals the pod's requests; anything else is ignored
for booking, said once per pod and annotation text in a Warning Event, and counted by reason."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest

from runtimekit.base.keyring import KeyRing, ensure_key_folder
from runtimekit.model import Assignment, GpuShare, NodeInventory, NodeName
from runtimekit.model.authority import sign_assignment
from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.cache.authority import EVENT_REASON
from runtimekit.scheduler.cache.live import LiveCache, live_cache
from runtimekit.scheduler.framework import BuildContext, Framework, load_conf
from scheduler.fake_api import FakeApi, P, node_object, pod_object

GPU, CORE, MEM = P.resources.gpu, P.resources.core, P.resources.memory
NODE = "n1"
GPUS = 4
KEYS = KeyRing.from_secrets(b"the scheduler's key, thirty-two bytes or more")
OTHER_KEYS = KeyRing.from_secrets(b"a key the scheduler never held, also long enough")
T4_MIB = 16384


class CountingRing(KeyRing):
    """The scheduler's key ring, counting the signatures it checks."""

    checked = 0

    def verify(self, message: bytes, signature: str) -> str:
        self.checked += 1
        return super().verify(message, signature)


def make(api: FakeApi, keys: KeyRing | None = KEYS) -> LiveCache:
    live = live_cache(P, P.scheduler_name, api, bind_workers=1, retry_seconds=0.0, signer=keys, keys=keys)
    api.attach(live.cache, live.on_pod)
    for node in api.nodes.values():
        live.cache.on_node("ADDED", node)
    for pod in api.pods.values():
        live.on_pod("ADDED", pod)
    return live


def whole(*gpus: int, node: str = NODE) -> str:
    inventory = NodeInventory.simulated(node, "T4", GPUS, T4_MIB)
    shares = tuple(GpuShare(inventory.gpus[g].uuid, g, 1000, T4_MIB) for g in gpus)
    return Assignment(NodeName(node), {"main": shares}).to_annotation()


def bound(name: str, limits: dict[str, Any], text: str | None = None, signature: str = "") -> dict[str, Any]:
    """A pod its author bound to NODE (`spec.nodeName`), with an assignment of its own."""
    pod = pod_object(name, limits, cpu="100m")
    pod["spec"]["nodeName"] = NODE
    if text is not None:
        pod["metadata"]["annotations"][P.annotations.assignment] = text
    if signature:
        pod["metadata"]["annotations"][P.annotations.assignment_signature] = signature
    return pod


def signed(name: str, limits: dict[str, Any], text: str, keys: KeyRing = KEYS) -> dict[str, Any]:
    pod = bound(name, limits, text)
    pod["metadata"]["annotations"][P.annotations.assignment_signature] = sign_assignment(
        keys, pod["metadata"]["uid"], text
    )
    return pod


def free_whole(live: LiveCache) -> int:
    return sum(1 for milli, _ in live.cache.ledger.table.free_gpus(NodeName(NODE)) if milli == 1000)


def gpus_of(live: LiveCache, name: str) -> list[int]:
    """The GPUs the pod is booked on (it must be booked)."""
    booking = live.cache.ledger.booking(live.cache.uid_of[f"default/{name}"])
    assert booking is not None, name
    return [slot.gpu for slot in booking.slots]


def warned(api: FakeApi, name: str) -> list[str]:
    return [message for pod, reason, message in api.events if pod == name and reason == EVENT_REASON]


@pytest.fixture
def api() -> FakeApi:
    fake = FakeApi()
    fake.add_node(node_object(NODE, gpus=GPUS))
    return fake


def test_a_squatter_claiming_every_gpu_books_none_and_one_gpu_pods_still_fit(api: FakeApi) -> None:
    live = make(api)
    api.add_pod(bound("squatter", {}, whole(*range(GPUS))))
    assert free_whole(live) == GPUS
    assert gpus_of(live, "squatter") == []
    assert live.cache.ledger.table.cpu_free[0] == 32000 - 100  # its CPU is held
    framework = Framework(load_conf(None), builtin_registry(), BuildContext(protocol=P))
    for i in range(GPUS):
        api.add_pod(pod_object(f"one-{i}", {GPU: 1}))
    for _ in range(2):
        framework.run_once(live)
        assert live.binder.drain()
    assert all(api.pods[f"default/one-{i}"]["spec"].get("nodeName") == NODE for i in range(GPUS))
    assert free_whole(live) == 0
    (message,) = warned(api, "squatter")  # written by the session, once
    assert "not signed by the scheduler" in message
    assert live.cache.authority.ignored["unsigned"] == 1


def test_the_verdict_is_made_once_per_pod_and_text(api: FakeApi) -> None:
    keys = CountingRing.from_secrets(b"the scheduler's key, thirty-two bytes or more")
    assert isinstance(keys, CountingRing)
    live = make(api, keys)
    pod = bound("squatter", {}, whole(0, 1))
    api.add_pod(pod)
    for _ in range(5):  # status updates, a label: the same annotation
        pod = copy.deepcopy(pod)
        pod["metadata"].setdefault("labels", {})["x"] = "y"
        live.on_pod("MODIFIED", pod)
    live.write_notices()
    assert keys.checked == 0  # unsigned: there was nothing to check
    assert len(warned(api, "squatter")) == 1
    pod = copy.deepcopy(pod)
    pod["metadata"]["annotations"][P.annotations.assignment_signature] = "v1.0123456789abcdef.00"
    for _ in range(5):
        live.on_pod("MODIFIED", pod)
    live.write_notices()
    assert keys.checked == 1  # each new text (or signature) is checked once
    assert len(warned(api, "squatter")) == 2
    assert live.cache.authority.ignored == {
        "unreadable": 0,
        "other_node": 0,
        "unsigned": 1,
        "signature": 1,
        "requests": 0,
    }
    api.delete_pod("default/squatter")
    assert live.cache.authority._judged == {}  # forgotten with the pod


def holder_and(api: FakeApi, how: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A pod legitimately holding GPU 0, and a hostile one written `how`."""
    holder = signed("holder", {GPU: 1}, whole(0))
    notes = holder["metadata"]["annotations"]
    copied = {k: notes[k] for k in (P.annotations.assignment, P.annotations.assignment_signature)}
    hostile: dict[str, Any]
    if how == "unsigned":
        hostile = bound("hostile", {GPU: 1}, whole(0))
    elif how == "a copied signature":
        hostile = bound("hostile", {GPU: 1}, copied[P.annotations.assignment])
        hostile["metadata"]["annotations"].update(copied)
    elif how == "a copied signature, asking for no GPU":
        hostile = bound("hostile", {}, copied[P.annotations.assignment])
        hostile["metadata"]["annotations"].update(copied)
    elif how == "another key":
        hostile = signed("hostile", {GPU: 1}, whole(0), OTHER_KEYS)
    elif how == "signed, more than asked":
        hostile = signed("hostile", {CORE: 1}, whole(0))
    elif how == "signed, for another node":
        hostile = signed("hostile", {GPU: 1}, whole(0, node="n2"))
    else:
        assert how == "unreadable"
        hostile = bound("hostile", {GPU: 1}, "{not json")
    return holder, hostile


@pytest.mark.parametrize(
    ("how", "reason", "said"),
    [
        ("unsigned", "unsigned", "it is not signed by the scheduler"),
        ("a copied signature", "signature", "signature does not match"),
        ("a copied signature, asking for no GPU", "signature", "signature does not match"),
        ("another key", "signature", "which is not one of the keys held"),
        ("signed, more than asked", "requests", "asks for 10 milli, assigned 1000"),
        ("signed, for another node", "other_node", "is for node n2, but it is bound to n1"),
        ("unreadable", "unreadable", "cannot be read"),
    ],
)
@pytest.mark.parametrize("first", ["hostile", "holder"])
def test_a_restarted_scheduler_books_the_real_holder_not_the_hostile_pod(
    api: FakeApi, how: str, reason: str, said: str, first: str
) -> None:
    """Whichever the informer lists first, the holder keeps GPU 0 and the hostile pod books no GPU."""
    holder, hostile = holder_and(api, how)
    for pod in (hostile, holder) if first == "hostile" else (holder, hostile):
        api.add_pod(pod)
    live = make(api)  # a scheduler (re)started over these pods
    cache = live.cache
    assert cache.conflicts == {}
    assert gpus_of(live, "holder") == [0]
    assert gpus_of(live, "hostile") == []
    assert free_whole(live) == GPUS - 1
    live.write_notices()
    (message,) = warned(api, "hostile")
    assert said in message
    assert warned(api, "holder") == []
    assert cache.authority.ignored[reason] == 1
    assert sum(cache.authority.ignored.values()) == 1


def test_without_a_key_ring_the_requests_are_still_checked(api: FakeApi) -> None:
    live = make(api, keys=None)
    api.add_pod(bound("squatter", {}, whole(*range(GPUS))))
    api.add_pod(bound("unsigned-but-equal", {GPU: 1}, whole(0)))
    assert free_whole(live) == GPUS - 1  # the pod that asks for a GPU holds it; the squatter nothing
    live.write_notices()
    (message,) = warned(api, "squatter")
    assert "container 'main' asks for no GPU but is assigned 4" in message
    assert live.cache.authority.ignored["requests"] == 1


def test_a_signature_by_a_rotated_out_key_counts_once_kubelet_admitted_the_pod(api: FakeApi) -> None:
    """After a rotation the old key leaves the ring, while pods signed with it run on."""
    live = make(api)
    pod = signed("old", {GPU: 1}, whole(2), OTHER_KEYS)  # OTHER_KEYS: the key before the rotation
    api.add_pod(pod)
    assert free_whole(live) == GPUS  # bound, not admitted: nothing vouches for it
    admitted = copy.deepcopy(pod)
    admitted["status"] = {"phase": "Running", "startTime": "2026-11-30T00:00:05Z"}
    live.on_pod("MODIFIED", admitted)
    assert free_whole(live) == GPUS - 1
    assert gpus_of(live, "old") == [2]
    edited = copy.deepcopy(admitted)  # an admitted pod whose signature does not match a key held: refused
    edited["metadata"]["uid"] = "uid-edited"
    edited["metadata"]["name"] = "edited"
    edited["metadata"]["annotations"][P.annotations.assignment_signature] = sign_assignment(KEYS, "other", whole(2))
    live.on_pod("ADDED", edited)
    assert free_whole(live) == GPUS - 1


def test_a_pod_signed_with_a_key_the_scheduler_reads_later_is_booked_then(api: FakeApi, tmp_path: Path) -> None:
    folder = ensure_key_folder(tmp_path / "keys")
    ring = KeyRing.from_folder(folder, reload_s=0)
    new = tmp_path / "new"
    shutil.copytree(folder, new)
    (new / "current").write_text("the next key, which the other replica read first\n")
    pod = signed("next", {GPU: 1}, whole(1), KeyRing.from_folder(new))
    live = make(api, ring)
    api.add_pod(pod)
    assert free_whole(live) == GPUS
    (folder / "previous").write_text((folder / "current").read_text())
    (folder / "current").write_text((new / "current").read_text())
    assert ring.key_ids[0] == KeyRing.from_folder(new).key_ids[0]  # reread
    live.on_pod("MODIFIED", copy.deepcopy(pod))
    assert free_whole(live) == GPUS - 1
    assert live.cache.unbooked == set()
    live.write_notices()
    assert len(warned(api, "next")) == 1  # said once, when it was refused


def test_honest_pods_are_booked_identically_after_a_restart() -> None:
    """Pods of every kind this scheduler bound (shares with and without memory, whole GPUs, on a node
    whose gpu-memory unit is not the protocol's) verify after a restart: nothing is ignored."""
    api = FakeApi()
    api.add_node(node_object("n1", gpus=4))
    other_unit = node_object("n2", gpus=4)
    other_unit["metadata"]["labels"][P.labels.memory_unit] = "512Mi"
    api.add_node(other_unit)
    live = make(api)
    framework = Framework(load_conf(None), builtin_registry(), BuildContext(protocol=P))
    asks: list[dict[str, Any]] = [{CORE: 30, MEM: 2}, {CORE: 25}, {GPU: 1}, {GPU: 2, CORE: 20, MEM: 1}, {MEM: 3}]
    for i in range(16):
        api.add_pod(pod_object(f"p{i}", asks[i % len(asks)]))
    for _ in range(3):
        framework.run_once(live)
        assert live.binder.drain()
    assert all(p["spec"].get("nodeName") for p in api.pods.values())
    assert {p["spec"]["nodeName"] for p in api.pods.values()} == {"n1", "n2"}
    before = live.cache.booked()
    live.binder.close()
    restarted = make(api)
    assert restarted.cache.booked() == before
    assert sum(restarted.cache.authority.ignored.values()) == 0
    assert restarted.cache.unbooked == set()


def test_a_signed_cache_given_a_bound_pod_without_its_seal_books_no_gpu(api: FakeApi) -> None:
    """The seal is made before the cache (which never holds the key); an event that skipped it fails closed."""
    live = make(api)
    live.cache.on_pod("ADDED", signed("holder", {GPU: 1}, whole(0)))  # not through live.on_pod
    assert gpus_of(live, "holder") == []
    assert live.cache.authority.ignored["signature"] == 1


def test_what_the_scheduler_signed_is_not_checked_again_but_any_other_signature_is(api: FakeApi) -> None:
    keys = CountingRing.from_secrets(b"the scheduler's key, thirty-two bytes or more")
    assert isinstance(keys, CountingRing)
    live = make(api, keys)
    framework = Framework(load_conf(None), builtin_registry(), BuildContext(protocol=P))
    for i in range(2):
        api.add_pod(pod_object(f"one-{i}", {GPU: 1}))
    framework.run_once(live)
    assert live.binder.drain()
    assert sorted(gpus_of(live, "one-0") + gpus_of(live, "one-1")) == [0, 1]  # booked from their events
    assert keys.checked == 0  # the signatures it has just made: no second HMAC
    copied = api.pods["default/one-0"]["metadata"]["annotations"]
    hostile = bound("hostile", {GPU: 1}, copied[P.annotations.assignment], copied[P.annotations.assignment_signature])
    api.add_pod(hostile)  # one-0's signed assignment, copied onto a pod of its own
    live.write_notices()
    assert keys.checked == 1
    (message,) = warned(api, "hostile")
    assert "signature does not match" in message
    assert gpus_of(live, "hostile") == []
    restarted = CountingRing.from_secrets(b"the scheduler's key, thirty-two bytes or more")
    assert isinstance(restarted, CountingRing)
    again = make(api, restarted)  # it signed none of them: each is checked
    assert restarted.checked == 3
    assert sorted(gpus_of(again, "one-0") + gpus_of(again, "one-1")) == [0, 1]

"""Kubernetes' PV/PVC semantics (component-helpers' storage/volume): matching a claim to a volume,
binding one to the other, binding modes, topologies, classes."""

from __future__ import annotations

import pytest

from runtimekit.kube.semantics import volumes as v
from scheduler.kubesem.volume_builders import pv, pvc, sc

NODE = ("node1", {"nodeKey": "node1"})


def test_the_smallest_available_volume_of_the_class_that_fits_is_chosen() -> None:
    claim = pvc("c", "4G")
    volumes = [
        pv("big", capacity="10G"),
        pv("small", capacity="5G"),
        pv("tiny", capacity="1G"),
        pv("same", capacity="5G"),
    ]
    assert v.find_matching_volume(claim, volumes, NODE)["metadata"]["name"] == "small"  # type: ignore[index]


@pytest.mark.parametrize(
    ("volume", "why"),
    [
        (pv("x", cls="other"), "another class"),
        (pv("x", phase="Released"), "not Available"),
        (pv("x", volume_mode="Block"), "another volume mode"),
        (pv("x", node="node2"), "pinned to another node"),
        (pv("x", modes=["ReadOnlyMany"]), "not the access mode asked"),
        (pv("x", claim=pvc("someone-else", uid="other")), "bound to another claim"),
    ],
)
def test_a_volume_that_does_not_match_is_not_chosen(volume: v.PersistentVolume, why: str) -> None:
    claim = pvc("c", "1G", modes=["ReadWriteOnce"])
    assert v.find_matching_volume(claim, [volume], NODE) is None, why


def test_access_modes_are_checked_on_the_schedulers_path_only() -> None:
    claim = pvc("c", "1G", modes=["ReadWriteOnce"])
    volume = pv("x", modes=["ReadOnlyMany"])
    assert v.find_matching_volume(claim, [volume], NODE) is None
    assert v.find_matching_volume(claim, [volume]) is volume


def test_a_label_selector_picks_the_volumes() -> None:
    claim = pvc("c", "1G")
    claim["spec"]["selector"] = {"matchLabels": {"disk": "ssd"}}
    assert v.find_matching_volume(claim, [pv("hdd", labels={"disk": "hdd"})], NODE) is None
    assert v.find_matching_volume(claim, [pv("ssd", labels={"disk": "ssd"})], NODE) is not None


def test_a_volume_pre_bound_to_the_claim_wins_or_nothing_does() -> None:
    claim = pvc("c", "1G")
    prebound = pv("mine", node="node2", capacity="50G", claim=claim, phase="Available")
    assert v.find_matching_volume(claim, [pv("free"), prebound], NODE) is None  # pinned elsewhere: no match
    assert v.find_matching_volume(claim, [pv("free"), prebound], ("node2", {"nodeKey": "node2"})) is prebound
    # the controller's path for a claim waiting for its first consumer: pre-bound volumes only
    assert v.find_matching_volume(claim, [pv("free")], None, delay_binding=True) is None
    assert v.find_matching_volume(claim, [prebound], None, delay_binding=True) is prebound


def test_binding_a_volume_to_a_claim() -> None:
    claim = pvc("c", "1G", uid="u1", rv="7")
    bound, dirty = v.bind_volume_to_claim(pv("x"), claim)
    assert dirty
    assert bound["spec"]["claimRef"] == {
        "kind": "PersistentVolumeClaim",
        "apiVersion": "v1",
        "namespace": "testns",
        "name": "c",
        "uid": "u1",
        "resourceVersion": "7",
    }
    assert bound["metadata"]["annotations"][v.ANN_BOUND_BY_CONTROLLER] == "yes"
    again, dirty_again = v.bind_volume_to_claim(bound, claim)
    assert not dirty_again
    assert again == bound
    user = pv("x")
    user["spec"]["claimRef"] = {"namespace": "testns", "name": "c"}  # pre-bound by its author
    adopted, dirty = v.bind_volume_to_claim(user, claim)
    assert dirty  # the claim's UID is written
    assert v.ANN_BOUND_BY_CONTROLLER not in (adopted["metadata"].get("annotations") or {})


def test_binding_modes_and_classes() -> None:
    classes = {"wait": sc("wait"), "now": sc("now", "Immediate"), "unset": sc("unset", None)}
    assert v.is_delay_binding(pvc("c", cls="wait"), classes.get)
    assert not v.is_delay_binding(pvc("c", cls="now"), classes.get)
    assert not v.is_delay_binding(pvc("c", cls=None), classes.get)
    assert not v.is_delay_binding(pvc("c", cls="missing"), classes.get)
    with pytest.raises(v.ClassError, match="VolumeBindingMode not set"):
        v.is_delay_binding(pvc("c", cls="unset"), classes.get)
    assert v.claim_class(pvc("c", cls="spec", beta_class="annotated")) == "annotated"


def test_allowed_topologies() -> None:
    terms = sc("t", topologies=[{"zone": ["a", "b"], "rack": ["1"]}, {"zone": ["c"]}])["allowedTopologies"]
    assert v.topology_matches(terms, {"zone": "a", "rack": "1"})
    assert not v.topology_matches(terms, {"zone": "a"})
    assert v.topology_matches(terms, {"zone": "c"})
    assert v.topology_matches([], {})


def test_fully_bound_and_default_class() -> None:
    assert v.is_claim_fully_bound(pvc("c", volume="x", bound=True))
    assert not v.is_claim_fully_bound(pvc("c", volume="x"))
    default = sc("standard")
    default["metadata"]["annotations"] = {v.ANN_DEFAULT_CLASS: "true"}
    assert v.is_default_class(default)
    assert not v.is_default_class(sc("other"))

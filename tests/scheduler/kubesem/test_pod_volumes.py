"""A pod's volumes as the volume filters read them, parsed once per manifest."""

from __future__ import annotations

from runtimekit.scheduler.kubesem.pods import pod_facts
from runtimekit.scheduler.kubesem.volumes import AWS_EBS, GCE_PD, RBD, ClaimUse, Disk, InlineVolume, pod_volumes
from scheduler.kubesem.volume_builders import volume_pod


def test_a_pod_without_volumes_the_filters_read_has_none() -> None:
    assert pod_facts(volume_pod()).volumes is None
    spec = {"volumes": [{"name": "cm", "configMap": {"name": "x"}}, {"name": "e", "emptyDir": {}}]}
    assert pod_volumes(spec, "p", "u") is None  # type: ignore[arg-type]


def test_claims_ephemeral_claims_disks_and_inline_volumes() -> None:
    manifest = volume_pod(
        "web-0",
        ["data"],
        ephemeral=["scratch"],
        inline=[(GCE_PD, {"pdName": "pd", "readOnly": True}), (AWS_EBS, {"volumeID": "aws://us-east-1a/vol-1"})],
    )
    volumes = pod_facts(manifest).volumes
    assert volumes is not None
    assert volumes.claims == (ClaimUse("data", volume="v0"), ClaimUse("web-0-scratch", True, "scratch"))
    assert volumes.persistent_claims == ("data",)
    assert volumes.disks == (Disk(GCE_PD, ("pd",), True), Disk(AWS_EBS, ("aws://us-east-1a/vol-1",)))
    assert volumes.inline == (
        InlineVolume(GCE_PD, "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/pd"),
        InlineVolume(AWS_EBS, "vol-1"),
    )


def test_disk_conflicts() -> None:
    rbd = Disk(RBD, ("pool", "image"), monitors=frozenset({"a", "b"}))
    assert rbd.conflicts(Disk(RBD, ("pool", "image"), monitors=frozenset({"b"})))
    assert not rbd.conflicts(Disk(RBD, ("pool", "image"), monitors=frozenset({"c"})))
    read_only = Disk(GCE_PD, ("pd",), True)
    assert not read_only.conflicts(Disk(GCE_PD, ("pd",), True))
    assert read_only.conflicts(Disk(GCE_PD, ("pd",), False))
    assert Disk(AWS_EBS, ("v",), True).conflicts(Disk(AWS_EBS, ("v",), True))  # EBS: never shared

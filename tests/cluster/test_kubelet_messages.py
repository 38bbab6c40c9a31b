"""kubelet's container Event messages by the Kubernetes version the API server reports
(`cluster.kubelet.messages`): the wording changed in 1.30 (image size), 1.33 (`Created container:
NAME`) and 1.34 (the name left to the Event's fieldPath)."""

from __future__ import annotations

import pytest

from runtimekit.cluster.kubelet.messages import Wording, pulls


@pytest.mark.parametrize(
    ("minor", "created", "started", "present", "pulled"),
    [
        ("29", "Created container main", "Started container main", "", ""),
        ("31", "Created container main", "Started container main", "", ". Image size: 4194304 bytes."),
        ("33+", "Created container: main", "Started container: main", "", ". Image size: 4194304 bytes."),
        (
            "34",
            "Container created",
            "Container started",
            " and can be accessed by the pod",
            ". Image size: 4194304 bytes.",
        ),
    ],
    ids=["1.29", "1.31", "1.33", "1.34"],
)
def test_wording_by_version(minor: str, created: str, started: str, present: str, pulled: str) -> None:
    wording = Wording.of_version({"major": "1", "minor": minor})
    assert (wording.created("main"), wording.started("main")) == (created, started)
    assert wording.present("busybox") == 'Container image "busybox" already present on machine' + present
    assert wording.pulled("busybox") == 'Successfully pulled image "busybox" in 1s (1s including waiting)' + pulled
    assert wording.killing("main") == "Stopping container main"


def test_an_unreadable_version_gets_133s_wording() -> None:
    assert Wording.of_version({"minor": ""}).created("c") == "Created container: c"


@pytest.mark.parametrize(
    ("policy", "image", "present", "expected"),
    [
        ("Always", "busybox:1.36", True, True),
        ("IfNotPresent", "busybox:1.36", False, True),
        ("IfNotPresent", "busybox:1.36", True, False),
        ("Never", "busybox", False, False),
        ("", "busybox", True, True),  # no tag: :latest, Always
        ("", "busybox:1.36", True, False),
        ("", "registry:5000/busybox", True, True),  # a port is not a tag
    ],
)
def test_when_kubelet_pulls(policy: str, image: str, present: bool, expected: bool) -> None:
    assert pulls(policy, image, present) is expected

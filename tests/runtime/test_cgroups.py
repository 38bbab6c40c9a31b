"""PID -> pod and container through /proc/<pid>/cgroup: the path shapes of kubelet's cgroup drivers
(cgroupfs, systemd), cgroup v1 and v2, and containerd, CRI-O and Docker, as they appear on nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtimekit.kube.objects import Pod
from runtimekit.runtime.cgroups import CgroupIdentity, ProcessOwners, container_ids, parse_cgroup
from runtimekit.runtime.usage import ProcessOwner

CID = "34dc0b5e626f2c5c4c5170e34b10e7654ce36f0fcd532739f4445baabea03376"
UID = "74c13223-5a00-11e9-b385-42010a80018d"
UNDERSCORED = UID.replace("-", "_")

CASES = {
    # cgroup v1, cgroupfs driver (docker/containerd): one line per hierarchy
    "v1-cgroupfs-besteffort": (
        f"11:devices:/kubepods/besteffort/pod{UID}/{CID}\n4:memory:/kubepods/besteffort/pod{UID}/{CID}\n"
    ),
    "v1-cgroupfs-guaranteed": f"9:memory:/kubepods/pod{UID}/{CID}\n",
    "v1-systemd-docker": (
        f"12:pids:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UNDERSCORED}.slice/docker-{CID}.scope\n"
        "1:name=systemd:/system.slice/docker.service\n"
    ),
    # cgroup v2: one line "0::<path>"
    "v2-systemd-containerd": (
        f"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UNDERSCORED}.slice/cri-containerd-{CID}.scope\n"
    ),
    "v2-systemd-crio-guaranteed": f"0::/kubepods.slice/kubepods-pod{UNDERSCORED}.slice/crio-{CID}.scope\n",
    "v2-cgroupfs-containerd": f"0::/kubepods/burstable/pod{UID}/{CID}\n",
    # a kind node: the node's own container prefixes the path
    "v2-nested-kind": (
        "0::/system.slice/docker-aaaa.scope/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
        f"kubelet-kubepods-besteffort-pod{UNDERSCORED}.slice/cri-containerd-{CID}.scope\n"
    ),
}

NOT_CONTAINERS = {
    "host-service": "0::/system.slice/sshd.service\n",
    "crio-conmon": f"0::/kubepods.slice/kubepods-pod{UNDERSCORED}.slice/crio-conmon-{CID}.scope\n",
    "pod-level": f"0::/kubepods/burstable/pod{UID}\n",
    "docker-outside-k8s": f"0::/system.slice/docker-{CID}.scope\n",
    "empty": "",
}


@pytest.mark.parametrize("text", CASES.values(), ids=list(CASES))
def test_parse_finds_pod_and_container(text: str) -> None:
    assert parse_cgroup(text) == CgroupIdentity(UID, CID)


@pytest.mark.parametrize("text", NOT_CONTAINERS.values(), ids=list(NOT_CONTAINERS))
def test_parse_refuses_what_is_no_container(text: str) -> None:
    assert parse_cgroup(text) is None


def pod(uid: str, statuses: dict[str, str]) -> Pod:
    return {
        "metadata": {"namespace": "ml", "name": "train", "uid": uid},
        "status": {"containerStatuses": [{"name": n, "containerID": c} for n, c in statuses.items()]},
    }


def write(proc: Path, pid: int, text: str) -> None:
    (proc / str(pid)).mkdir(parents=True)
    (proc / str(pid) / "cgroup").write_text(text)


def test_container_ids_from_statuses() -> None:
    ids = container_ids([pod(UID, {"main": f"containerd://{CID}", "side": "cri-o://abc"})])
    assert ids == {(UID, CID): "main", (UID, "abc"): "side"}


def test_owner_by_container_status(tmp_path: Path) -> None:
    other = "f" * 64
    write(tmp_path, 10, CASES["v2-cgroupfs-containerd"])
    write(tmp_path, 11, f"0::/kubepods/burstable/pod{UID}/{other}\n")
    write(tmp_path, 12, NOT_CONTAINERS["host-service"])
    owners = ProcessOwners([pod(UID, {"main": f"containerd://{CID}"})], tmp_path)
    assert owners(10) == ProcessOwner(UID, "main")
    assert owners(11) == ProcessOwner(UID, "")  # the pod is known, its container is not (yet) in the status
    assert owners(12) is None
    assert owners(99) is None  # gone since the driver listed it

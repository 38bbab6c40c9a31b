"""HAMi's own annotations and label on the pods the scheduler binds under HAMi's names
(`runtimekit.model.hami`): `hami.io/vgpu-devices-allocated` in HAMi's `EncodePodSingleDevice` format,
`hami.io/vgpu-node` (annotation and label), `hami.io/bind-phase: allocating`; never under other names.

The format cases are HAMi's own: docs/develop/protocol.md (two containers, 3000 and 5000 MiB on one
card) and pkg/device-plugin/nvidiadevice/nvinternal/plugin/alloc_refactor_test.go (two cards with
cores), plus HAMi's scheduler's rule that init containers come first and a container without GPUs is
a lone `;` (pkg/scheduler/score.go).
"""

from __future__ import annotations

import copy

import pytest

from runtimekit.model import Assignment, GpuShare, GpuUUID, NodeName, hami
from runtimekit.model.hami import encode_devices
from runtimekit.protocol.presets import preset_protocol
from runtimekit.scheduler.cache.objects import task_from_pod
from scheduler.fake_api import FakeApi, node_object, pod_object
from scheduler.plugins.test_gpushare_presets import make, placed, schedule

HAMI = preset_protocol("hami")
DOC_GPU = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448"


def assignment(**containers: list[GpuShare]) -> Assignment:
    return Assignment(NodeName("node67-4v100"), {name: tuple(shares) for name, shares in containers.items()})


@pytest.mark.parametrize(
    ("containers", "given", "encoded"),
    [
        pytest.param(
            ["ctr1", "ctr2"],
            assignment(ctr1=[GpuShare(GpuUUID(DOC_GPU), 0, 0, 3000)], ctr2=[GpuShare(GpuUUID(DOC_GPU), 0, 0, 5000)]),
            f"{DOC_GPU},NVIDIA,3000,0:;{DOC_GPU},NVIDIA,5000,0:;",
            id="protocol.md: two containers on one card",
        ),
        pytest.param(
            ["main"],
            assignment(main=[GpuShare(GpuUUID("GPU-aaa"), 0, 500, 3000), GpuShare(GpuUUID("GPU-bbb"), 1, 600, 4000)]),
            "GPU-aaa,NVIDIA,3000,50:GPU-bbb,NVIDIA,4000,60:;",
            id="one container on two cards",
        ),
        pytest.param(
            ["init", "side", "main"],
            assignment(main=[GpuShare(GpuUUID("GPU-aaa"), 0, 1000, 40960)]),
            ";;GPU-aaa,NVIDIA,40960,100:;",
            id="containers without GPUs are empty entries, init first",
        ),
        pytest.param(
            ["main"],
            assignment(main=[GpuShare(GpuUUID("MIG-1"), 0, 0, 9856, "1g.10gb", GpuUUID("GPU-aaa"), 0)]),
            "GPU-aaa,NVIDIA,9856,0:;",
            id="a MIG slice is booked on its card",
        ),
    ],
)
def test_devices_are_encoded_as_hami_encodes_them(containers: list[str], given: Assignment, encoded: str) -> None:
    assert encode_devices(containers, given) == encoded


def test_a_bound_pod_carries_hamis_annotations_and_label() -> None:
    api = FakeApi()
    api.add_node(node_object("h200-node", 2, "H200"))
    pod = pod_object("p", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000", "nvidia.com/gpucores": "30"})
    pod["spec"]["schedulerName"] = "hami-scheduler"
    pod["spec"]["initContainers"] = [{"name": "setup", "resources": {}}]
    live, framework = make(api)
    api.add_pod(pod)
    schedule(live, framework)
    node, shares = placed(api, "p")
    assert node == "h200-node", api.events
    meta = api.pods["default/p"]["metadata"]
    notes = meta["annotations"]
    assert notes["hami.io/vgpu-devices-allocated"] == f";{shares[0]['uuid']},NVIDIA,3000,30:;"
    assert notes["hami.io/vgpu-node"] == meta["labels"]["hami.io/vgpu-node"] == "h200-node"
    assert notes["hami.io/bind-phase"] == "allocating"
    assert int(notes["hami.io/vgpu-time"]) == int(notes["hami.io/bind-time"]) > 1_700_000_000


def test_other_names_get_no_hami_annotation() -> None:
    volcano = preset_protocol("volcano-vgpu")
    api = FakeApi()
    api.add_node(node_object("h200-node", 2, "H200"))
    live, framework = make(api, volcano)
    api.add_pod(pod_object("p", {"volcano.sh/vgpu-number": "1"}, scheduler="volcano"))
    schedule(live, framework)
    meta = api.pods["default/p"]["metadata"]
    assert meta["annotations"][volcano.annotations.assignment]
    assert not any(k.startswith("hami.io/") for k in (*meta["annotations"], *meta.get("labels", {})))


def test_the_binding_event_with_hamis_annotations_and_label_reuses_the_task() -> None:
    """HAMi's annotations and label come with the binding, so its event keeps the earlier task (the
    cache's fast path), as the kit's own binding annotations do; another label is read anew."""
    pending = pod_object("p", {"nvidia.com/gpu": "1"}, scheduler="hami-scheduler")
    earlier = task_from_pod(pending, HAMI)
    earlier.priority = 99  # what only the earlier task says: the fast path carries it
    bound = copy.deepcopy(pending)
    bound["spec"]["nodeName"] = "n1"
    notes = {HAMI.annotations.assignment: "{}", HAMI.annotations.assume_time: "1"}
    notes |= dict.fromkeys(hami.BINDING_ANNOTATIONS, "x")
    bound["metadata"]["annotations"].update(notes)
    bound["metadata"]["labels"] = {hami.NODE: "n1"}
    assert task_from_pod(bound, HAMI, earlier).priority == 99
    bound["metadata"]["labels"]["app"] = "x"
    assert task_from_pod(bound, HAMI, earlier).priority == 0

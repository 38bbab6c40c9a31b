"""The plugin's Allocate reads the node's pods from a watch-kept view, and stays right when the view lags:
it lists from the API server only when the view has no match, re-matches on a fresh list when the matched
pod turned out to be gone, and never allocates one container twice while the view still shows it waiting."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from dp_helpers import KEYS, PROTOCOL, RES, FakeNodeApi, Stack, StackFactory, gpu_pod

from runtimekit.base.rpcerrors import Code, ServiceError
from runtimekit.deviceplugin.matching import parse_allocated
from runtimekit.deviceplugin.service import DevicePluginService, PluginSettings

NODE = "node-a"


class LaggingView:
    """A watch-kept view whose contents the test sets: `show` is what the watch has delivered so far."""

    def __init__(self) -> None:
        self.current: list[Mapping[str, Any]] | None = []
        self.remembered: list[Mapping[str, Any]] = []

    def show(self, *pods: Mapping[str, Any]) -> None:
        self.current = [copy.deepcopy(p) for p in pods]

    def pods(self) -> Sequence[Mapping[str, Any]] | None:
        return self.current

    def remember(self, pod: Mapping[str, Any]) -> None:
        self.remembered.append(pod)


class CountingApi(FakeNodeApi):
    def __init__(self) -> None:
        super().__init__()
        self.lists = 0

    def list_node_pods(self, node: str) -> list[dict[str, Any]]:
        self.lists += 1
        return super().list_node_pods(node)


@dataclass
class Rig:
    service: DevicePluginService
    api: CountingApi
    view: LaggingView
    stack: Stack

    @property
    def gpus(self) -> list[str]:
        return self.stack.gpus


@pytest.fixture
def rig(make_stack: StackFactory) -> Rig:
    """The plugin over a real runtime, a counting fake API and an (empty, synced) lagging view."""
    stack, api, view = make_stack(), CountingApi(), LaggingView()
    service = DevicePluginService(
        PluginSettings(NODE, PROTOCOL, keys=KEYS), stack.client, api, stack.service.state, view
    )
    return Rig(service, api, view, stack)


def ids(gpu: str, n: int) -> list[str]:
    return [f"{gpu}::{i}" for i in range(n)]


def share(name: str, gpu: str, index: int, assume: float) -> dict[str, Any]:
    return gpu_pod(name, [("main", {RES.core: 20}, [(gpu, index, 200, 143771 * 2 // 10)])], assume=assume)


def test_a_match_in_the_view_needs_no_list(rig: Rig) -> None:
    service, api, view, gpus = rig.service, rig.api, rig.view, rig.gpus
    pod = api.add(share("p", gpus[0], 0, 1))
    view.show(pod)
    answer = service.allocate(RES.core, ids(gpus[0], 20))
    assert answer.allocation.pod.name == "p"
    assert api.lists == 0
    assert parse_allocated(api.annotations("default", "p")[PROTOCOL.annotations.allocated]) == {"main": (RES.core,)}
    (written,) = view.remembered  # the patched pod goes into the view at once
    assert written["metadata"]["resourceVersion"] == api.pods[("default", "p")]["metadata"]["resourceVersion"]


def test_a_pod_the_view_has_not_seen_is_found_by_a_list(rig: Rig) -> None:
    service, api, gpus = rig.service, rig.api, rig.gpus
    api.add(share("new", gpus[1], 1, 1))
    assert service.allocate(RES.core, ids(gpus[1], 20)).allocation.pod.name == "new"
    assert api.lists == 1


def test_no_view_yet_means_a_list(rig: Rig) -> None:
    service, api, gpus = rig.service, rig.api, rig.gpus
    rig.view.current = None
    api.add(share("p", gpus[0], 0, 1))
    assert service.allocate(RES.core, ids(gpus[0], 20)).allocation.pod.name == "p"
    assert api.lists == 1


def test_a_deleted_pod_still_in_the_view_gives_way_to_the_live_one(rig: Rig) -> None:
    service, api, view, gpus = rig.service, rig.api, rig.view, rig.gpus
    gone = api.add(share("gone", gpus[0], 0, 1))  # older: the view would match it first
    live = api.add(share("live", gpus[1], 1, 2))
    view.show(gone, live)
    del api.pods[("default", "gone")]  # deleted; the watch has not said so yet
    answer = service.allocate(RES.core, ids(gpus[1], 20))
    assert (answer.allocation.pod.name, answer.envs["NVIDIA_VISIBLE_DEVICES"]) == ("live", gpus[1])
    assert [a.pod.name for a in rig.stack.client.list_allocations()] == ["live"]  # the gone pod's was given back
    assert api.lists == 1


def test_a_lagging_view_never_gets_a_container_allocated_twice(rig: Rig) -> None:
    service, api, view, gpus = rig.service, rig.api, rig.view, rig.gpus
    first = api.add(share("first", gpus[0], 0, 1))
    assert service.allocate(RES.core, ids(gpus[0], 20)).allocation.pod.name == "first"  # by a list
    view.show(first)  # the watch now delivers the pod as it was before the patch
    with pytest.raises(ServiceError) as refused:
        service.allocate(RES.core, ids(gpus[0], 20))
    assert refused.value.code is Code.FAILED_PRECONDITION
    second = api.add(share("second", gpus[1], 1, 2))
    view.show(first, second)
    assert service.allocate(RES.core, ids(gpus[1], 20)).allocation.pod.name == "second"


def test_a_stale_resource_version_in_the_view_is_retried_on_the_fresh_pod(rig: Rig) -> None:
    service, api, view, gpus = rig.service, rig.api, rig.view, rig.gpus
    pod = api.add(share("p", gpus[0], 0, 1))
    view.show(pod)
    api.patch_pod_annotations("default", "p", {"someone": "else"}, None)  # the view misses this change
    service.allocate(RES.core, ids(gpus[0], 20))
    notes = api.annotations("default", "p")
    assert notes["someone"] == "else"
    assert parse_allocated(notes[PROTOCOL.annotations.allocated]) == {"main": (RES.core,)}

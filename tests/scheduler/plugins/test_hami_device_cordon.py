"""HAMi's node annotation `hami.io/device-cordon` (`annotations.gpusCordoned` in the `hami` preset): the
GPUs it lists take no new pods, the pods already on them stay. The cases are HAMi's
`TestFit_DeviceCordon` (pkg/device/nvidia/device_test.go), run through the scheduler's cache."""

from __future__ import annotations

from typing import Any

import pytest

from runtimekit.model import NodeInventory
from runtimekit.protocol.presets import preset_protocol
from scheduler.fake_api import FakeApi, node_object, pod_object
from scheduler.plugins.test_gpushare_presets import make, placed, reasons, schedule

HAMI = preset_protocol("hami")
NODE = "node"
CORDON = "hami.io/device-cordon"
UUIDS = [str(g.uuid) for g in NodeInventory.simulated(NODE, "T4", 2, 16384).gpus]
SHARE = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "64", "nvidia.com/gpucores": "50"}


def cordoned(value: str | None) -> FakeApi:
    api = FakeApi()
    node: dict[str, Any] = node_object(NODE, 2, "T4")
    if value is not None:
        node["metadata"].setdefault("annotations", {})[CORDON] = value.format(*UUIDS)
    api.add_node(node)
    return api


def share(name: str) -> dict[str, Any]:
    return pod_object(name, SHARE, scheduler="hami-scheduler")


@pytest.mark.parametrize(
    ("value", "gpu"),
    [
        pytest.param("{1}, ", 0, id="cordoned device is skipped, healthy sibling still fits"),
        pytest.param("{0}", 1, id="the other one"),
        pytest.param(None, None, id="no annotation: nothing cordoned"),
        pytest.param("", None, id="empty: nothing cordoned"),
        pytest.param("GPU-elsewhere", None, id="a GPU of another node"),
    ],
)
def test_a_cordoned_gpu_takes_no_new_pod(value: str | None, gpu: int | None) -> None:
    api = cordoned(value)
    live, framework = make(api)
    api.add_pod(share("p"))
    schedule(live, framework)
    node, shares = placed(api, "p")
    assert node == NODE
    if gpu is not None:
        assert shares[0]["uuid"] == UUIDS[gpu]


def test_all_devices_cordoned_keeps_the_pod_pending() -> None:
    api = cordoned("{0},{1}")
    live, framework = make(api)
    api.add_pod(share("p"))
    schedule(live, framework)
    assert placed(api, "p") == ("", [])
    assert any("no usable GPU" in message for message in reasons(api, "p"))


def test_running_pods_on_a_cordoned_device_are_unaffected() -> None:
    api = cordoned(None)
    live, framework = make(api)
    api.add_pod(share("first"))
    schedule(live, framework)
    _, [first] = placed(api, "first")
    node = api.nodes[NODE]
    node["metadata"].setdefault("annotations", {})[CORDON] = first["uuid"]
    live.cache.on_node("MODIFIED", node)  # cordoned live, as HAMi reads it: no device-plugin restart
    api.add_pod(share("second"))
    schedule(live, framework)
    _, [second] = placed(api, "second")
    assert second["uuid"] != first["uuid"]
    uids = {api.pods[f"default/{name}"]["metadata"]["uid"] for name in ("first", "second")}
    assert set(live.cache.ledger.bookings()) == uids  # the first pod stays booked on its cordoned GPU

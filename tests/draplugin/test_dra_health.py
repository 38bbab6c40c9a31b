"""KEP-4680's DRA half: the plugin's DRAResourceHealth stream and the simulated kubelet's side of it,
over real gRPC on unix sockets: every device name is reported (a GPU that failed stays named, as
UNHEALTHY, so the claims holding it learn of it), changes reach the kubelet's cache and its listener,
an ended stream turns the driver's devices Unknown, a stale report reads Unknown, and a plugin without
the service is left alone."""

from __future__ import annotations

from collections.abc import Callable

from dra_helpers import DRIVER, NODE, DraStack

from fixtures.waiting import wait_for
from runtimekit.api.drahealth.v1alpha1 import health_pb2 as hp
from runtimekit.cluster.kubelet.drahealth import DeviceKey, DraHealthWatch, HealthCache
from runtimekit.draplugin.health import health_response
from runtimekit.draplugin.inventory import device_health, targets
from runtimekit.model import MigMode, simulated_uuid

Factory = Callable[..., DraStack]


def test_every_name_is_reported_and_a_failed_gpu_takes_its_parts_with_it(dra_stack: Factory) -> None:
    stack = dra_stack(gpus="2xA100-40GB", mig_modes={1: MigMode.DYNAMIC})
    stack.client.set_device_health(simulated_uuid(NODE, 1), False, "test: XID 79")
    devices = stack.client.list_devices()
    health = device_health(devices)
    assert health["gpu-0"] is True
    parts = [name for name in health if name.startswith("gpu-1")]
    assert len(parts) == 19  # the whole GPU and its 18 MIG placements
    assert not any(health[name] for name in parts)
    assert set(targets(devices)) == {"gpu-0"}  # the slices offer only the healthy GPU
    answer = health_response(NODE, devices, 1_700_000_000.5)
    assert len(answer.devices) == 20
    first = answer.devices[0]
    assert (first.device.pool_name, first.device.device_name, first.health, first.last_updated_time) == (
        NODE,
        "gpu-0",
        hp.HEALTHY,
        1_700_000_000,
    )


def test_the_kubelet_follows_the_plugins_health_stream(dra_stack: Factory) -> None:
    stack = dra_stack(gpus="2xH200")
    stack.serve(health=True)
    assert stack.server is not None
    changes: list[set[DeviceKey]] = []
    cache = HealthCache()
    watch = DraHealthWatch(cache, changes.append)
    try:
        watch.watch(DRIVER, str(stack.server.endpoint))
        wait_for(lambda: cache.get(DRIVER, NODE, "gpu-1") == "Healthy", what="the first report")
        assert changes[0] == {(DRIVER, NODE, "gpu-0"), (DRIVER, NODE, "gpu-1")}
        stack.client.set_device_health(simulated_uuid(NODE, 1), False, "test: XID 79")
        stack.devices.update(stack.client.list_devices())  # what the plugin's runtime watch does
        wait_for(lambda: cache.get(DRIVER, NODE, "gpu-1") == "Unhealthy", what="gpu-1 reported unhealthy")
        wait_for(lambda: changes[-1] == {(DRIVER, NODE, "gpu-1")}, what="only gpu-1 changed")
        assert cache.get(DRIVER, NODE, "gpu-0") == "Healthy"
        assert cache.get(DRIVER, NODE, "gpu-9") == "Unknown"  # never reported
        stack.server.stop()  # the plugin went away: its devices are no longer known
        wait_for(lambda: cache.get(DRIVER, NODE, "gpu-0") == "Unknown", what="the devices forgotten")
        wait_for(lambda: (DRIVER, NODE, "gpu-0") in changes[-1], what="the listener told")
        assert DRIVER not in watch.unsupported
        stack.server.start()  # back on the same endpoint: the kubelet opens the stream again
        wait_for(lambda: cache.get(DRIVER, NODE, "gpu-0") == "Healthy", 30, "the stream opened again")
        assert cache.get(DRIVER, NODE, "gpu-1") == "Unhealthy"
    finally:
        watch.stop()


def test_a_plugin_without_the_health_service_is_left_alone(dra_stack: Factory) -> None:
    stack = dra_stack(gpus="1xH200")
    stack.serve()  # no health stream
    assert stack.server is not None
    cache = HealthCache()
    watch = DraHealthWatch(cache, lambda _: None)
    try:
        watch.watch(DRIVER, str(stack.server.endpoint))
        wait_for(lambda: DRIVER in watch.unsupported, what="UNIMPLEMENTED taken as no health reports")
        assert cache.get(DRIVER, NODE, "gpu-0") == "Unknown"
    finally:
        watch.stop()


def test_a_report_older_than_the_timeout_reads_unknown() -> None:
    now = [1000.0]
    cache = HealthCache(timeout_s=30.0, clock=lambda: now[0])
    answer = hp.NodeWatchResourcesResponse(
        devices=[
            hp.DeviceHealth(device=hp.DeviceIdentifier(pool_name="p", device_name="a"), health=hp.UNHEALTHY),
            hp.DeviceHealth(
                device=hp.DeviceIdentifier(pool_name="p", device_name="b"), health=hp.HEALTHY, last_updated_time=980
            ),
            hp.DeviceHealth(device=hp.DeviceIdentifier(pool_name="p", device_name="c")),  # UNKNOWN
        ]
    )
    assert cache.update("d", answer) == {("d", "p", "a"), ("d", "p", "b"), ("d", "p", "c")}
    assert [cache.get("d", "p", n) for n in "abc"] == ["Unhealthy", "Healthy", "Unknown"]
    assert cache.update("d", answer) == set()  # nothing changed
    now[0] = 1015.0  # b was determined at 980: 35 s ago
    assert [cache.get("d", "p", n) for n in "abc"] == ["Unhealthy", "Unknown", "Unknown"]
    assert cache.clear("d") == {("d", "p", "a"), ("d", "p", "b"), ("d", "p", "c")}
    assert cache.get("d", "p", "a") == "Unknown"

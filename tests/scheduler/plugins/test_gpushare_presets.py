"""The gpushare plugin under the peers' presets, through the live cache: HAMi's model and UUID
annotations with HAMi's matching rules (pkg/device/devices.go CheckType, CheckUUID), its per-pod node
and GPU policies, memory in percent of each GPU; and a Warning Event for a peer's name the protocol
does not read."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runtimekit.model import NodeInventory
from runtimekit.protocol import KitProtocol
from runtimekit.protocol.presets import preset_protocol
from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.cache.cluster import PEER_NAME_REASON
from runtimekit.scheduler.cache.live import LiveCache, live_cache
from runtimekit.scheduler.framework import BuildContext, Framework, load_conf, parse_conf
from scheduler.fake_api import FakeApi, node_object, pod_object

HAMI = preset_protocol("hami")
GPUS = 2
GIB16 = 16384  # the fake nodes' GPUs


def make(api: FakeApi, protocol: KitProtocol = HAMI) -> tuple[LiveCache, Framework]:
    names = (protocol.scheduler_name, *protocol.scheduler_aliases)  # as the Scheduler answers
    live = live_cache(protocol, names, api, bind_workers=2, retry_seconds=0.0)
    api.attach(live.cache)
    for node in api.nodes.values():
        live.cache.on_node("ADDED", node)
    framework = Framework(load_conf(None), builtin_registry(), BuildContext(protocol=protocol))
    return live, framework


def schedule(live: LiveCache, framework: Framework, sessions: int = 2) -> None:
    for _ in range(sessions):
        framework.run_once(live)
        assert live.binder.drain()


@pytest.fixture
def api() -> FakeApi:
    api = FakeApi()
    api.add_node(node_object("a100-node", GPUS, "A100-80GB"))
    api.add_node(node_object("h200-node", GPUS, "H200"))
    return api


def uuids(node: str) -> list[str]:
    return [str(g.uuid) for g in NodeInventory.simulated(node, "T4", GPUS, GIB16).gpus]


def resolve(annotations: dict[str, str]) -> dict[str, str]:
    """`{node:index}` in a value stands for that simulated GPU's UUID."""
    out = {}
    for key, given in annotations.items():
        value = given
        for node in ("a100-node", "h200-node"):
            for index, uuid in enumerate(uuids(node)):
                value = value.replace(f"{{{node}:{index}}}", uuid)
        out[key] = value
    return out


def placed(api: FakeApi, name: str) -> tuple[str, list[dict[str, Any]]]:
    pod = api.pods[f"default/{name}"]
    text = pod["metadata"]["annotations"].get(HAMI.annotations.assignment)
    if text is None:
        return "", []
    assignment = json.loads(text)
    return str(assignment["node"]), [share for shares in assignment["containers"].values() for share in shares]


def reasons(api: FakeApi, name: str) -> list[str]:
    return [message for pod, reason, message in api.events if pod == name and reason == "FailedScheduling"]


@pytest.mark.parametrize(
    ("annotations", "node", "gpu_index"),
    [
        ({"nvidia.com/use-gputype": "A100,V100"}, "a100-node", None),  # specify_card_type_to_use.yaml
        ({"nvidia.com/use-gputype": "a100"}, "a100-node", None),  # any case
        ({"nvidia.com/use-gputype": "SXM4"}, "a100-node", None),  # part of the product name
        ({"nvidia.com/nouse-gputype": "A100"}, "h200-node", None),  # specify_card_type_not_use.yaml
        ({"nvidia.com/use-gputype": "H200, ", "nvidia.com/nouse-gputype": " "}, "h200-node", None),  # blanks: none
        ({"nvidia.com/use-gpuuuid": "GPU-x,{h200-node:1}"}, "h200-node", 1),  # specify_uuid_to_use.yaml
        ({"nvidia.com/nouse-gpuuuid": "{a100-node:0},{a100-node:1},{h200-node:0}"}, "h200-node", 1),
        ({"nvidia.com/use-gpuuuid": "{a100-node:1}", "nvidia.com/use-gputype": "A100"}, "a100-node", 1),
    ],
    ids=[
        "type-list",
        "type-any-case",
        "type-part-of-product",
        "type-excluded",
        "blank-entries",
        "uuid-list",
        "uuids-excluded",
        "type-and-uuid",
    ],
)
def test_hami_model_and_uuid_annotations_choose_the_gpu(
    api: FakeApi, annotations: dict[str, str], node: str, gpu_index: int | None
) -> None:
    resolved = resolve(annotations)
    cache, framework = make(api)
    api.add_pod(
        pod_object(
            "p", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000}, scheduler="hami-scheduler", annotations=resolved
        )
    )
    schedule(cache, framework)
    where, shares = placed(api, "p")
    assert where == node
    assert shares[0]["memoryMiB"] == 3000
    if gpu_index is not None:
        assert shares[0]["uuid"] == uuids(node)[gpu_index]


@pytest.mark.parametrize(
    ("annotations", "limits", "reason"),
    [
        (
            {"nvidia.com/use-gputype": "V100"},
            {"nvidia.com/gpu": 1},
            "2 no GPU of the models asked for (nvidia.com/use-gputype, nvidia.com/nouse-gputype)",
        ),
        (
            {"nvidia.com/use-gpuuuid": "GPU-03f69c50-207a-2038-9b45-23cac89cb67d"},  # the example's own UUID
            {"nvidia.com/gpu": 1},
            "2 no GPU with the UUIDs asked for (nvidia.com/use-gpuuuid, nvidia.com/nouse-gpuuuid)",
        ),
        ({"nvidia.com/use-gpuuuid": "{h200-node:0}"}, {"nvidia.com/gpu": 2}, "too few whole free GPUs"),
    ],
    ids=["no-such-type", "no-such-uuid", "fewer-allowed-gpus-than-asked"],
)
def test_a_constraint_no_gpu_meets_keeps_the_pod_pending_saying_why(
    api: FakeApi, annotations: dict[str, str], limits: dict[str, int], reason: str
) -> None:
    resolved = resolve(annotations)
    cache, framework = make(api)
    api.add_pod(pod_object("p", limits, scheduler="hami-scheduler", annotations=resolved))
    schedule(cache, framework)
    assert placed(api, "p") == ("", [])
    assert any(reason in message for message in reasons(api, "p")), reasons(api, "p")


def test_memory_in_percent_is_booked_per_gpu_in_mib(api: FakeApi) -> None:
    cache, framework = make(api)
    limits = {"nvidia.com/gpu": 2, "nvidia.com/gpumem-percentage": 50, "nvidia.com/gpucores": 30}
    api.add_pod(pod_object("fraction", limits, scheduler="hami-scheduler"))  # use_memory_fraction.yaml
    schedule(cache, framework)
    _, shares = placed(api, "fraction")
    assert [(s["coreMilli"], s["memoryMiB"]) for s in shares] == [(300, GIB16 // 2)] * 2
    assert len({s["uuid"] for s in shares}) == 2
    # 60 % of memory no longer fits beside 50 % on those GPUs: two more such pods need the other node
    for name in ("b", "c"):
        api.add_pod(
            pod_object(name, {"nvidia.com/gpu": 2, "nvidia.com/gpumem-percentage": 60}, scheduler="hami-scheduler")
        )
    schedule(cache, framework)
    nodes = {placed(api, n)[0] for n in ("fraction", "b", "c")}
    assert nodes == {"a100-node", "h200-node", ""}
    pending = next(n for n in ("b", "c") if placed(api, n)[0] == "")
    assert any("insufficient gpu-memory" in m for m in reasons(api, pending))


@pytest.mark.parametrize(
    ("node_policy", "gpu_policy", "same_node", "same_gpu"),
    [
        ("binpack", "binpack", True, True),
        ("binpack", "spread", True, False),
        ("spread", "binpack", False, True),  # specify_scheduling_policy.yaml
        ("spread", "spread", False, True),  # each on an empty node: GPU 0 of each
    ],
)
def test_hami_node_and_gpu_policies(
    api: FakeApi, node_policy: str, gpu_policy: str, same_node: bool, same_gpu: bool
) -> None:
    cache, framework = make(api)
    annotations = {"hami.io/node-scheduler-policy": node_policy, "hami.io/gpu-scheduler-policy": gpu_policy}
    limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 2000, "nvidia.com/gpucores": 20}
    api.add_pod(pod_object("first", limits, scheduler="hami-scheduler", annotations=annotations))
    schedule(cache, framework)
    api.add_pod(pod_object("second", limits, scheduler="hami-scheduler", annotations=annotations))
    schedule(cache, framework)
    (node1, [share1]), (node2, [share2]) = placed(api, "first"), placed(api, "second")
    assert (node1 == node2) == same_node
    index1, index2 = (uuids(node1).index(share1["uuid"]), uuids(node2).index(share2["uuid"]))
    assert (index1 == index2) == same_gpu
    policy = json.loads(api.pods["default/second"]["metadata"]["annotations"][HAMI.annotations.assignment])["policy"]
    assert policy == f"{node_policy}/{gpu_policy}"


def test_a_policy_value_named_nowhere_here_falls_back_to_the_default_part(api: FakeApi) -> None:
    """HAMi falls back to its defaults for a policy it does not know; here the default part of the
    scheduler's policy takes over (`topology-aware` needs NVLink scores the kit's nodes do not publish)."""
    cache, framework = make(api)
    api.add_pod(
        pod_object(
            "p",
            {"nvidia.com/gpu": 1},
            scheduler="hami-scheduler",
            annotations={"hami.io/gpu-scheduler-policy": "topology-aware"},
        )
    )
    schedule(cache, framework)
    assert placed(api, "p")[0] in ("a100-node", "h200-node")
    policy = json.loads(api.pods["default/p"]["metadata"]["annotations"][HAMI.annotations.assignment])["policy"]
    assert policy == "packfrag/packfrag"  # the conf's default for both parts


@pytest.mark.parametrize(
    ("annotations", "same_node", "same_gpu", "policy"),
    [
        ({}, True, False, "binpack/spread"),  # HAMi's defaults: binpack nodes, spread cards
        ({"hami.io/node-scheduler-policy": "spread"}, False, True, "spread/spread"),  # the GPU part from the default
        ({"hami.io/gpu-scheduler-policy": "binpack"}, True, True, "binpack/binpack"),  # the node part from it
    ],
    ids=["no-annotation", "node-policy-only", "gpu-policy-only"],
)
def test_a_split_default_policy_is_hamis_binpack_nodes_and_spread_cards(
    api: FakeApi, annotations: dict[str, str], same_node: bool, same_gpu: bool, policy: str
) -> None:
    names = (HAMI.scheduler_name, *HAMI.scheduler_aliases)
    live = live_cache(HAMI, names, api, bind_workers=2, retry_seconds=0.0)
    api.attach(live.cache)
    for node in api.nodes.values():
        live.cache.on_node("ADDED", node)
    conf = parse_conf(
        'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n'
        "  - name: gpushare\n    arguments: {gpushare.policy: binpack/spread}\n"
    )
    framework = Framework(conf, builtin_registry(), BuildContext(protocol=HAMI))
    limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 2000, "nvidia.com/gpucores": 20}
    for name in ("first", "second"):
        api.add_pod(pod_object(name, limits, scheduler="hami-scheduler", annotations=annotations))
        schedule(live, framework)
    (node1, [share1]), (node2, [share2]) = placed(api, "first"), placed(api, "second")
    assert (node1 == node2) == same_node
    assert (uuids(node1).index(share1["uuid"]) == uuids(node2).index(share2["uuid"])) == same_gpu
    assert (
        json.loads(api.pods["default/second"]["metadata"]["annotations"][HAMI.annotations.assignment])["policy"]
        == policy
    )


def test_a_policy_naming_no_policy_here_is_refused_in_the_conf() -> None:
    plugin = "  - name: gpushare\n    arguments: {gpushare.policy: binpack/topology-aware}\n"
    conf = parse_conf(f'actions: "allocate"\ntiers:\n- plugins:\n{plugin}')
    with pytest.raises(Exception, match="unknown policy 'binpack/topology-aware'"):
        Framework(conf, builtin_registry(), BuildContext(protocol=HAMI))


def test_a_hami_pod_under_the_default_protocol_is_warned_about_each_name(api: FakeApi) -> None:
    protocol = KitProtocol.default()
    cache, framework = make(api, protocol)
    annotations = {"nvidia.com/use-gputype": "A100"}
    api.add_pod(pod_object("hami", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000}, annotations=annotations))
    schedule(cache, framework)
    warned = [m for pod, reason, m in api.events if pod == "hami" and reason == PEER_NAME_REASON]
    assert [m.split(" is ")[0] for m in warned] == [
        "annotation nvidia.com/use-gputype",
        "resource nvidia.com/gpu",
        "resource nvidia.com/gpumem",
    ]
    assert all("preset" in m for m in warned)
    schedule(cache, framework)  # once per pod, not per session
    assert len([1 for pod, reason, _ in api.events if pod == "hami" and reason == PEER_NAME_REASON]) == 3
    assert any("Insufficient nvidia.com/gpu" in m for m in reasons(api, "hami"))


def test_gpu_memory_alone_without_cpu_is_not_held_back_by_queue_fairness(api: FakeApi) -> None:
    """gpushare's samples and HAMi's example.yaml ask for GPU memory alone and no CPU: such a pod still
    asks for something, so a queue already running a pod is not 'overused' for it (proportion)."""
    cache, framework = make(api)
    for name in ("first", "second", "third"):
        pod = pod_object(name, {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000}, scheduler="hami-scheduler")
        del pod["spec"]["containers"][0]["resources"]["requests"]
        api.add_pod(pod)
        schedule(cache, framework)
    assert all(placed(api, n)[0] for n in ("first", "second", "third")), api.events


def test_hamis_task_priority_is_no_resource_the_scheduler_counts(api: FakeApi) -> None:
    """`nvidia.com/priority` (HAMi's task priority, `ignoredByScheduler` in HAMi's chart) does not keep
    the pod Pending as an extended resource no node offers, and draws no UnsupportedName warning."""
    cache, framework = make(api)
    limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 2000, "nvidia.com/priority": 1}
    api.add_pod(pod_object("prio", limits, scheduler="hami-scheduler"))
    schedule(cache, framework)
    assert placed(api, "prio")[0] in ("a100-node", "h200-node")
    assert not [m for pod, reason, m in api.events if pod == "prio" and reason == PEER_NAME_REASON]

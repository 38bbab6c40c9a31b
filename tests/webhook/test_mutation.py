"""What the mutating webhook adds to a new pod, as a table: the scheduler's name in standalone mode,
HAMi's GPU count default under its names (HAMi's `MutateAdmission`: memory, cores or a memory
percentage in limits without `nvidia.com/gpu` get `nvidia.com/gpu: 1`), HAMi's opt-out label."""

from __future__ import annotations

from typing import Any, cast

import pytest

from runtimekit.kube.objects import Pod
from runtimekit.protocol import KitProtocol
from runtimekit.protocol.presets import preset_protocol
from runtimekit.webhook.mutation import pod_patch, pointer
from runtimekit.webhook.settings import SchedulerMode, WebhookSettings

KIT = WebhookSettings(KitProtocol.default())
HAMI = WebhookSettings(preset_protocol("hami"))
KIT_NAME = "lj-runtimekit-scheduler"


def pod(*limits: dict[str, Any], scheduler: str | None = None, labels: dict[str, str] | None = None) -> Pod:
    spec: dict[str, Any] = {
        "containers": [{"name": f"c{i}", "resources": {"limits": lim}} for i, lim in enumerate(limits)]
    }
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    return cast(Pod, {"metadata": {"name": "p", "labels": labels or {}}, "spec": spec})


def name_op(op: str = "add") -> dict[str, Any]:
    return {"op": op, "path": "/spec/schedulerName", "value": KIT_NAME}


CASES = [
    ("no GPU: nothing", KIT, pod({"cpu": "1"}), []),
    ("a share with no scheduler named", KIT, pod({"aliyun.com/gpu-core.percentage": "30"}), [name_op()]),
    (
        "a whole GPU on default-scheduler",
        KIT,
        pod({"aliyun.com/gpu": "1"}, scheduler="default-scheduler"),
        [name_op("replace")],
    ),
    ("an empty schedulerName", KIT, pod({"aliyun.com/gpu": "1"}, scheduler=""), [name_op("replace")]),
    ("a MIG slice", KIT, pod({"aliyun.com/mig-1g.18gb": "1"}), [name_op()]),
    ("another scheduler is kept", KIT, pod({"aliyun.com/gpu": "1"}, scheduler="volcano"), []),
    ("the kit's own name already", KIT, pod({"aliyun.com/gpu": "1"}, scheduler=KIT_NAME), []),
    (
        "extender mode names the kube-scheduler profile that calls the extender",
        WebhookSettings(KitProtocol.default(), SchedulerMode.EXTENDER),
        pod({"aliyun.com/gpu": "1"}),
        [name_op()],
    ),
    (
        "extender mode with another profile name",
        WebhookSettings(KitProtocol.default(), SchedulerMode.EXTENDER, extender_profile="gpu-scheduler"),
        pod({"aliyun.com/gpu": "1"}, scheduler="default-scheduler"),
        [{"op": "replace", "path": "/spec/schedulerName", "value": "gpu-scheduler"}],
    ),
    (
        "extender mode through the cluster's own kube-scheduler leaves every pod as it is",
        WebhookSettings(KitProtocol.default(), SchedulerMode.EXTENDER, extender_profile="default-scheduler"),
        pod({"aliyun.com/gpu": "1"}),
        [],
    ),
    (
        "extender mode keeps another scheduler's pod",
        WebhookSettings(KitProtocol.default(), SchedulerMode.EXTENDER),
        pod({"aliyun.com/gpu": "1"}, scheduler="volcano"),
        [],
    ),
    (
        "hami: memory alone gets one GPU",
        HAMI,
        pod({"nvidia.com/gpumem": "3000"}),
        [{"op": "add", "path": "/spec/containers/0/resources/limits/nvidia.com~1gpu", "value": "1"}, name_op()],
    ),
    (
        "hami: cores alone, in the second container",
        HAMI,
        pod({"cpu": "1"}, {"nvidia.com/gpucores": "30"}),
        [{"op": "add", "path": "/spec/containers/1/resources/limits/nvidia.com~1gpu", "value": "1"}, name_op()],
    ),
    (
        "hami: a percentage alone",
        HAMI,
        pod({"nvidia.com/gpumem-percentage": "50"}),
        [{"op": "add", "path": "/spec/containers/0/resources/limits/nvidia.com~1gpu", "value": "1"}, name_op()],
    ),
    ("hami: a count given is kept", HAMI, pod({"nvidia.com/gpu": "2", "nvidia.com/gpumem": "3000"}), [name_op()]),
    (
        "hami: opted out by its label",
        HAMI,
        pod({"nvidia.com/gpumem": "3000"}, labels={"hami.io/webhook": "ignore"}),
        [],
    ),
    (
        "the label means nothing under the kit's names",
        KIT,
        pod({"aliyun.com/gpu": "1"}, labels={"hami.io/webhook": "ignore"}),
        [name_op()],
    ),
    ("no HAMi default under the kit's names", KIT, pod({"aliyun.com/gpu-memory": "8"}), [name_op()]),
]


@pytest.mark.parametrize(("name", "settings", "given", "operations"), CASES, ids=[c[0] for c in CASES])
def test_pod_patch(name: str, settings: WebhookSettings, given: Pod, operations: list[dict[str, Any]]) -> None:
    assert pod_patch(given, settings) == operations


def test_pointers_escape_slashes_and_tildes() -> None:
    assert pointer("spec", "a/b", "c~d") == "/spec/a~1b/c~0d"


def test_hamis_runtime_class_and_overwrite_env_knobs() -> None:
    """HAMi's `runtimeClassName` (a GPU pod naming no RuntimeClass gets it) and `overwriteEnv` (every
    container asking for no GPU, in any pod, gets NVIDIA_VISIBLE_DEVICES=none), applied as the API
    server applies the JSONPatch."""
    from runtimekit.cluster.apiserver.patch import json_patch

    settings = WebhookSettings(preset_protocol("hami"), runtime_class="nvidia", overwrite_env=True)
    gpu = pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000"}, {"cpu": "1"})
    gpu["spec"]["containers"][1]["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    gpu["spec"]["initContainers"] = [{"name": "init", "image": "busybox"}]
    patched = json_patch(gpu, pod_patch(gpu, settings))
    spec = patched["spec"]
    assert spec["runtimeClassName"] == "nvidia"
    assert spec["schedulerName"] == KIT_NAME
    assert "env" not in spec["containers"][0]  # the GPU container sees its GPUs
    assert spec["containers"][1]["env"][-1] == {"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}  # the later wins
    assert spec["initContainers"][0]["env"] == [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}]
    own = pod({"nvidia.com/gpu": "1"})
    own["spec"]["runtimeClassName"] = "kata"
    assert json_patch(own, pod_patch(own, settings))["spec"]["runtimeClassName"] == "kata"  # the pod's own kept
    plain = pod({"cpu": "1"})
    assert json_patch(plain, pod_patch(plain, settings))["spec"]["containers"][0]["env"][0]["value"] == "none"
    assert "runtimeClassName" not in json_patch(plain, pod_patch(plain, settings))["spec"]
    assert pod_patch(plain, HAMI) == []  # both off by default
    ignored = pod({"cpu": "1"}, labels={"hami.io/webhook": "ignore"})
    assert pod_patch(ignored, settings) == []


def test_hamis_task_priority_becomes_cuda_task_priority_beside_hidden_gpus() -> None:
    """Under HAMi's names `nvidia.com/priority` in a container's limits gives it CUDA_TASK_PRIORITY, which
    HAMi-core reads; with overwrite_env on too, both land in the same env list."""
    from runtimekit.cluster.apiserver.patch import json_patch

    settings = WebhookSettings(preset_protocol("hami"), overwrite_env=True)
    asked = pod({"nvidia.com/gpu": "1", "nvidia.com/priority": "1"}, {"nvidia.com/priority": "0"})
    spec = json_patch(asked, pod_patch(asked, settings))["spec"]
    assert spec["containers"][0]["env"] == [{"name": "CUDA_TASK_PRIORITY", "value": "1"}]
    assert spec["containers"][1]["env"] == [
        {"name": "CUDA_TASK_PRIORITY", "value": "0"},
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"},
    ]
    assert not [op for op in pod_patch(pod({"aliyun.com/gpu": "1"}), KIT) if "env" in op["path"]]


@pytest.mark.parametrize(
    ("limits", "requests", "limit_cores", "request_cores"),
    [
        ({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "100"}, None, "100", None),
        (None, {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "100"}, "100", None),
        ({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "50"}, None, None, None),
        ({"nvidia.com/gpu": "1"}, None, "100", None),
        ({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "70"}, None, "70", None),
        (None, {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "55"}, None, "55"),
        ({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "8192"}, None, None, None),
        ({"nvidia.com/gpumem-percentage": "100"}, None, "100", None),  # the count defaulted first, then all cores
    ],
    ids=[
        "exclusive via percentage",
        "exclusive via percentage in requests only",
        "non-exclusive percentage",
        "no memory fields defaults to exclusive",
        "explicit cores remains unchanged",
        "explicit cores in requests remains unchanged",
        "memory size present treated as shareable",
        "percentage alone: count and cores",
    ],
)
def test_hamis_exclusive_core_default(
    limits: dict[str, str] | None, requests: dict[str, str] | None, limit_cores: str | None, request_cores: str | None
) -> None:
    """HAMi's TestMutateAdmissionDefaultsExclusiveCore: a card whose memory is all of it takes all its cores."""
    from runtimekit.cluster.apiserver.patch import json_patch

    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = dict(limits)
    if requests is not None:
        resources["requests"] = dict(requests)
    made = cast(Pod, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resources": resources}]}})
    patched = json_patch(made, pod_patch(made, HAMI))["spec"]["containers"][0]["resources"]
    assert (patched.get("limits") or {}).get("nvidia.com/gpucores") == limit_cores
    assert (patched.get("requests") or {}).get("nvidia.com/gpucores") == request_cores

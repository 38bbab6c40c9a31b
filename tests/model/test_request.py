from __future__ import annotations

from typing import Any

import pytest

from runtimekit.model import GpuKind, GpuRequest, RequestError, parse_pod_request
from runtimekit.protocol import KitProtocol
from runtimekit.protocol.presets import preset_protocol

P = KitProtocol.default()
GPU, CORE, MEM, MIG = P.resources.gpu, P.resources.core, P.resources.memory, P.resources.mig_prefix


def pod(*containers: dict[str, Any], init: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers)}
    if init:
        spec["initContainers"] = init
    return {"metadata": {"name": "p"}, "spec": spec}


def c(
    name: str = "main", limits: dict[str, Any] | None = None, requests: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {"name": name, "resources": {"limits": limits or {}, "requests": requests or {}}}


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        pytest.param({GPU: 2}, GpuRequest(GpuKind.WHOLE, 2), id="whole"),
        pytest.param({CORE: 30, MEM: 4}, GpuRequest(GpuKind.SHARE, 1, 300, 4096), id="share"),
        pytest.param({CORE: 50}, GpuRequest(GpuKind.SHARE, 1, 500, None), id="share-proportional-memory"),
        pytest.param({MEM: 8}, GpuRequest(GpuKind.SHARE, 1, 0, 8192), id="memory-only"),
        pytest.param({GPU: 2, CORE: 50, MEM: 10}, GpuRequest(GpuKind.SHARE, 2, 500, 10240), id="multi-gpu-share"),
        pytest.param({f"{MIG}1g.10gb": 1}, GpuRequest(GpuKind.MIG, 1, 0, None, "1g.10gb", f"{MIG}1g.10gb"), id="mig"),
        pytest.param({GPU: "1"}, GpuRequest(GpuKind.WHOLE, 1), id="string-count"),
    ],
)
def test_container_requests(limits: dict[str, Any], expected: GpuRequest) -> None:
    request = parse_pod_request(pod(c(limits=limits, requests={"cpu": "1", "memory": "2Gi"})), P)
    assert request.cpu_milli == 1000
    assert request.memory_bytes == 2048 << 20
    assert [g.gpu for g in request.gpus] == [expected]


@pytest.mark.parametrize(
    ("limits", "reason"),
    [
        pytest.param({CORE: 150}, "above 100 %", id="core-over-100"),
        pytest.param({CORE: -5}, "must not be negative", id="negative"),
        pytest.param({CORE: "12.5"}, "whole number", id="fraction"),
        pytest.param({GPU: "500m"}, "whole number", id="milli-gpu"),
        pytest.param({GPU: 1, f"{MIG}1g.10gb": 1}, "MIG slice cannot be combined", id="mig-and-whole"),
        pytest.param({CORE: 10, f"{MIG}1g.10gb": 1}, "MIG slice cannot be combined", id="mig-and-share"),
        pytest.param({f"{MIG}1g.10gb": 1, f"{MIG}2g.20gb": 1}, "one MIG profile", id="two-mig-profiles"),
        pytest.param({CORE: 0, MEM: 0}, "both 0", id="zero-share"),
    ],
)
def test_invalid_requests_say_why(limits: dict[str, Any], reason: str) -> None:
    with pytest.raises(RequestError, match=reason):
        parse_pod_request(pod(c(limits=limits)), P)


def test_limits_win_for_extended_resources_and_requests_for_cpu() -> None:
    request = parse_pod_request(pod(c(limits={"cpu": "4", CORE: 20}, requests={"cpu": "2", CORE: 20})), P)
    assert request.cpu_milli == 2000
    assert request.gpus[0].gpu.core_milli == 200


def test_several_containers_and_init_containers() -> None:
    request = parse_pod_request(
        pod(
            c("a", limits={CORE: 20, "cpu": "1"}),
            c("b", limits={GPU: 1, "cpu": "500m"}),
            c("side", limits={"cpu": 1}),
            init=[c("init", limits={"cpu": "3", "memory": "1Gi"})],
        ),
        P,
    )
    assert request.cpu_milli == 3000  # max(sum of app containers, largest init container)
    assert [(g.container, g.gpu.kind) for g in request.gpus] == [("a", GpuKind.SHARE), ("b", GpuKind.WHOLE)]
    assert request.gpu_milli == 1200


def test_gpu_in_init_container_is_refused() -> None:
    with pytest.raises(RequestError, match="init container"):
        parse_pod_request(pod(c(), init=[c("init", limits={GPU: 1})]), P)


@pytest.mark.parametrize(
    "bad",
    [
        {},
        {"spec": {}},
        {"spec": {"containers": []}},
        {"spec": {"containers": ["x"]}},
        {"spec": {"containers": [{"name": "a", "resources": []}]}},
    ],
)
def test_malformed_pods(bad: dict[str, Any]) -> None:
    with pytest.raises(RequestError):
        parse_pod_request(bad, P)


def test_memory_unit_comes_from_the_protocol() -> None:
    from runtimekit.protocol import parse_protocol_text

    small = parse_protocol_text("memoryUnit: 256Mi")
    request = parse_pod_request(pod(c(limits={CORE: 10, MEM: 3})), small)
    assert request.gpus[0].gpu.memory_mib == 768


def test_memory_on_a_gpu() -> None:
    assert GpuRequest(GpuKind.WHOLE, 1).memory_on(16384) == 16384
    assert GpuRequest(GpuKind.SHARE, 1, 250, None).memory_on(16384) == 4096
    assert GpuRequest(GpuKind.SHARE, 1, 333, None).memory_on(1000) == 333
    assert GpuRequest(GpuKind.SHARE, 1, 500, 100).memory_on(16384) == 100


@pytest.mark.parametrize(
    ("containers", "expected"),
    [
        pytest.param(
            [c(limits={"nvidia.com/gpu": 2})], (("nvidia.com/gpu", 2),), id="limits only: requests default to them"
        ),
        pytest.param(
            [c(limits={"example.com/foo": 1}), c("b", requests={"example.com/foo": 2})],
            (("example.com/foo", 3),),
            id="summed over containers",
        ),
        pytest.param(
            [c(requests={"ephemeral-storage": "1Ki", "hugepages-2Mi": "4Mi"})],
            (("ephemeral-storage", 1024), ("hugepages-2Mi", 4 << 20)),
            id="storage and huge pages in bytes",
        ),
        pytest.param(
            [c(limits={CORE: 30, MEM: 2}), c("m", limits={f"{MIG}1g.10gb": 1})],
            (),
            id="the kit's own resources are not scalars",
        ),
    ],
)
def test_scalar_resources(containers: list[dict[str, Any]], expected: tuple[tuple[str, int], ...]) -> None:
    assert parse_pod_request(pod(*containers), P).scalars == expected


@pytest.mark.parametrize(
    ("limits", "reason"),
    [
        pytest.param({"example.com/foo": "500m"}, "must be a whole number", id="a fraction of an extended resource"),
        pytest.param({"example.com/foo": "-1"}, "must not be negative", id="negative"),
        pytest.param({"example.com/foo": "1e30"}, "beyond any node", id="beyond any node"),
        pytest.param({"cpu": "1e30"}, "beyond any node", id="cpu beyond any node"),
    ],
)
def test_unusable_scalar_amounts_say_why(limits: dict[str, Any], reason: str) -> None:
    with pytest.raises(RequestError, match=reason):
        parse_pod_request(pod(c(limits=limits)), P)


def test_sidecars_add_to_the_pod_and_to_the_init_containers_after_them() -> None:
    sidecar = {**c("proxy", requests={"cpu": "200m", "example.com/foo": 1}), "restartPolicy": "Always"}
    late_init = c("migrate", requests={"cpu": "1", "example.com/foo": 1})
    request = parse_pod_request(pod(c(requests={"cpu": "500m"}), init=[sidecar, late_init]), P)
    # app + sidecar = 700m; the later init runs beside the sidecar: 1000m + 200m = 1200m is the peak
    assert request.cpu_milli == 1200
    assert request.scalars == (("example.com/foo", 2),)


@pytest.mark.parametrize(
    ("limits", "empty"),
    [
        pytest.param({}, True, id="nothing"),
        pytest.param({f"{MIG}1g.10gb": 1}, False, id="a MIG slice only"),
        pytest.param({"example.com/foo": 1}, False, id="an extended resource only"),
    ],
)
def test_only_a_pod_asking_nothing_at_all_is_empty(limits: dict[str, Any], empty: bool) -> None:
    assert parse_pod_request(pod(c(limits=limits)), P).is_empty is empty


# -- requests under the peers' presets (HAMi's examples/nvidia, Volcano's vGPU examples) ---------------
HAMI = preset_protocol("hami")
VOLCANO = preset_protocol("volcano-vgpu")
H100_MIB = 81559


@pytest.mark.parametrize(
    ("limits", "kind", "count", "core", "memory_on_h100"),
    [
        # default_use.yaml: 1 GPU, 3000 MiB, 30 % of its cores
        ({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000, "nvidia.com/gpucores": 30}, GpuKind.SHARE, 1, 300, 3000),
        # use_memory_fraction.yaml: 2 GPUs, 50 % of each one's memory, 30 % of its cores
        (
            {"nvidia.com/gpu": 2, "nvidia.com/gpumem-percentage": 50, "nvidia.com/gpucores": 30},
            GpuKind.SHARE,
            2,
            300,
            H100_MIB // 2,
        ),
        # use_exclusive_card.yaml: 100 % of memory and cores on 2 GPUs
        (
            {"nvidia.com/gpu": 2, "nvidia.com/gpumem-percentage": 100, "nvidia.com/gpucores": 100},
            GpuKind.SHARE,
            2,
            1000,
            H100_MIB,
        ),
        # use_as_normal.yaml / default_use_legacy.yaml: whole GPUs
        ({"nvidia.com/gpu": 2}, GpuKind.WHOLE, 2, 1000, H100_MIB),
        # cores without memory: the card's whole memory (HAMi's default of 100 %)
        ({"nvidia.com/gpu": 1, "nvidia.com/gpucores": 30}, GpuKind.SHARE, 1, 300, H100_MIB),
        # all of the memory and no compute share: HAMi makes it exclusive
        ({"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 100}, GpuKind.WHOLE, 1, 1000, H100_MIB),
        # memory without cores: no compute guarantee (HAMi's defaultCores 0)
        ({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000}, GpuKind.SHARE, 1, 0, 3000),
        # gpumem 0 and gpumem-percentage 0 read as not given
        ({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 0, "nvidia.com/gpucores": 20}, GpuKind.SHARE, 1, 200, H100_MIB),
        (
            {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 0, "nvidia.com/gpucores": 20},
            GpuKind.SHARE,
            1,
            200,
            H100_MIB,
        ),
        # an amount wins over a percentage, as in HAMi
        (
            {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 2048, "nvidia.com/gpumem-percentage": 50},
            GpuKind.SHARE,
            1,
            0,
            2048,
        ),
        # a percentage alone (no count): one GPU
        ({"nvidia.com/gpumem-percentage": 25}, GpuKind.SHARE, 1, 0, H100_MIB // 4),
        # HAMi's TestDevices_Fit "fit success: but core limit can't exceed 100": clamped to 100
        ({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 512, "nvidia.com/gpucores": 120}, GpuKind.SHARE, 1, 1000, 512),
    ],
    ids=[
        "default-use",
        "memory-fraction",
        "exclusive-card",
        "as-normal",
        "cores-only-whole-memory",
        "all-memory-no-cores-is-whole",
        "memory-only",
        "memory-zero-is-none",
        "percent-zero-is-none",
        "amount-wins",
        "percent-alone",
        "cores-above-100-clamped",
    ],
)
def test_hami_requests(limits: dict[str, int], kind: GpuKind, count: int, core: int, memory_on_h100: int) -> None:
    [container] = parse_pod_request(pod(c(limits=limits)), HAMI).gpus
    assert (container.gpu.kind, container.gpu.count, container.gpu.core_milli) == (kind, count, core)
    assert container.gpu.memory_on(H100_MIB) == memory_on_h100


def test_a_percentage_is_of_each_gpus_own_memory() -> None:
    [container] = parse_pod_request(pod(c(limits={"nvidia.com/gpumem-percentage": 40})), HAMI).gpus
    assert [container.gpu.memory_on(m) for m in (81920, 40960, 15360)] == [32768, 16384, 6144]
    assert container.gpu.memory_mib is None
    assert not container.gpu.fixed_memory


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"nvidia.com/gpumem-percentage": 101}, "nvidia.com/gpumem-percentage is 101, above 100 %"),
        ({"nvidia.com/gpumem": 3000}, "nvidia.com/gpumem alone is not allocated by kubelet"),
        ({"nvidia.com/gpucores": 30, "nvidia.com/mig-1g.10gb": 1}, "a MIG slice cannot be combined"),
    ],
    ids=["percent-above-100", "memory-alone-never-reaches-the-device-plugin", "mig-and-share"],
)
def test_bad_hami_requests_say_why(limits: dict[str, int], message: str) -> None:
    with pytest.raises(RequestError, match=message):
        parse_pod_request(pod(c(limits=limits)), HAMI)


def test_volcano_vgpu_never_fits_cores_above_100_so_they_stay_refused() -> None:
    # Volcano's vGPU predicate (UsedCore + Coresreq > 100) fits 120 nowhere, where HAMi clamps it to 100
    limits = {"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-cores": 120}
    with pytest.raises(RequestError, match="above 100 % of one GPU"):
        parse_pod_request(pod(c(limits=limits)), VOLCANO)


def test_volcano_names_and_their_older_aliases() -> None:
    # vgpu-case03.yml: two containers, 2 vGPUs each, 2000 and 3000 MiB
    request = parse_pod_request(
        pod(
            c("a", {"volcano.sh/vgpu-number": 2, "volcano.sh/vgpu-memory": 2000}),
            c("b", {}),
            c("c", {"volcano.sh/vgpu-number": 2, "volcano.sh/vgpu-memory": 3000}),
        ),
        VOLCANO,
    )
    assert [(g.container, g.gpu.count, g.gpu.memory_mib) for g in request.gpus] == [("a", 2, 2000), ("c", 2, 3000)]
    [older] = parse_pod_request(
        pod(c(limits={"volcano.sh/gpu-number": 1, "volcano.sh/gpu-memory": 1024})), VOLCANO
    ).gpus
    assert (older.gpu.count, older.gpu.memory_mib) == (1, 1024)
    with pytest.raises(RequestError, match="volcano.sh/vgpu-memory and volcano.sh/gpu-memory name the same resource"):
        parse_pod_request(pod(c(limits={"volcano.sh/vgpu-memory": 1, "volcano.sh/gpu-memory": 1})), VOLCANO)


def test_the_names_of_a_preset_are_not_scalars_and_the_default_protocol_is_unchanged() -> None:
    request = parse_pod_request(
        pod(c(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 10, "example.com/nic": 1})), HAMI
    )
    assert request.scalars == (("example.com/nic", 1),)
    [default] = parse_pod_request(pod(c(limits={CORE: 30})), P).gpus
    assert default.gpu.memory_on(H100_MIB) == 30 * H100_MIB // 100  # in proportion to the compute share
    assert parse_pod_request(pod(c(limits={"nvidia.com/gpumem": 5})), P).scalars == (("nvidia.com/gpumem", 5),)


def test_pods_asking_alike_share_one_parse_under_one_protocol_only() -> None:
    """Pods made from one template ask alike: the second is not parsed again (the same request
    object comes back), while another protocol, other amounts, or amounts written as numbers are
    parsed on their own, and a refused request is refused every time."""
    limits = {CORE: "30", MEM: "4"}
    first = parse_pod_request(pod(c(limits=limits, requests={"cpu": "2"})), P)
    again = parse_pod_request(pod(c(limits=dict(limits), requests={"cpu": "2"})), P)
    assert again is first
    other = preset_protocol("hami")
    hami = parse_pod_request(pod(c(limits={other.resources.core: "30"}, requests={"cpu": "2"})), other)
    assert hami is not first
    assert (
        parse_pod_request(pod(c(limits={CORE: "30", MEM: "8"}, requests={"cpu": "2"})), P).gpus[0].gpu
        != first.gpus[0].gpu
    )
    as_numbers = parse_pod_request(pod(c(limits={CORE: 30, MEM: 4}, requests={"cpu": 2})), P)
    assert as_numbers == first
    assert as_numbers is not first
    for _ in range(2):
        with pytest.raises(RequestError, match="above 100"):
            parse_pod_request(pod(c(limits={CORE: "130"})), P)
    with_init = pod(c(limits=limits, requests={"cpu": "2"}), init=[c("setup", requests={"cpu": "8"})])
    assert parse_pod_request(with_init, P).cpu_milli == 8000  # an init container's peak is not a plain pod's

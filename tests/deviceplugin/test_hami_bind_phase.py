"""Under HAMi's names the device plugin also writes HAMi's `hami.io/bind-phase: success` once every
GPU container of the pod has its devices (HAMi's device plugin: PodAllocationSuccess after the last
container), beside the kit's own allocated record; under other names it writes only its own."""

from __future__ import annotations

from dp_helpers import StackFactory, gpu_pod

from runtimekit.deviceplugin.matching import parse_allocated
from runtimekit.protocol import KitProtocol
from runtimekit.protocol.presets import preset_protocol

H200 = 143771
HAMI = preset_protocol("hami")


def test_bind_phase_is_success_once_every_gpu_container_is_allocated(make_stack: StackFactory) -> None:
    stack = make_stack(isolation="hami-core", protocol=HAMI)
    g0, g1 = stack.gpus
    gpu = HAMI.resources.gpu
    containers = [("a", {gpu: 1}, [(g0, 0, 1000, H200)]), ("b", {gpu: 1}, [(g1, 1, 1000, H200)]), ("c", {}, [])]
    stack.kube.add(gpu_pod("p", containers))
    stack.service.allocate(gpu, [g0])
    notes = stack.kube.annotations("default", "p")
    assert parse_allocated(notes[HAMI.annotations.allocated]) == {"a": (gpu,)}
    assert "hami.io/bind-phase" not in notes  # container b still waits
    stack.service.allocate(gpu, [g1])
    assert stack.kube.annotations("default", "p")["hami.io/bind-phase"] == "success"


def test_other_names_get_no_hami_annotation(make_stack: StackFactory) -> None:
    stack = make_stack()
    g0, _ = stack.gpus
    gpu = KitProtocol.default().resources.gpu
    stack.kube.add(gpu_pod("p", [("a", {gpu: 1}, [(g0, 0, 1000, H200)])]))
    stack.service.allocate(gpu, [g0])
    assert not any(key.startswith("hami.io/") for key in stack.kube.annotations("default", "p"))

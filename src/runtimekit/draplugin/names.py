"""The names the DRA plugin publishes under: its driver, its DeviceClasses, its CDI kind.

The kit's own names by default (driver and class `gpu.runtimekit.aliyun.com`, class
`mig.runtimekit.aliyun.com`); under the `nvidia` protocol preset NVIDIA's k8s-dra-driver-gpu names
(`gpu.nvidia.com`, `mig.nvidia.com`), so claims written for NVIDIA's driver, whose CEL reads
`device.attributes['gpu.nvidia.com']`, select the kit's devices unchanged. Called by the plugin's
command line, the slice builder and `runtimekit up` (the DeviceClasses).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from runtimekit.kube.objects.dra import DeviceClass
from runtimekit.protocol import KitProtocol
from runtimekit.protocol.presets import preset_protocol

KIT_DRIVER = "gpu.runtimekit.aliyun.com"
KIT_MIG_CLASS = "mig.runtimekit.aliyun.com"
NVIDIA_DRIVER = "gpu.nvidia.com"
NVIDIA_MIG_CLASS = "mig.nvidia.com"


@dataclass(frozen=True)
class DraNames:
    driver: str
    gpu_class: str  # whole GPUs and shares of one (consumable capacity)
    mig_class: str  # MIG devices (partitionable devices)

    @property
    def cdi_kind(self) -> str:
        """The CDI kind of the plugin's specs: one device per prepared request of a claim."""
        return f"{self.driver}/claim"

    def device_classes(self) -> list[DeviceClass]:
        """The DeviceClasses selecting this driver's whole or shared GPUs and its MIG devices."""
        return [
            _device_class(
                self.gpu_class, f"device.driver == '{self.driver}' && device.attributes['{self.driver}'].type == 'gpu'"
            ),
            _device_class(
                self.mig_class, f"device.driver == '{self.driver}' && device.attributes['{self.driver}'].type == 'mig'"
            ),
        ]


def _device_class(name: str, expression: str) -> DeviceClass:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "lj-runtimekit"}},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


KIT_NAMES = DraNames(KIT_DRIVER, KIT_DRIVER, KIT_MIG_CLASS)
NVIDIA_NAMES = DraNames(NVIDIA_DRIVER, NVIDIA_DRIVER, NVIDIA_MIG_CLASS)


def dra_names(protocol: KitProtocol) -> DraNames:
    """NVIDIA's names for a protocol with the `nvidia` preset's resources, else the kit's."""
    return NVIDIA_NAMES if protocol.resources == _nvidia_resources() else KIT_NAMES


@functools.cache
def _nvidia_resources() -> object:
    return preset_protocol("nvidia").resources

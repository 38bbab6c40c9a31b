"""NVIDIA's DRA quickstart manifests (tests/data/nvidia-dra-quickstart, k8s-dra-driver-gpu's
demo/specs/quickstart/v1) under the `nvidia` preset: they apply unchanged with kubectl (their
DeviceClasses are the ones `runtimekit up` installs), and everything they select on or configure
exists in what the kit's plugin publishes and accepts: the attributes their CEL reads, the MIG
profiles they name, `matchAttribute: gpu.nvidia.com/parentUUID`, their GpuConfig sharing."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from dra_helpers import make_stack

from fixtures.apiserver import Kubectl
from runtimekit.cli.embedded_dra import install_device_classes
from runtimekit.cluster.apiserver.server import ApiServer
from runtimekit.draplugin.config import sharing_for
from runtimekit.draplugin.inventory import devices_and_counters
from runtimekit.draplugin.names import KIT_NAMES, NVIDIA_NAMES, dra_names
from runtimekit.model import MigMode
from runtimekit.protocol import KitProtocol
from runtimekit.protocol.presets import preset_protocol

DATA = Path(__file__).resolve().parents[1] / "data" / "nvidia-dra-quickstart"
FILES = sorted(DATA.glob("*.yaml"))
NVIDIA = preset_protocol("nvidia")
ATTRIBUTE = re.compile(r"device\.attributes\['gpu\.nvidia\.com'\]\.(\w+)")
PROFILE = re.compile(r"\.profile == '([^']+)'")


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def claim_specs(path: Path) -> list[dict[str, Any]]:
    """The claim specs of a file: of its ResourceClaims and ResourceClaimTemplates."""
    specs = []
    for doc in documents(path):
        if doc["kind"] == "ResourceClaim":
            specs.append(doc["spec"])
        elif doc["kind"] == "ResourceClaimTemplate":
            specs.append(doc["spec"]["spec"])
    return specs


def test_the_nvidia_preset_takes_nvidias_driver_names() -> None:
    assert dra_names(NVIDIA) == NVIDIA_NAMES
    assert dra_names(KitProtocol.default()) == KIT_NAMES
    assert dra_names(preset_protocol("hami")) == KIT_NAMES  # HAMi also says nvidia.com/gpu: not NVIDIA's driver


def test_up_installs_the_kits_device_classes_once(apiserver: ApiServer) -> None:
    assert install_device_classes(apiserver, KitProtocol.default()) == [KIT_NAMES.gpu_class, KIT_NAMES.mig_class]
    assert install_device_classes(apiserver, KitProtocol.default()) == []


@pytest.mark.slow  # one kubectl apply of seven files: about 5 s on a busy machine
def test_they_apply_unchanged(apiserver: ApiServer, kubectl: Kubectl) -> None:
    assert install_device_classes(apiserver, NVIDIA) == ["gpu.nvidia.com", "mig.nvidia.com"]
    assert install_device_classes(apiserver, NVIDIA) == []
    out = kubectl("apply", *(f"--filename={p}" for p in FILES)).stdout
    created = [line for line in out.splitlines() if line.endswith(" created")]
    assert len(created) == sum(len(documents(p)) for p in FILES), out
    classes = {r["exactly"]["deviceClassName"] for p in FILES for s in claim_specs(p) for r in s["devices"]["requests"]}
    assert classes == {"gpu.nvidia.com", "mig.nvidia.com"}  # both installed above


@pytest.fixture(scope="module")
def published() -> dict[str, list[dict[str, Any]]]:
    """What the plugin publishes under NVIDIA's names for A100s, GPU 1 in dynamic MIG mode: devices by type."""
    stack = make_stack(gpus="8xA100-40GB", mig_modes={1: MigMode.DYNAMIC})
    try:
        devices, _ = devices_and_counters(stack.devices.current())
    finally:
        stack.close()
    by_type: dict[str, list[dict[str, Any]]] = {"gpu": [], "mig": []}
    for device in devices:
        by_type[device.get("attributes", {})["type"]["string"]].append(dict(device))
    return by_type


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_what_they_select_and_configure_exists(published: dict[str, list[dict[str, Any]]], path: Path) -> None:
    for spec in claim_specs(path):
        devices = spec["devices"]
        for request in devices["requests"]:
            exact = request["exactly"]
            kind = {"gpu.nvidia.com": "gpu", "mig.nvidia.com": "mig"}[exact["deviceClassName"]]
            offered = published[kind]
            for selector in exact.get("selectors", []):
                expression = selector["cel"]["expression"]
                for attribute in ATTRIBUTE.findall(expression):
                    assert all(attribute in d["attributes"] for d in offered), (attribute, path.name)
                for profile in PROFILE.findall(expression):
                    assert any(d["attributes"]["profile"]["string"] == profile for d in offered), profile
        for constraint in devices.get("constraints", []):
            domain, name = constraint["matchAttribute"].split("/")
            assert domain == NVIDIA_NAMES.driver
            assert all(name in d["attributes"] for d in published["mig"])
        configs = [{"source": "FromClaim", **c} for c in devices.get("config", [])]
        for request in devices["requests"]:
            sharing_for(request["name"], configs, NVIDIA_NAMES.driver)  # raises for a config not accepted

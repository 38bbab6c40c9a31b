"""The runtime API's level and its features, each with the minimum runtime version that offers it.

This table is the one docs/runtime-api.md shows. The runtime advertises the features it has in
GetVersion; `runtimekit.api.runtime_client` refuses a missing one with a message naming the feature,
the runtime's version and the version the feature needs. Add a row for every addition; never remove
or rename one (the API only grows).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

API_LEVEL: Final = 1

# feature -> minimum runtime version
FEATURES: Final[Mapping[str, str]] = {
    "devices": "0.1.0",  # ListDevices
    "watch-devices": "0.1.0",  # WatchDevices stream
    "allocate": "0.1.0",  # Allocate, Release, ListAllocations
    "device-health": "0.1.0",  # SetDeviceHealth
    "exporter-data": "0.1.0",  # ExporterService.ExporterGetDataList
    "config": "0.1.0",  # ConfigService Enable, Disable, GetStatus
    "cdi": "0.1.0",  # CDI device names in AllocateResponse.cdi_devices
    "mig-devices": "0.1.0",  # Device.mig_devices and MIG UUIDs in Allocate
    "fault-injection": "0.1.0",  # AdminService.InjectFault (simulated backend only)
    "mig-shares": "0.1.0",  # GpuShare.parent_uuid/mig_profile/mig_start, dynamic MIG devices, GrantedShare.mig_*
    "mig-profiles": "0.1.0",  # Device.mig_profiles, MigDevice.dynamic
    "container-usage": "0.1.0",  # ExporterGetDataListResponse.container_usage/unattributed/usage_source
}

_NUMBERS = re.compile(r"^(\d+(?:\.\d+)*)")


def version_key(version: str) -> tuple[int, ...]:
    """The numeric release part of a version (`0.1.0.dev3` -> (0, 1, 0)); () when it has none."""
    match = _NUMBERS.match(version.strip().removeprefix("v"))
    return tuple(int(part) for part in match.group(1).split(".")) if match else ()


def at_least(version: str, minimum: str) -> bool:
    """Whether `version` is `minimum` or newer, comparing release numbers padded with zeros."""
    have, need = version_key(version), version_key(minimum)
    width = max(len(have), len(need))
    return have + (0,) * (width - len(have)) >= need + (0,) * (width - len(need))

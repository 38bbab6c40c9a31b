"""CDI specs for prepared claims: one spec file per claim, one CDI device per prepared request.

The container runtime (containerd 1.7+, CRI-O 1.23+) reads specs from its CDI folder and applies the
device's edits to each container kubelet names the device for. A request's device carries what the
node runtime answered for it (the same environment, device nodes and mounts as the device-plugin
path's Allocate); the runtime's own CDI device names go back to kubelet beside it. Files are written
atomically (a temporary file renamed over), named `<driver>-claim_<claim uid>.json` as CDI's
`<vendor>-<class>` convention asks, and removed when the claim is unprepared. Called by `service.py`.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb

CDI_VERSION = "0.6.0"  # device annotations; read by every CDI-enabled runtime kubelet 1.32+ runs with


@dataclass(frozen=True)
class CdiWriter:
    folder: Path
    kind: str  # vendor/class, e.g. gpu.runtimekit.aliyun.com/claim

    def path(self, claim_uid: str) -> Path:
        vendor, cls = self.kind.split("/")
        return self.folder / f"{vendor}-{cls}_{claim_uid}.json"

    def device_name(self, claim_uid: str, request: str) -> str:
        return f"{claim_uid}-{request}"

    def device_id(self, claim_uid: str, request: str) -> str:
        """The fully qualified CDI device name kubelet passes to the container runtime."""
        return f"{self.kind}={self.device_name(claim_uid, request)}"

    def write(self, claim_uid: str, answers: Mapping[str, pb.AllocateResponse]) -> Path:
        """Write the claim's spec: a device per request with the runtime's container edits for it."""
        spec = {
            "cdiVersion": CDI_VERSION,
            "kind": self.kind,
            "devices": [
                {"name": self.device_name(claim_uid, request), **_device(answer)}
                for request, answer in sorted(answers.items())
            ],
        }
        self.folder.mkdir(parents=True, exist_ok=True)
        target = self.path(claim_uid)
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as out:
                json.dump(spec, out, indent=2, sort_keys=True)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return target

    def remove(self, claim_uid: str) -> None:
        self.path(claim_uid).unlink(missing_ok=True)


def _device(answer: pb.AllocateResponse) -> dict[str, object]:
    edits: dict[str, object] = {"env": [f"{k}={v}" for k, v in sorted(answer.envs.items())]}
    if answer.devices:
        edits["deviceNodes"] = [
            {"path": d.container_path, "hostPath": d.host_path, "permissions": d.permissions or "rw"}
            for d in answer.devices
        ]
    if answer.mounts:
        edits["mounts"] = [
            {
                "hostPath": m.host_path,
                "containerPath": m.container_path,
                "options": ["ro", "nosuid", "nodev", "bind"] if m.read_only else ["rw", "nosuid", "nodev", "bind"],
            }
            for m in answer.mounts
        ]
    device: dict[str, object] = {"containerEdits": edits}
    if answer.annotations:
        device["annotations"] = dict(sorted(answer.annotations.items()))
    return device

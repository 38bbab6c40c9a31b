"""The reasons and messages of the Events a kubelet writes about containers, in kubelet's words
(`pkg/kubelet/events` for the reasons, `kuberuntime` and the image manager for the messages), for
the Kubernetes version the API server reports: 1.33 writes `Created container: NAME` and `Started
container: NAME` where earlier versions wrote `Created container NAME`; 1.34 leaves the name to the
Event's `fieldPath` (`Container created`) and says an image present `can be accessed by the pod`.
Pure functions; the caller is `SimulatedKubelet`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PULLING, PULLED, CREATED, STARTED, KILLING, BACK_OFF = "Pulling", "Pulled", "Created", "Started", "Killing", "BackOff"
PULL_S = 1.0  # the pull time a simulated pull reports (nothing is pulled, nor waited for)
IMAGE_BYTES = 4_194_304  # the image size it reports


@dataclass(frozen=True)
class Wording:
    """Kubelet's messages as of one Kubernetes minor version."""

    minor: int = 33

    @classmethod
    def of_version(cls, version: object) -> Wording:
        """From the API server's `/version` body (`{"minor": "33+"}`); 1.33's wording when unreadable."""
        minor = version.get("minor") if isinstance(version, dict) else None
        match = re.match(r"\d+", str(minor or ""))
        return cls(int(match.group()) if match else cls.minor)

    def pulling(self, image: str) -> str:
        return f'Pulling image "{image}"'

    def pulled(self, image: str) -> str:
        text = f'Successfully pulled image "{image}" in {PULL_S:g}s ({PULL_S:g}s including waiting)'
        return text + (f". Image size: {IMAGE_BYTES} bytes." if self.minor >= 30 else "")

    def present(self, image: str) -> str:
        text = f'Container image "{image}" already present on machine'
        return text + (" and can be accessed by the pod" if self.minor >= 34 else "")

    def created(self, name: str) -> str:
        return self._container("Created", "created", name)

    def started(self, name: str) -> str:
        return self._container("Started", "started", name)

    def _container(self, verb: str, participle: str, name: str) -> str:
        if self.minor >= 34:
            return f"Container {participle}"
        return f"{verb} container: {name}" if self.minor >= 33 else f"{verb} container {name}"

    def killing(self, name: str) -> str:
        return f"Stopping container {name}"

    def back_off(self, name: str, pod: str, namespace: str, uid: str) -> str:
        return f"Back-off restarting failed container {name} in pod {pod}_{namespace}({uid})"


def pulls(policy: str, image: str, present: bool) -> bool:
    """Whether kubelet pulls the image: `Always`, or `IfNotPresent` (the default for a tagged image)
    when the node does not have it yet; `Never` never pulls."""
    if not policy:
        tag = image.rsplit("/", 1)[-1]
        policy = "IfNotPresent" if (":" in tag and not tag.endswith(":latest")) or "@" in image else "Always"
    return policy == "Always" or (policy == "IfNotPresent" and not present)

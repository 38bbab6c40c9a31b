"""The simulated kubelet's DRA helpers: which claims a pod has, and the environment CDI devices give."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

from runtimekit.cluster.kubelet.dradevices import cdi_env, pod_claims
from runtimekit.kube.objects import Pod


def test_pod_claims_by_name_and_through_the_template_controller() -> None:
    pod = {
        "spec": {
            "resourceClaims": [
                {"name": "shared", "resourceClaimName": "single-gpu"},
                {"name": "mine", "resourceClaimTemplateName": "single-gpu"},
                {"name": "later", "resourceClaimTemplateName": "t"},
            ]
        },
        "status": {"resourceClaimStatuses": [{"name": "mine", "resourceClaimName": "pod1-mine-x7k2p"}]},
    }
    assert pod_claims(cast(Pod, pod)) == {"shared": "single-gpu", "mine": "pod1-mine-x7k2p", "later": ""}


def test_cdi_env_applies_the_named_devices_in_order(tmp_path: Path) -> None:
    spec: dict[str, Any] = {
        "cdiVersion": "0.6.0",
        "kind": "k.example.com/claim",
        "devices": [
            {"name": "a", "containerEdits": {"env": ["X=1", "Y=a"]}},
            {"name": "b", "containerEdits": {"env": ["Y=b=c"]}},
        ],
    }
    (tmp_path / "k.example.com-claim_u.json").write_text(json.dumps(spec))
    assert cdi_env(tmp_path, ["k.example.com/claim=a", "k.example.com/claim=b"]) == {"X": "1", "Y": "b=c"}
    assert cdi_env(tmp_path, ["nvidia.com/gpu=GPU-1"]) == {}  # not ours: the real runtime's toolkit applies it

"""Reviews in, decisions out: which requests each endpoint judges, what an update is judged on, and the
AdmissionReview answer (base64 JSONPatch, refusals with their code and fields)."""

from __future__ import annotations

import base64
import json
from typing import Any, cast

from runtimekit.kube.objects import AdmissionRequest, AdmissionReview
from runtimekit.protocol import KitProtocol
from runtimekit.webhook import decide
from runtimekit.webhook.fleet import Fleet, NodeGpus
from runtimekit.webhook.review import respond
from runtimekit.webhook.settings import WebhookSettings

P = KitProtocol.default()
SETTINGS = WebhookSettings(P)
FLEET = Fleet((NodeGpus(8, 140, 1024),))
PODS = {"group": "", "version": "v1", "resource": "pods"}


def request(operation: str, obj: Any, old: Any = None, sub: str = "", user: str = "alice") -> AdmissionRequest:
    made: dict[str, Any] = {
        "uid": "u1",
        "operation": operation,
        "resource": PODS,
        "object": obj,
        "oldObject": old,
        "userInfo": {"username": user},
    }
    if sub:
        made["subResource"] = sub
    return cast(AdmissionRequest, made)


def gpu_pod(
    core: str = "30", annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "annotations": annotations or {}, "labels": labels or {}},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {P.resources.core: core}}}]},
    }


def test_mutate_only_patches_pod_creates() -> None:
    assert decide.mutate(request("CREATE", gpu_pod()), SETTINGS).patch
    assert not decide.mutate(request("UPDATE", gpu_pod(), gpu_pod()), SETTINGS).patch
    assert not decide.mutate(request("CREATE", {"metadata": {}}, sub="binding"), SETTINGS).patch


def test_validate_refuses_an_impossible_create_with_403() -> None:
    decision = decide.validate(request("CREATE", gpu_pod("150")), SETTINGS, FLEET)
    assert (decision.allowed, decision.code, decision.reason) == (False, 403, "Forbidden")


def test_an_update_that_leaves_the_request_alone_is_not_judged_on_it_again() -> None:
    """A pod admitted before its node left is never refused a label change."""
    old = gpu_pod("150")
    new = gpu_pod("150", labels={"x": "1"})
    assert decide.validate(request("UPDATE", new, old), SETTINGS, FLEET).allowed


def test_forged_assignments_are_refused_before_anything_else() -> None:
    forged = gpu_pod("150", annotations={P.annotations.assignment: "{}"})
    decision = decide.validate(request("CREATE", forged), SETTINGS, FLEET)
    assert (decision.code, decision.reason) == (403, "Forbidden")
    assert [p.field for p in decision.problems] == [f"metadata.annotations[{P.annotations.assignment}]"]


def test_bindings_are_judged_on_who_writes_the_assignment() -> None:
    binding = {"metadata": {"name": "p", "annotations": {P.annotations.assignment: "{}"}}, "target": {"name": "n"}}
    assert not decide.validate(request("CREATE", binding, sub="binding"), SETTINGS, FLEET).allowed
    scheduler = "system:serviceaccount:kube-system:lj-runtimekit-scheduler"
    assert decide.validate(request("CREATE", binding, sub="binding", user=scheduler), SETTINGS, FLEET).allowed


def test_other_requests_are_allowed() -> None:
    status = request("UPDATE", gpu_pod("150"), gpu_pod("10"), sub="status")
    assert decide.validate(status, SETTINGS, FLEET).allowed
    other = cast(
        AdmissionRequest,
        {**request("CREATE", {}), "resource": {"group": "apps", "version": "v1", "resource": "deployments"}},
    )
    assert decide.validate(other, SETTINGS, FLEET).allowed


def test_the_answer_carries_the_patch_in_base64_and_the_refusal_as_a_status() -> None:
    review = cast(
        AdmissionReview,
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request("CREATE", gpu_pod())},
    )
    answer = respond(review, decide.mutate(review["request"], SETTINGS))
    response = answer["response"]
    assert answer["apiVersion"] == "admission.k8s.io/v1"
    assert (response["uid"], response["allowed"], response["patchType"]) == ("u1", True, "JSONPatch")
    assert json.loads(base64.b64decode(response["patch"])) == [
        {"op": "add", "path": "/spec/schedulerName", "value": "lj-runtimekit-scheduler"}
    ]
    refused = respond(review, decide.validate(request("CREATE", gpu_pod("150")), SETTINGS, FLEET))["response"]
    assert refused["allowed"] is False
    status = refused["status"]
    assert (status["code"], status["reason"]) == (403, "Forbidden")
    assert status["message"].startswith(f"spec.containers[0].resources.limits[{P.resources.core}]: Invalid value")
    assert status["details"]["causes"][0]["field"] == f"spec.containers[0].resources.limits[{P.resources.core}]"
    assert "patch" not in refused


def test_under_hamis_rules_a_gpu_pod_with_a_privileged_container_is_refused() -> None:
    """HAMi's webhook denies a GPU pod with a privileged container (it would see every GPU of the node);
    the kit's own protocol leaves that to the cluster's policy, and a pod without GPUs is no concern."""
    from runtimekit.protocol.presets import preset_protocol

    hami = WebhookSettings(preset_protocol("hami"))
    pod = {
        "metadata": {"name": "p"},
        "spec": {
            "containers": [
                {"name": "app", "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "30"}}},
                {"name": "debug", "securityContext": {"privileged": True}},
            ]
        },
    }
    decision = decide.validate(request("CREATE", pod), hami, FLEET)
    assert not decision.allowed
    assert [(p.field, p.message) for p in decision.problems] == [
        ("spec.containers[1].securityContext.privileged", "Forbidden: container debug is privileged")
    ]
    assert decide.validate(request("UPDATE", pod, pod), hami, FLEET).allowed  # admitted before: never refused later
    plain = {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "x", "securityContext": {"privileged": True}}]},
    }
    assert decide.validate(request("CREATE", plain), hami, FLEET).allowed
    kit = {**pod, "spec": {"containers": [gpu_pod()["spec"]["containers"][0], pod["spec"]["containers"][1]]}}
    assert decide.validate(request("CREATE", kit), SETTINGS, FLEET).allowed

"""The webhook's decisions: an AdmissionReview's request in, a `Decision` out.

`mutate` handles pod creates (`mutation`); `validate` handles pod creates and updates (what the pod
asks for, unless HAMi's opt-out label says to leave it alone, and who wrote the scheduler's
annotations) and `pods/binding` creates (who binds with the scheduler's annotations). Under HAMi's
rules a GPU pod with a privileged container is refused at creation, as HAMi's webhook refuses it (a
privileged container sees every GPU of the node, so no share holds). Anything else
is allowed unchanged: a configuration that sends more than these is not an error. The request checks
run on updates too, but only when the containers' resources or the annotations changed, so a pod
admitted before a node left is never refused a label change. Pure; `server` calls it.
"""

from __future__ import annotations

from typing import cast

from runtimekit.kube.objects import AdmissionRequest, Binding, Pod, annotations_of
from runtimekit.webhook.annotations import annotation_problems
from runtimekit.webhook.authority import written_problems
from runtimekit.webhook.fleet import Fleet
from runtimekit.webhook.mutation import asks_for_gpus, opted_out, pod_patch
from runtimekit.webhook.podrequests import pod_problems, privileged_problems
from runtimekit.webhook.review import ALLOW, Decision, refuse
from runtimekit.webhook.settings import WebhookSettings


def _is(request: AdmissionRequest, subresource: str) -> bool:
    resource = request.get("resource") or {}
    return (
        resource.get("group", "") == ""
        and resource.get("resource") == "pods"
        and request.get("subResource", "") == subresource
    )


def mutate(request: AdmissionRequest, settings: WebhookSettings) -> Decision:
    obj = request.get("object")
    if not _is(request, "") or request.get("operation") != "CREATE" or not isinstance(obj, dict):
        return ALLOW
    return Decision(patch=tuple(pod_patch(cast(Pod, obj), settings)))


def _resources(pod: Pod) -> object:
    spec = pod.get("spec") or {}
    both = (spec.get("containers") or [], spec.get("initContainers") or [])
    return [[c.get("resources") for c in containers] for containers in both]


def _validate_pod(request: AdmissionRequest, settings: WebhookSettings, fleet: Fleet) -> Decision:
    pod = cast(Pod, request.get("object") or {})
    old = cast("Pod | None", request.get("oldObject"))
    user = (request.get("userInfo") or {}).get("username", "")
    written = written_problems(
        annotations_of(pod),
        None if old is None else annotations_of(old),
        user,
        settings.scheduler_users,
        settings.protocol,
    )
    if written:
        return refuse(written)
    if opted_out(pod, settings):
        return ALLOW
    changed = old is None or _resources(old) != _resources(pod) or annotations_of(old) != annotations_of(pod)
    if not changed:
        return ALLOW
    problems = [
        *pod_problems(pod, settings.protocol, fleet, old is None),
        *annotation_problems(annotations_of(pod), settings.protocol),
        *(privileged_problems(pod) if settings.hami and old is None and asks_for_gpus(pod, settings) else []),
    ]
    return refuse(problems) if problems else ALLOW


def validate(request: AdmissionRequest, settings: WebhookSettings, fleet: Fleet) -> Decision:
    operation = request.get("operation")
    if _is(request, "") and operation in ("CREATE", "UPDATE"):
        return _validate_pod(request, settings, fleet)
    if _is(request, "binding") and operation == "CREATE":
        binding = cast(Binding, request.get("object") or {})
        user = (request.get("userInfo") or {}).get("username", "")
        written = written_problems(annotations_of(binding), None, user, settings.scheduler_users, settings.protocol)
        return refuse(written) if written else ALLOW
    return ALLOW

"""The ResourceClaim controller, as kube's (pkg/controller/resourceclaim): claims for pods from their
templates, and the clean-up of claims whose consumers are gone. Level-based, two kinds of keys:

- a pod (`pod:<ns>/<name>`): for each `spec.resourceClaims[]` entry naming a
  `resourceClaimTemplateName` that `status.resourceClaimStatuses` does not answer yet, a claim
  `<pod>-<entry>-<5 random>` (kube's generateName, both parts cut in proportion when longer than 57)
  is made from the template (its labels, annotations and spec), controlled by the pod and annotated
  `resource.kubernetes.io/pod-claim-name`, or the one made before is found by that annotation; the
  pod's `status.resourceClaimStatuses` then names it. A missing template gets a `FailedResourceClaimCreation`
  Warning on the pod and is looked at again when templates change. Finished or deleted pods get none;
- a claim (`claim:<ns>/<name>`): `status.reservedFor` keeps only pods that exist (same UID), are not
  finished and are not being deleted before they were scheduled (a pod the informer has not seen
  yet is looked up on the API server first: it may be one made just now that the scheduler binds);
  when the last consumer leaves the allocation is dropped (the devices go back to the pool; a claim
  allocated but never reserved keeps it), and a claim made for a pod that will not run any more is
  deleted.

The scheduler writes the allocation and the reservation (`runtimekit.scheduler.dra`). Callers: the
controller manager (`default_controllers`), tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import cast

from runtimekit.cluster.controllers.base import Controller
from runtimekit.cluster.controllers.pods import FINISHED, is_terminating, owner_ref, phase
from runtimekit.kube.errors import KubeError
from runtimekit.kube.http import KubeHttp, object_path
from runtimekit.kube.informers import Change, Informers
from runtimekit.kube.objects import (
    Pod,
    PodResourceClaimStatus,
    ResourceClaim,
    ResourceClaimConsumerReference,
    ResourceClaimStatus,
    ResourceClaimTemplate,
    meta,
    object_key,
)

API = "resource.k8s.io/v1"
CLAIMS_PATH = f"/apis/{API}/resourceclaims"
TEMPLATES_PATH = f"/apis/{API}/resourceclaimtemplates"
PODS_PATH = "/api/v1/pods"
POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
_MAX_BASE = 57  # a generated name is at most 63: the base, "-" and 5 random characters


def generate_name(pod_name: str, claim_name: str) -> str:
    """kube's generateName for a claim made from a template: `<pod>-<claim>-`, both parts cut in
    proportion to their length when the base is longer than 57 characters."""
    base = f"{pod_name}-{claim_name}-"
    if len(base) > _MAX_BASE:
        cut = len(base)  # both parts keep their share of the 57 characters (kube measures the uncut base)
        base = f"{pod_name[: len(pod_name) * _MAX_BASE // cut]}-{claim_name[: len(claim_name) * _MAX_BASE // cut]}"
    return base


def claim_names_of(pod: Pod) -> list[str]:
    """The names of the claims a pod uses: those it names and those made for it from templates."""
    names = [
        c["resourceClaimName"]
        for c in (pod.get("spec") or {}).get("resourceClaims") or []
        if c.get("resourceClaimName")
    ]
    made = (pod.get("status") or {}).get("resourceClaimStatuses") or []
    return names + [s["resourceClaimName"] for s in made if s.get("resourceClaimName")]


def _will_not_run(pod: Pod | None) -> bool:
    if pod is None:
        return True
    return phase(pod) in FINISHED or (is_terminating(pod) and not (pod.get("spec") or {}).get("nodeName"))


class ResourceClaimController(Controller):
    """See the module docstring."""

    name = "resource-claim-controller"

    def __init__(self, http: KubeHttp, informers: Informers, clock: Callable[[], float] = time.time) -> None:
        super().__init__(http, informers, clock)
        self.pods = self.watch(PODS_PATH, Pod, self._on_pod).cache
        self.claims = self.watch(CLAIMS_PATH, ResourceClaim, self._on_claim, optional=True).cache
        self.templates = self.watch(TEMPLATES_PATH, ResourceClaimTemplate, self._on_template, optional=True).cache

    # -- handlers -----------------------------------------------------------------------------
    def _on_pod(self, change: Change[Pod]) -> None:
        pod = change.obj
        namespace = meta(pod).get("namespace", "")
        if (pod.get("spec") or {}).get("resourceClaims"):
            self.queue.add(f"pod:{object_key(pod)}")
        for old_or_new in (change.old, change.new):
            for name in claim_names_of(old_or_new) if old_or_new is not None else ():
                self.queue.add(f"claim:{namespace}/{name}")
        if change.new is None:  # a deleted pod's reservations: the claims that name it
            uid = meta(pod).get("uid", "")
            for claim in self.claims.items(namespace):
                if any(r.get("uid") == uid for r in (claim.get("status") or {}).get("reservedFor") or []):
                    self.queue.add(f"claim:{object_key(claim)}")

    def _on_claim(self, change: Change[ResourceClaim]) -> None:
        self.queue.add(f"claim:{object_key(change.obj)}")

    def _on_template(self, change: Change[ResourceClaimTemplate]) -> None:
        if change.old is not None:
            return
        namespace, name = meta(change.obj).get("namespace", ""), meta(change.obj).get("name", "")
        for pod in self.pods.items(namespace):
            wanted = (pod.get("spec") or {}).get("resourceClaims") or []
            if any(c.get("resourceClaimTemplateName") == name for c in wanted):
                self.queue.add(f"pod:{object_key(pod)}")

    # -- syncs --------------------------------------------------------------------------------
    def sync(self, key: str) -> None:
        kind, _, rest = key.partition(":")
        if kind == "pod":
            self._sync_pod(rest)
        else:
            self._sync_claim(rest)

    def _sync_pod(self, key: str) -> None:
        pod = self.pods.get(key)
        if pod is None or _will_not_run(pod) or is_terminating(pod):
            return
        namespace = meta(pod).get("namespace", "")
        statuses = list((pod.get("status") or {}).get("resourceClaimStatuses") or [])
        answered = {s.get("name") for s in statuses}
        added: list[PodResourceClaimStatus] = []
        for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
            template_name = entry.get("resourceClaimTemplateName")
            if not template_name or entry.get("name") in answered:
                continue
            claim = self._claim_made_for(pod, entry.get("name", "")) or self._make_claim(
                pod, entry.get("name", ""), template_name
            )
            if claim is None:
                continue
            added.append({"name": entry.get("name", ""), "resourceClaimName": meta(claim).get("name", "")})
        if added:
            body = {
                "metadata": {"resourceVersion": meta(pod).get("resourceVersion")},
                "status": {"resourceClaimStatuses": statuses + added},
            }
            path = object_path("v1", "pods", namespace, meta(pod).get("name"), "status")
            self.pods.written(cast(Pod, self.http.patch(path, body, "merge")))

    def _claim_made_for(self, pod: Pod, entry: str) -> ResourceClaim | None:
        uid = meta(pod).get("uid", "")
        for claim in self.claims.items(meta(pod).get("namespace", "")):
            refs = meta(claim).get("ownerReferences") or []
            ours = any(r.get("uid") == uid and r.get("controller") for r in refs)
            if ours and (meta(claim).get("annotations") or {}).get(POD_CLAIM_NAME) == entry:
                return claim
        return None

    def _make_claim(self, pod: Pod, entry: str, template_name: str) -> ResourceClaim | None:
        namespace = meta(pod).get("namespace", "")
        template = self.templates.get(f"{namespace}/{template_name}")
        if template is None:
            text = f'PodResourceClaim {entry}: resource claim template "{template_name}": not found'
            self.event(pod, "v1", "Pod", "Warning", "FailedResourceClaimCreation", text)
            return None
        spec = template.get("spec") or {}
        template_meta = spec.get("metadata") or {}
        claim: ResourceClaim = {
            "apiVersion": API,
            "kind": "ResourceClaim",
            "metadata": {
                "generateName": generate_name(meta(pod).get("name", ""), entry),
                "namespace": namespace,
                "labels": dict(template_meta.get("labels") or {}),
                "annotations": {**(template_meta.get("annotations") or {}), POD_CLAIM_NAME: entry},
                "ownerReferences": [owner_ref(pod, "v1", "Pod")],
            },
            "spec": spec.get("spec") or {},
        }
        return self.create(API, "resourceclaims", claim, self.claims)

    def _consumer(self, ref: ResourceClaimConsumerReference, namespace: str, pods_by_uid: dict[str, Pod]) -> Pod | None:
        """The reserving pod: from the informer's cache, else (a pod made just now, not seen yet, which
        the scheduler may be binding) from the API server, as kube's controller makes sure before it
        drops a reservation; None when it is gone or another pod has its name."""
        uid = ref.get("uid", "")
        if uid in pods_by_uid:
            return pods_by_uid[uid]
        if self.pods.get(f"{namespace}/{ref.get('name', '')}") is not None:
            return None  # the cache has a pod of that name: another incarnation
        try:
            pod = cast(Pod, self.http.get(object_path("v1", "pods", namespace, str(ref.get("name", "")))))
        except KubeError as exc:
            if exc.code == 404:
                return None
            raise  # the claim is synced again later
        return pod if meta(pod).get("uid") == uid else None

    def _sync_claim(self, key: str) -> None:
        claim = self.claims.get(key)
        if claim is None:
            return
        namespace = meta(claim).get("namespace", "")
        status = claim.get("status") or {}
        reserved = status.get("reservedFor") or []
        pods_by_uid = {meta(p).get("uid", ""): p for p in self.pods.items(namespace)}
        valid = [
            r
            for r in reserved
            if r.get("resource") != "pods" or not _will_not_run(self._consumer(r, namespace, pods_by_uid))
        ]
        if len(valid) != len(reserved):
            # the last consumer gone: the allocation (and what the driver reported about it) goes. Only
            # on that change, as kube's controller: a claim allocated but never reserved (by a driver
            # or an admin, ahead of its pods) keeps its allocation
            kept: ResourceClaimStatus = {**status, "reservedFor": valid} if valid else {}
            claim = self.put_status(claim, API, "resourceclaims", kept, self.claims)
        if valid or is_terminating(claim):
            return
        for ref in meta(claim).get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == "Pod":
                owner = pods_by_uid.get(ref.get("uid", ""))
                if _will_not_run(owner):
                    self.delete(claim, API, "resourceclaims", self.claims)

"""The coordination.k8s.io/v1 Lease leader election is held with (`runtimekit.kube.lease`). Pure
TypedDicts; see `meta.py`.
"""

from __future__ import annotations

from typing import TypedDict

from runtimekit.kube.objects.meta import ObjectMeta


class LeaseSpec(TypedDict, total=False):
    holderIdentity: str
    leaseDurationSeconds: int
    # MicroTimes, written for people and kubectl and never read (see kube/lease.py); null when unknown
    acquireTime: str | None
    renewTime: str | None
    leaseTransitions: int


class Lease(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: LeaseSpec

"""Recording Kubernetes Events from the embedded cluster's simulated components (kubelet, Job controller).

Best effort, as in Kubernetes: an Event that cannot be written is logged and dropped.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import Any

from runtimekit.base.timestamps import rfc3339
from runtimekit.kube.http import KubeApiError, KubeHttp, object_path

log = logging.getLogger(__name__)


def record_event(
    http: KubeHttp, involved: Mapping[str, Any], kind: str, reason: str, message: str, component: str, host: str = ""
) -> None:
    """Post an Event about `involved` (a full object: apiVersion, kind, metadata) of type Normal or Warning."""
    meta = involved.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    now = rfc3339()
    source: dict[str, str] = {"component": component}
    if host:
        source["host"] = host
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta.get('name', 'x')}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
        "involvedObject": {
            "apiVersion": involved.get("apiVersion", "v1"),
            "kind": involved.get("kind", ""),
            "namespace": namespace,
            "name": meta.get("name", ""),
            "uid": meta.get("uid", ""),
        },
        "reason": reason,
        "message": message[:1024],
        "type": kind,
        "source": source,
        "reportingComponent": component,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    try:
        http.post(object_path("v1", "events", namespace), body)
    except KubeApiError as exc:
        log.info("could not record event %s on %s/%s: %s", reason, namespace, meta.get("name"), exc)

"""Cells of kube's printers (pkg/printers/internalversion/printers.go) that need more than a field:
the wide columns of workloads (CONTAINERS, IMAGES, SELECTOR), Jobs (STATUS, COMPLETIONS, DURATION),
CronJobs, Events (kube's column order, NAME last), Endpoints and EndpointSlices, role bindings,
PodDisruptionBudgets and ResourceClaims (STATE). Time-dependent cells are `Since` markers (or fixed
text), as in `printers`. Pure functions; `printers._CELLS` maps kinds to them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtimekit.base.timestamps import parse_rfc3339
from runtimekit.cluster.apiserver.printers_base import Since, created, get_path, human_duration
from runtimekit.kube.objects import JsonObject


def _text(value: object, empty: str = "<none>") -> str:
    return str(value) if value not in (None, "") else empty


def format_labels(labels: Any) -> str:
    """apimachinery's `labels.FormatLabels`: `k=v,...` sorted by key, `<none>` when empty."""
    if not isinstance(labels, Mapping) or not labels:
        return "<none>"
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def format_selector(selector: Any) -> str:
    """apimachinery's `metav1.FormatLabelSelector`: match labels then expressions; `<none>` when nil."""
    if not isinstance(selector, Mapping):
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        op, key, values = expr.get("operator"), expr.get("key"), ",".join(expr.get("values") or [])
        if op == "In":
            parts.append(f"{key} in ({values})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({values})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    text = ",".join(parts)
    return text or "<none>"


def containers_images(template_spec: Any) -> tuple[str, str]:
    containers = (template_spec or {}).get("containers") or [] if isinstance(template_spec, Mapping) else []
    names = ",".join(str(c.get("name", "")) for c in containers)
    images = ",".join(str(c.get("image", "")) for c in containers)
    return names, images


def template_wide(obj: JsonObject, with_selector: bool = True) -> tuple[object, ...]:
    """CONTAINERS, IMAGES (and SELECTOR) of a workload with `spec.template`."""
    names, images = containers_images(get_path(obj, "spec", "template", "spec"))
    if not with_selector:
        return (names, images)
    return (names, images, format_selector(get_path(obj, "spec", "selector")))


# --- jobs ----------------------------------------------------------------------------------------


def _has_condition(obj: JsonObject, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in get_path(obj, "status", "conditions") or [])


def job_status(job: JsonObject) -> str:
    if _has_condition(job, "Complete"):
        return "Complete"
    if _has_condition(job, "Failed"):
        return "Failed"
    if get_path(job, "metadata", "deletionTimestamp"):
        return "Terminating"
    for kind in ("Suspended", "FailureTarget", "SuccessCriteriaMet"):
        if _has_condition(job, kind):
            return kind
    return "Running"


def job_completions(job: JsonObject) -> str:
    succeeded = int(get_path(job, "status", "succeeded") or 0)
    completions = get_path(job, "spec", "completions")
    parallelism = get_path(job, "spec", "parallelism")
    if completions is not None:
        return f"{succeeded}/{completions}"
    if isinstance(parallelism, int) and parallelism > 1:
        return f"{succeeded}/1 of {parallelism}"
    return f"{succeeded}/1"


def job_duration(job: JsonObject) -> object:
    start = get_path(job, "status", "startTime")
    if not start:
        return ""
    end = get_path(job, "status", "completionTime")
    if not end:
        return Since(str(start))
    began, ended = parse_rfc3339(str(start)), parse_rfc3339(str(end))
    return "" if began is None or ended is None else human_duration(ended - began)


def job_cells(job: JsonObject) -> tuple[object, ...]:
    return (job_status(job), job_completions(job), job_duration(job), created(job), *template_wide(job))


def _bool_text(value: object) -> str:
    return "<unset>" if value is None else ("True" if value else "False")


def cronjob_cells(cronjob: JsonObject) -> tuple[object, ...]:
    last = get_path(cronjob, "status", "lastScheduleTime")
    template = get_path(cronjob, "spec", "jobTemplate", "spec") or {}
    names, images = containers_images(get_path(template, "template", "spec"))
    return (
        str(get_path(cronjob, "spec", "schedule") or ""),
        _text(get_path(cronjob, "spec", "timeZone")),
        _bool_text(get_path(cronjob, "spec", "suspend")),
        len(get_path(cronjob, "status", "active") or []),
        Since(str(last)) if last else "<none>",
        created(cronjob),
        names,
        images,
        format_selector(template.get("selector") if isinstance(template, Mapping) else None),
    )


# --- events --------------------------------------------------------------------------------------


def _event_source(event: JsonObject) -> str:
    component = get_path(event, "source", "component") or event.get("reportingComponent") or ""
    host = get_path(event, "source", "host") or event.get("reportingInstance") or ""
    if not component:
        return ""
    return f"{component}, {host}" if host else str(component)


def event_cells(event: JsonObject) -> tuple[object, ...]:
    """LAST SEEN TYPE REASON OBJECT SUBOBJECT SOURCE MESSAGE FIRST SEEN COUNT NAME (kube's printEvent)."""
    first_at = event.get("firstTimestamp") or event.get("eventTime") or get_path(event, "metadata", "creationTimestamp")
    first = Since(str(first_at or ""))
    last: object = Since(str(event["lastTimestamp"])) if event.get("lastTimestamp") else first
    count = int(event.get("count") or 0) or 1
    series = event.get("series")
    if isinstance(series, Mapping):
        last = Since(str(series.get("lastObservedTime") or ""))
        count = int(series.get("count") or count)
    involved = event.get("involvedObject") or {}
    kind = str(involved.get("kind", "")).lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    return (
        last,
        str(event.get("type") or ""),
        str(event.get("reason") or ""),
        target,
        str(involved.get("fieldPath") or ""),
        _event_source(event),
        str(event.get("message") or "").strip(),
        first,
        count,
        str(get_path(event, "metadata", "name") or ""),
    )


# --- services and endpoints ----------------------------------------------------------------------


def format_endpoints(endpoints: JsonObject) -> str:
    """kube's `formatEndpoints`: up to three `ip:port`, then ` + N more...`; `<none>` when empty."""
    shown: list[str] = []
    total = 0
    for subset in endpoints.get("subsets") or []:
        ports = subset.get("ports") or [{}]
        for address in subset.get("addresses") or []:
            for port in ports:
                total += 1
                if len(shown) < 3:
                    ip = address.get("ip", "")
                    shown.append(f"{ip}:{port['port']}" if "port" in port else str(ip))
    if not shown:
        return "<none>"
    more = total - len(shown)
    return ",".join(shown) + (f" + {more} more..." if more > 0 else "")


def endpoint_slice_cells(slice_: JsonObject) -> tuple[object, ...]:
    ports = [str(p.get("port")) for p in slice_.get("ports") or [] if p.get("port") is not None]
    addresses = [a for e in slice_.get("endpoints") or [] for a in e.get("addresses") or []]
    shown = ",".join(addresses[:3]) + (f" + {len(addresses) - 3} more..." if len(addresses) > 3 else "")
    return (
        str(slice_.get("addressType") or ""),
        ",".join(ports) or "<unset>",
        shown or "<unset>",
        created(slice_),
    )


# --- rbac and policy -----------------------------------------------------------------------------


def binding_cells(binding: JsonObject) -> tuple[object, ...]:
    ref = binding.get("roleRef") or {}
    users, groups, accounts = [], [], []
    for subject in binding.get("subjects") or []:
        kind, name = subject.get("kind"), str(subject.get("name", ""))
        if kind == "User":
            users.append(name)
        elif kind == "Group":
            groups.append(name)
        elif kind == "ServiceAccount":
            accounts.append(f"{subject.get('namespace', '')}:{name}")
    return (
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        created(binding),
        ", ".join(users),
        ", ".join(groups),
        ", ".join(accounts),
    )


def created_at(obj: JsonObject) -> str:
    """Roles' CREATED AT: the creation time itself (RFC 3339), not an age."""
    return str(get_path(obj, "metadata", "creationTimestamp") or "")


def pdb_cells(pdb: JsonObject) -> tuple[object, ...]:
    spec = pdb.get("spec") or {}
    return (
        _text(spec.get("minAvailable"), "N/A"),
        _text(spec.get("maxUnavailable"), "N/A"),
        int(get_path(pdb, "status", "disruptionsAllowed") or 0),
        created(pdb),
    )


def quota_cells(quota: JsonObject) -> tuple[object, ...]:
    """AGE, REQUEST, LIMIT: `resource: used/hard` of `status.hard`, sorted, `limits.*` in LIMIT."""
    hard = get_path(quota, "status", "hard") or {}
    used = get_path(quota, "status", "used") or {}
    request: list[str] = []
    limit: list[str] = []
    for resource in sorted(hard):
        text = f"{resource}: {used.get(resource, '0')}/{hard[resource]}"
        (limit if resource.startswith("limits.") else request).append(text)
    return (created(quota), ", ".join(request), ", ".join(limit))


def resource_claim_state(claim: JsonObject) -> str:
    """kube's `resourceClaimState`: deleted, pending, allocated, reserved, comma-joined."""
    states: list[str] = []
    deleting = bool(get_path(claim, "metadata", "deletionTimestamp"))
    if deleting:
        states.append("deleted")
    if not get_path(claim, "status", "allocation"):
        if not deleting:
            states.append("pending")
    else:
        states.append("allocated")
        if get_path(claim, "status", "reservedFor"):
            states.append("reserved")
    return ",".join(states)

"""Request parsing without HTTP objects: resource paths, boolean and integer query parameters,
`Accept` negotiation (plain JSON, `as=Table`, `as=PartialObjectMetadataList`), continue tokens,
`fieldValidation`, and the checks of a watch's `sendInitialEvents`.

Paths follow the real server: `/api/v1[/namespaces/{ns}]/{resource}[/{name}[/{subresource}]]` and
`/apis/{group}/{version}/...`, with the legacy `/watch/` prefix. Pure functions, called by the handlers.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

from runtimekit.cluster.apiserver.errors import bad_request, field_forbidden, invalid, not_acceptable
from runtimekit.cluster.apiserver.store import Key
from runtimekit.cluster.apiserver.typed import FieldValidation

_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


@dataclass(frozen=True)
class Target:
    """A resource request path. `namespace` is None for cluster-wide requests."""

    group: str
    version: str
    plural: str
    namespace: str | None = None
    name: str | None = None
    subresource: str = ""
    watch: bool = False  # the legacy /watch/ path prefix


@dataclass(frozen=True)
class GroupVersionPath:
    """A discovery path: `/api`, `/api/v1`, `/apis`, `/apis/{group}` or `/apis/{group}/{version}`."""

    legacy: bool
    group: str = ""
    version: str = ""


@lru_cache(maxsize=1024)  # every request asks; most ask the same few paths (a kind's list, create, watch)
def parse_path(path: str) -> Target | GroupVersionPath | None:
    """Classify a request path; None when it is not an API path at all (the answers are immutable)."""
    parts = [p for p in path.split("/") if p]
    if not parts or parts[0] not in ("api", "apis"):
        return None
    legacy = parts[0] == "api"
    head = 2 if legacy else 3
    if len(parts) < head:
        if legacy:
            return GroupVersionPath(True)
        return GroupVersionPath(False, parts[1] if len(parts) > 1 else "")
    group, version = ("", parts[1]) if legacy else (parts[1], parts[2])
    rest = parts[head:]
    if not rest:
        return GroupVersionPath(legacy, group, version)
    watch = rest[0] == "watch"
    if watch:
        rest = rest[1:]
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in _NAMESPACE_SUBRESOURCES:
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        return None
    return Target(
        group,
        version,
        rest[0],
        namespace,
        rest[1] if len(rest) > 1 else None,
        rest[2] if len(rest) > 2 else "",
        watch,
    )


def parse_bool(query: Mapping[str, str], name: str) -> bool:
    """A boolean query parameter as Go's strconv.ParseBool reads it (absent or empty: false)."""
    value = query.get(name, "")
    if value == "" or value in _FALSE:
        return False
    if value in _TRUE:
        return True
    raise bad_request(f"invalid boolean value for {name}: {value!r}")


def parse_int(query: Mapping[str, str], name: str) -> int | None:
    value = query.get(name, "")
    if value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise bad_request(f"invalid integer value for {name}: {value!r}") from None


def parse_resource_version(value: str) -> int | None:
    """A resourceVersion parameter: None when unset or "0" ("any"), else the number."""
    if value in ("", "0"):
        return None
    try:
        rv = int(value)
    except ValueError:
        raise bad_request(f'invalid resource version "{value}"') from None
    if rv < 0:
        raise bad_request(f'invalid resource version "{value}"')
    return rv


class Output(StrEnum):
    JSON = "json"
    TABLE = "table"
    PARTIAL = "partial"


@dataclass(frozen=True)
class Rendering:
    """How to answer: the form and, for tables and partial metadata, the meta.k8s.io version."""

    output: Output
    version: str = "v1"


@lru_cache(maxsize=256)  # every request asks, and a client sends the same few headers (a refusal is not kept)
def negotiate(accept: str) -> Rendering:
    """Pick the first acceptable media range of an `Accept` header, as the real server does."""
    if not accept.strip():
        return Rendering(Output.JSON)
    for media in accept.split(","):
        kind, *raw_params = (part.strip() for part in media.split(";"))
        params = dict(p.split("=", 1) for p in raw_params if "=" in p)
        if kind not in ("application/json", "application/*", "*/*", "application/yaml"):
            continue
        wanted = params.get("as")
        if wanted is None:
            return Rendering(Output.JSON)
        if params.get("g") != "meta.k8s.io" or params.get("v") not in ("v1", "v1beta1"):
            continue
        if wanted == "Table":
            return Rendering(Output.TABLE, params["v"])
        if wanted in ("PartialObjectMetadata", "PartialObjectMetadataList"):
            return Rendering(Output.PARTIAL, params["v"])
    raise not_acceptable(accept)


def encode_continue(rv: int, start: Key) -> str:
    body = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": list(start)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(body.encode()).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, Key]:
    """The resourceVersion and last key of a continue token; 400 when it is not one of ours."""
    try:
        padded = token + "=" * (-len(token) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
        rv, start = int(data["rv"]), data["start"]
        if data.get("v") != "meta.k8s.io/v1" or not (isinstance(start, list) and len(start) == 2) or rv < 1:
            raise ValueError("bad fields")
        return rv, (str(start[0]), str(start[1]))
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise bad_request(f"continue key is not valid: {exc}") from None


def field_validation(query: Mapping[str, str]) -> FieldValidation:
    return FieldValidation.parse(query.get("fieldValidation", ""))


def check_initial_events(query: Mapping[str, str], bookmarks: bool) -> None:
    causes = []
    if query.get("resourceVersionMatch") != "NotOlderThan":
        causes.append(
            field_forbidden(
                "resourceVersionMatch",
                "sendInitialEvents is forbidden for watch unless resourceVersionMatch is set to NotOlderThan",
            )
        )
    if not bookmarks:
        causes.append(
            field_forbidden(
                "allowWatchBookmarks", "allowWatchBookmarks must be set to true when sendInitialEvents is specified"
            )
        )
    if causes:
        raise invalid("ListOptions", "", causes, "meta.k8s.io")

"""Serving /openapi/v2, /openapi/v3 and /openapi/v3/<group-version> as kube-apiserver (kube-openapi's
handlers) does.

- /openapi/v3 lists each group-version with a `serverRelativeURL` carrying `?hash=<ETag>`; a
  group-version asked for with the current hash is answered `Cache-Control: public, immutable`, with
  an old hash by a 301 to the current URL.
- Each document has an `Etag` (the upper-case hex SHA-512 of its bytes); `If-None-Match` with it gets
  a 304. /openapi/v2 answers JSON or gnostic protobuf by `Accept` (406 for anything else).
The documents are built on first request and again only after the served resources change (a CRD
written or deleted: `ResourceTable.generation`), in a worker thread so the event loop keeps serving.
Called by `handlers.Handlers`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import cast

from aiohttp import web

from runtimekit.cluster.apiserver import openapidocs, openapiv2
from runtimekit.cluster.apiserver.crds import CustomResourceDefinition
from runtimekit.cluster.apiserver.crschema import bundled_crds
from runtimekit.cluster.apiserver.resources import ResourceTable
from runtimekit.cluster.apiserver.store import Store
from runtimekit.kube.objects import JsonObject

V2_PROTOBUF = (
    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
)
_YEAR = 365 * 24 * 3600


@dataclass(frozen=True)
class Body:
    data: bytes
    etag: str  # upper-case hex SHA-512, unquoted

    @classmethod
    def of(cls, data: bytes) -> Body:
        return cls(data, hashlib.sha512(data).hexdigest().upper())


def _dumps(document: object) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()


@dataclass
class Published:
    """The documents of one state of the resource table; v2 is made on first use."""

    v3: dict[str, Body]  # group_version_key -> document
    v3_root: Body
    git_version: str
    _documents: list[JsonObject]
    _v2: tuple[Body, Body] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def v2(self) -> tuple[Body, Body]:
        """(JSON, protobuf)."""
        with self._lock:
            if self._v2 is None:
                document = openapiv2.swagger(self._documents, self.git_version)
                self._v2 = Body.of(_dumps(document)), Body.of(openapiv2.encode(document))
            return self._v2


def build(table: ResourceTable, store: Store, schema_version: str, git_version: str) -> Published:
    """The documents of everything `table` serves now."""
    crd_info = table.lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    stored = [cast(CustomResourceDefinition, s.obj()) for s in store.objects(crd_info)] if crd_info else []
    schemas = openapidocs.crd_version_schemas([*bundled_crds(), *stored])  # a stored CRD wins
    documents = openapidocs.group_version_documents(
        table.all(),
        openapidocs.builtin_kinds(schema_version),
        openapidocs.builtin_definitions(schema_version),
        schemas,
        git_version,
    )
    v3 = {key: Body.of(_dumps(document)) for key, document in documents.items()}
    paths = {key: {"serverRelativeURL": f"/openapi/v3/{key}?hash={body.etag}"} for key, body in v3.items()}
    root = Body.of(_dumps({"paths": paths}))
    return Published(v3, root, git_version, list(documents.values()))


class OpenApi:
    """The served documents, rebuilt when the resource table changes. Thread-safe."""

    def __init__(self, table: ResourceTable, store: Store, schema_version: str, git_version: str) -> None:
        self._table, self._store = table, store
        self._schema_version, self._git_version = schema_version, git_version
        self._published: tuple[int, Published] | None = None
        self._lock = threading.Lock()

    def published(self) -> Published:
        with self._lock:
            generation = self._table.generation
            if self._published is None or self._published[0] != generation:
                built = build(self._table, self._store, self._schema_version, self._git_version)
                self._published = generation, built
            return self._published[1]

    async def handle(self, request: web.Request, path: str) -> web.Response:
        """Answer a GET of /openapi/v2, /openapi/v3 or /openapi/v3/<group-version>."""
        if request.method not in ("GET", "HEAD"):
            return web.Response(status=405, text="405 method not allowed\n")
        published = await asyncio.get_running_loop().run_in_executor(None, self.published)
        if path == "/openapi/v3":
            return web.Response(body=published.v3_root.data, content_type="application/json")
        if path == "/openapi/v2":
            return await self._v2(request, published)
        body = published.v3.get(path.removeprefix("/openapi/v3/"))
        if body is None:
            return web.Response(status=404, text="404 page not found\n")
        if not _accepts(request, ("application/json",)):
            return _not_acceptable()
        wanted = request.query.get("hash")
        if wanted and wanted != body.etag:
            raise web.HTTPMovedPermanently(f"{path}?hash={body.etag}")
        headers = {"Vary": "Accept"}
        if wanted:
            headers["Cache-Control"] = "public, immutable"
            headers["Expires"] = formatdate(time.time() + _YEAR, usegmt=True)
        return _content(request, body, "application/json", headers)

    async def _v2(self, request: web.Request, published: Published) -> web.Response:
        chosen = _choose(
            request.headers.get("Accept", "") or "*/*", {"application/json": 0, **dict.fromkeys(V2_PROTOBUF, 1)}
        )
        if chosen is None:
            return _not_acceptable()
        json_body, proto_body = await asyncio.get_running_loop().run_in_executor(None, published.v2)
        if chosen.endswith("protobuf"):
            return _content(request, proto_body, "application/octet-stream", {"Vary": "Accept"})  # as kube-openapi
        return _content(request, json_body, "application/json", {"Vary": "Accept"})


def _choose(accept: str, offered: Mapping[str, int]) -> str | None:
    """The offered media type the Accept header prefers (highest q, then first listed); None if none."""
    ranked: list[tuple[float, int, str]] = []
    for position, clause in enumerate(accept.split(",")):
        media, *params = (part.strip() for part in clause.split(";"))
        quality = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if quality <= 0:
            continue
        kind, _, sub = media.lower().partition("/")
        for candidate in offered:
            want_kind, _, want_sub = candidate.partition("/")
            if kind in ("*", want_kind) and sub in ("*", want_sub):
                ranked.append((-quality, position, candidate))
                break
    return min(ranked)[2] if ranked else None


def _accepts(request: web.Request, offered: tuple[str, ...]) -> bool:
    return _choose(request.headers.get("Accept", "") or "*/*", dict.fromkeys(offered, 0)) is not None


def _not_acceptable() -> web.Response:
    return web.Response(status=406, text="406 Not Acceptable\n")


def _content(request: web.Request, body: Body, content_type: str, headers: dict[str, str]) -> web.Response:
    quoted = f'"{body.etag}"'
    headers = {**headers, "Etag": quoted}
    if quoted in (tag.strip() for tag in request.headers.get("If-None-Match", "").split(",")):
        return web.Response(status=304, headers=headers)
    return web.Response(body=body.data, content_type=content_type, headers=headers)

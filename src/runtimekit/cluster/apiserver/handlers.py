"""HTTP glue: turns aiohttp requests into calls on `Api`, `Store` and the encoders, and back.

`Handlers.handle` is the one aiohttp handler. Every `ApiError` becomes its `Status` response, and any
other exception a logged 500 `InternalError` Status, so the server keeps serving after any bad
request. Discovery and health are answered here too, OpenAPI documents by `openapiserve`. No semantics
live here.
Called by `server.ApiServer`.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from runtimekit.cluster.apiserver import conversion, discovery, podlog, scale
from runtimekit.cluster.apiserver.admission.attributes import CREATE, DELETE, UPDATE
from runtimekit.cluster.apiserver.admission.requests import Admission, Admit, admitted_delete, run
from runtimekit.cluster.apiserver.applying import APPLY_PATCH, Owner
from runtimekit.cluster.apiserver.authz import reviews
from runtimekit.cluster.apiserver.authz.access import Access
from runtimekit.cluster.apiserver.deletion import DeleteOptions, delete
from runtimekit.cluster.apiserver.errors import (
    ApiError,
    Cause,
    bad_request,
    field_forbidden,
    internal,
    invalid,
    method_not_allowed,
    resource_not_found,
    success_status,
    unsupported_media_type,
)
from runtimekit.cluster.apiserver.httpio import STREAM_ITEMS, dry_run, read_body, stream_list
from runtimekit.cluster.apiserver.identity import ADMIN, UserInfo
from runtimekit.cluster.apiserver.listing import (
    Filter,
    TableRequest,
    list_bytes,
    list_parts,
    partial_list_bytes,
    partial_object,
    table_bytes,
)
from runtimekit.cluster.apiserver.managedfields import manager_name
from runtimekit.cluster.apiserver.openapiserve import OpenApi
from runtimekit.cluster.apiserver.operations import Api, decode_body
from runtimekit.cluster.apiserver.protobody import PROTOBUF
from runtimekit.cluster.apiserver.resources import ResourceInfo
from runtimekit.cluster.apiserver.routing import (
    GroupVersionPath,
    Output,
    Rendering,
    Target,
    check_initial_events,
    decode_continue,
    encode_continue,
    field_validation,
    negotiate,
    parse_bool,
    parse_int,
    parse_path,
    parse_resource_version,
)
from runtimekit.cluster.apiserver.store import Key, Stored, dumps
from runtimekit.cluster.apiserver.tables import PodGpu, TableMaker
from runtimekit.cluster.apiserver.typed import collect_warnings
from runtimekit.cluster.apiserver.watch import Waker, WatchRequest, WatchStream, pods_on_node
from runtimekit.kube.objects import StatusDetails

log = logging.getLogger(__name__)
_HEALTH = ("/healthz", "/readyz", "/livez")
_BODY_TYPES = ("application/json", "application/yaml", "application/merge-patch+json", PROTOBUF)
_SUBRESOURCE_METHODS = {
    "status": ("GET", "PUT", "PATCH"),
    "finalize": ("PUT",),
    "binding": ("POST",),
    "eviction": ("POST",),
    "scale": ("GET", "PUT", "PATCH"),
    "log": ("GET",),
    "exec": ("GET", "POST"),
    "attach": ("GET", "POST"),
    "token": ("POST",),
}
_MAX_MANAGER = 128
_CREATED = dumps(success_status(201))  # the answer to every binding
_METHOD_VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def _json(body: bytes, status: int = 200) -> web.Response:
    return web.Response(body=body, status=status, content_type="application/json")


def _owner(request: web.Request, query: Mapping[str, str]) -> Owner:
    """The write's field manager: `fieldManager`, else the User-Agent's program, as kube-apiserver names it."""
    manager = manager_name(query, request.headers.get("User-Agent", ""))
    if len(manager) > _MAX_MANAGER:
        too_long = Cause("FieldValueTooLong", f"Too long: may not be more than {_MAX_MANAGER} bytes", "fieldManager")
        raise invalid("PatchOptions", "", [too_long], "meta.k8s.io")
    return Owner(manager)


def status_response(error: ApiError) -> web.Response:
    return _json(dumps(error.status()), error.code)


@dataclass
class Handlers:
    api: Api
    maker: TableMaker
    version: discovery.KubernetesVersion
    waker: Callable[[], Waker]
    bookmark_interval: float
    watch_timeout: float
    address: Callable[[], str]
    admission: Admission
    openapi: OpenApi
    access: Access

    async def handle(self, request: web.Request) -> web.StreamResponse:
        with collect_warnings() as warnings:
            response = await self._answer(request)
        for text in warnings:  # as kube-apiserver sends them; clients print "Warning: <text>"
            response.headers.add("Warning", '299 - "' + text.replace("\\", "\\\\").replace('"', '\\"') + '"')
        return response

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._route(request)
        except ApiError as exc:
            return status_response(exc)
        except (ConnectionResetError, web.HTTPException):
            raise
        except Exception as exc:
            log.exception("%s %s failed", request.method, request.path_qs)
            return status_response(internal(f"{type(exc).__name__}: {exc}"))

    async def _route(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        parsed = parse_path(path)
        who = self.access.who(request.headers)  # None: the admin, whom nothing restricts
        if isinstance(parsed, Target):  # under /api or /apis: none of the paths below
            if who is not None:
                self.access.check_resource(who, request.method, parsed, request.query)
            return await self._resource(request, parsed, who or ADMIN)
        if who is not None:
            self.access.check_path(who, request.method, path)
        trimmed = path.rstrip("/") or "/"
        if trimmed in _HEALTH or any(path.startswith(h + "/") for h in _HEALTH):
            return web.Response(text="ok")
        if trimmed == "/version":
            return _json(dumps(discovery.version_info(self.version)))
        if path.startswith("/openapi/"):
            return await self.openapi.handle(request, trimmed)
        if parsed is None:
            return web.Response(status=404, text="404 page not found\n")
        return self._discovery(request, parsed)

    def _discovery(self, request: web.Request, where: GroupVersionPath) -> web.Response:
        if request.method != "GET":
            raise method_not_allowed()
        table = self.api.table
        body: discovery.DiscoveryDocument | None
        if where.legacy:
            legacy = discovery.api_resource_list(table, "", where.version) if where.version else None
            body = legacy if where.version else discovery.api_versions(self.address())
        elif not where.group:
            body = discovery.api_group_list(table)
        elif not where.version:
            body = discovery.api_group(table, where.group)
        else:
            body = discovery.api_resource_list(table, where.group, where.version)
        if body is None:
            raise resource_not_found()
        return _json(dumps(body))

    # resources ------------------------------------------------------------------------------------

    def _info(self, target: Target) -> ResourceInfo:
        info = self.api.table.lookup(target.group, target.version, target.plural)
        if info is None or (target.subresource and target.subresource not in info.subresources):
            raise resource_not_found()
        if not info.namespaced and target.namespace is not None:
            raise resource_not_found()
        if info.namespaced and target.name is not None and target.namespace is None:
            raise resource_not_found()
        return info

    async def _resource(self, request: web.Request, target: Target, who: UserInfo) -> web.StreamResponse:
        info = self._info(target)
        query = {key: request.query.get(key, "") for key in request.query}
        method = request.method
        if target.subresource and method not in _SUBRESOURCE_METHODS[target.subresource]:
            raise method_not_allowed()
        if target.subresource == "scale":
            return await self._scale(request, info, target)
        if target.subresource in ("log", "exec", "attach"):
            return await self._pod_log(request, info, target, query)
        if method == "GET" and (target.watch or (target.name is None and parse_bool(query, "watch"))):
            self._allow(info, "watch")
            return await self._watch(request, info, target, query)
        if method == "GET":
            self._allow(info, "get" if target.name is not None else "list")
            if target.name is not None:
                return self._get(request, info, target, query)
            return await self._list(request, info, target, query)
        if method == "DELETE" and target.name is None:
            self._allow(info, "deletecollection")
            return await self._delete_collection(request, info, target, query)
        if method not in _METHOD_VERBS:
            raise method_not_allowed()
        if target.subresource == "binding" and method == "POST":
            return await self._bind(request, info, target, target.name)
        if target.subresource == "eviction" and method == "POST":
            return await self._evict(request, info, target)
        if target.subresource == "token":
            return await self._token(request, info, target)
        if reviews.is_review(info) and method == "POST" and target.name is None:
            body = reviews.answer(
                self.access.authorizer, who, info, target.namespace or "", await self._body(request, info.kind)
            )
            return _json(dumps(body), 201)
        if method == "POST" and target.name is None and target.subresource == "":
            if info.namespaced and target.namespace is None:
                raise method_not_allowed()
            self._allow(info, "create")
            if info.plural == "bindings" and info.group == "":
                return await self._bind(request, info, target, None)
            return await self._create(request, info, target, query)
        if target.name is None or method == "POST":
            raise method_not_allowed()
        self._allow(info, _METHOD_VERBS[method])
        if method == "PUT":
            return await self._update(request, info, target, query)
        if method == "PATCH":
            return await self._patch(request, info, target, query)
        return await self._delete(request, info, target, query)

    def _admit(self, request: web.Request, info: ResourceInfo, target: Target, operation: str) -> Admit | None:
        """The request's admission; None (at the cost of two dict lookups) while no webhook is registered."""
        if not self.admission.active():
            return None
        namespace, name, subresource = target.namespace, target.name or "", target.subresource
        authorization, dry = request.headers.get("Authorization"), dry_run(request)
        return self.admission.admit(
            authorization, info, operation, namespace=namespace, name=name, subresource=subresource, dry_run=dry
        )

    @staticmethod
    def _allow(info: ResourceInfo, verb: str) -> None:
        if verb not in info.verbs:
            raise method_not_allowed()

    async def _body(self, request: web.Request, kind: str) -> Any:
        content_type = request.headers.get("Content-Type", "application/json").split(";")[0].strip().lower()
        if content_type not in _BODY_TYPES and content_type not in ("", "*/*", "text/plain"):
            raise unsupported_media_type(content_type, ["application/json", "application/yaml"])
        return decode_body(await read_body(request), content_type, kind)

    @staticmethod
    async def _delete_body(request: web.Request) -> Any:
        """The DeleteOptions sent (JSON, or protobuf from typed clients), None without a body."""
        raw = await read_body(request)
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
        wire = PROTOBUF if content_type == PROTOBUF else "application/json"
        return decode_body(raw, wire, "DeleteOptions") if raw.strip() else None

    def _one(self, request: web.Request, info: ResourceInfo, stored: Stored, status: int = 200) -> web.Response:
        """A single object in the requested rendering (kubectl asks for a one-row Table)."""
        served = self.api.served(info, stored)
        rendering = negotiate(request.headers.get("Accept", ""))
        if rendering.output is Output.TABLE:
            body = table_bytes(
                self.maker,
                info,
                [(stored, served)],
                self._table_request(rendering, request.query),
                rv=stored.rv,
                pods_on_node=self._pods_on_node,
                facts=self.api.store.facts,
            )
            return _json(body, status)
        if rendering.output is Output.PARTIAL:
            return _json(dumps(partial_object(served, rendering.version)), status)
        return _json(served, status)

    def _pods_on_node(self, node: str) -> list[PodGpu]:
        return pods_on_node(self.api, node)

    @staticmethod
    def _table_request(rendering: Rendering, query: Mapping[str, str]) -> TableRequest:
        include = query.get("includeObject", "") or "Metadata"
        if include not in ("None", "Metadata", "Object"):
            raise bad_request(f"includeObject must be None, Metadata or Object, got {include!r}")
        return TableRequest(rendering.version, include)

    def _get(self, request: web.Request, info: ResourceInfo, target: Target, query: Mapping[str, str]) -> web.Response:
        assert target.name is not None
        stored = self.api.get(self.api.storage_of(info), target.namespace or "", target.name)
        return self._one(request, info, stored)

    async def _list(
        self, request: web.Request, info: ResourceInfo, target: Target, query: Mapping[str, str]
    ) -> web.StreamResponse:
        flt = Filter.compile(info, target.namespace, query)
        at_rv, start = self._list_position(query)
        limit = parse_int(query, "limit") or 0
        if limit < 0:
            raise bad_request("limit must not be negative")
        store = self.api.store
        page = store.page(info, flt.namespace, flt.matcher, pinned=flt.pinned, start=start, limit=limit, at_rv=at_rv)
        token = encode_continue(page.rv, page.next_start) if page.next_start is not None else ""
        rendering = negotiate(request.headers.get("Accept", ""))
        if conversion.needs_conversion(info, self.api.storage_of(info)):
            served = [self.api.served(info, stored) for stored in page.items]
        else:
            served = [stored.raw for stored in page.items]
        if rendering.output is Output.TABLE:
            rows = list(zip(page.items, served, strict=True))
            table = self._table_request(rendering, request.query)
            return _json(
                table_bytes(
                    self.maker,
                    info,
                    rows,
                    table,
                    rv=page.rv,
                    continue_token=token,
                    pods_on_node=self._pods_on_node,
                    facts=self.api.store.facts,
                )
            )
        if rendering.output is Output.PARTIAL:
            return _json(partial_list_bytes(page.rv, token, served, rendering.version))
        if len(served) <= STREAM_ITEMS:
            return _json(list_bytes(info, page.rv, token, served))
        return await stream_list(request, list_parts(info, page.rv, token), served)

    def _list_position(self, query: Mapping[str, str]) -> tuple[int | None, Key | None]:
        """(resourceVersion to list at, key to start after) from continue / resourceVersionMatch."""
        token = query.get("continue", "")
        rv_text = query.get("resourceVersion", "")
        match = query.get("resourceVersionMatch", "")
        if token:
            if rv_text not in ("", "0"):
                raise bad_request("specifying resource version is not allowed when using continue")
            return decode_continue(token)
        if match not in ("", "NotOlderThan", "Exact"):
            raise bad_request(f'resourceVersionMatch "{match}" is not supported: use Exact or NotOlderThan')
        if match == "Exact":
            rv = parse_resource_version(rv_text)
            if rv is None:
                raise bad_request("resourceVersionMatch=Exact needs a resourceVersion other than 0")
            return min(rv, self.api.store.rv), None
        return None, None

    async def _create(
        self, request: web.Request, info: ResourceInfo, target: Target, query: Mapping[str, str]
    ) -> web.Response:
        body = await self._body(request, info.kind)
        admit = self._admit(request, info, target, CREATE)
        call = functools.partial(
            self.api.create,
            info,
            target.namespace or "",
            body,
            dry_run=dry_run(request),
            validation=field_validation(query),
            admit=admit,
            owner=_owner(request, query),
        )
        return self._one(request, info, await run(call, admit), 201)

    async def _update(
        self, request: web.Request, info: ResourceInfo, target: Target, query: Mapping[str, str]
    ) -> web.Response:
        assert target.name is not None
        body = await self._body(request, info.kind)
        admit = self._admit(request, info, target, UPDATE)
        call = functools.partial(
            self.api.update,
            info,
            target.namespace or "",
            target.name,
            body,
            subresource=target.subresource,
            dry_run=dry_run(request),
            validation=field_validation(query),
            admit=admit,
            owner=_owner(request, query),
        )
        return self._one(request, info, await run(call, admit))

    async def _patch(
        self, request: web.Request, info: ResourceInfo, target: Target, query: Mapping[str, str]
    ) -> web.Response:
        assert target.name is not None
        admit = self._admit(request, info, target, UPDATE)
        content_type = request.headers.get("Content-Type", "")
        owner, created = _owner(request, query), 200
        if content_type.split(";", maxsplit=1)[0].strip().lower() == APPLY_PATCH:
            # apply takes its manager only from the query (required there), never from the User-Agent
            manager = owner.manager if query.get("fieldManager") else ""
            owner = Owner(manager, force=parse_bool(query, "force"))
            existing = self.api.store.get(self.api.storage_of(info), target.namespace or "", target.name)
            created = 200 if existing is not None or target.subresource else 201  # an apply may create
        elif "force" in query:
            raise invalid(
                "PatchOptions",
                "",
                [field_forbidden("force", "may not be specified for non-apply patch")],
                "meta.k8s.io",
            )
        call = functools.partial(
            self.api.patch,
            info,
            target.namespace or "",
            target.name,
            content_type,
            await read_body(request),
            subresource=target.subresource,
            dry_run=dry_run(request),
            validation=field_validation(query),
            admit=admit,
            owner=owner,
        )
        return self._one(request, info, await run(call, admit), created)

    async def _delete(
        self, request: web.Request, info: ResourceInfo, target: Target, query: Mapping[str, str]
    ) -> web.Response:
        assert target.name is not None
        options = DeleteOptions.parse(await self._delete_body(request), query)
        admit = self._admit(request, info, target, DELETE)
        call = functools.partial(admitted_delete, self.api, info, target.namespace or "", target.name, options, admit)
        result = await run(call, admit)
        if result.gone and not info.returns_deleted_object:
            details: StatusDetails = {"name": result.stored.name, "kind": info.plural}
            if info.group:
                details["group"] = info.group
            details["uid"] = str(result.stored.obj()["metadata"].get("uid", ""))
            return _json(dumps(success_status(200, details)))
        return _json(self.api.served(info, result.stored))

    async def _delete_collection(
        self, request: web.Request, info: ResourceInfo, target: Target, query: Mapping[str, str]
    ) -> web.Response:
        if info.namespaced and target.namespace is None:
            raise method_not_allowed()
        options = DeleteOptions.parse(await self._delete_body(request), query)
        flt = Filter.compile(info, target.namespace, query)
        page = self.api.store.page(info, flt.namespace, flt.matcher, pinned=flt.pinned)
        results = []
        for stored in page.items:
            if self.api.store.get(info, stored.namespace, stored.name) is not None:
                results.append(delete(self.api, info, stored.namespace, stored.name, options).stored)
        return _json(list_bytes(info, self.api.store.rv, "", [self.api.served(info, s) for s in results]))

    async def _pod_log(
        self, request: web.Request, info: ResourceInfo, target: Target, query: dict[str, str]
    ) -> web.StreamResponse:
        """`pods/log` from the node's simulated kubelet (`podlog.py`); `pods/exec` and `attach` refused."""
        pod = podlog.pod_of(self.api.get(info, target.namespace or "", target.name or "").raw)
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        if target.subresource != "log":
            raise podlog.exec_refused(pod, podlog.pick_container(pod, query.get("container", "")), node)
        options = podlog.LogRequest.parse(query)
        container = podlog.pick_container(pod, options.container)
        podlog.check_started(pod, container, options.previous)
        kubelet = next((k for k in self.api.kubelets if k.manages(node)), None)
        name, namespace = target.name or "", target.namespace or ""
        found = kubelet.container_log(namespace, name, container, options.previous) if kubelet else None
        if found is None:
            raise bad_request(f'container "{container}" in pod "{name}": no log on node "{node}"')
        chosen = podlog.select(found.lines, options, time.time())
        if not options.follow:
            return web.Response(body=podlog.render(chosen, options), content_type="text/plain")
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        await response.write(podlog.render(chosen, options))
        shown = len(found.lines)
        while found is not None and found.running and kubelet is not None:
            await asyncio.sleep(podlog.FOLLOW_POLL_S)
            found = kubelet.container_log(namespace, name, container, False)
            if found is not None and len(found.lines) > shown:
                await response.write(podlog.render(found.lines[shown:], options))
                shown = len(found.lines)
        await response.write_eof()
        return response

    async def _scale(self, request: web.Request, info: ResourceInfo, target: Target) -> web.Response:
        """GET, PUT or PATCH `.../<name>/scale` (see `scale.py`)."""
        assert target.name is not None
        namespace, method = target.namespace or "", request.method
        self._allow(info, _METHOD_VERBS[method])
        if method == "GET":
            body = scale.get_scale(self.api, info, namespace, target.name)
        elif method == "PUT":
            scale_body = await self._body(request, "Scale")
            manager = _owner(request, request.query).manager
            body = scale.update_scale(self.api, info, namespace, target.name, scale_body, dry_run(request), manager)
        else:
            content_type = request.headers.get("Content-Type", "")
            raw = await request.read()
            manager = _owner(request, request.query).manager
            body = scale.patch_scale(
                self.api, info, namespace, target.name, content_type, raw, dry_run(request), manager
            )
        return _json(dumps(body))

    async def _bind(self, request: web.Request, info: ResourceInfo, target: Target, name: str | None) -> web.Response:
        if target.namespace is None:
            raise method_not_allowed()
        body, namespace = await self._body(request, "Binding"), target.namespace
        admit = self._admit(request, info, target, CREATE)
        await run(lambda: self.api.bind(namespace, name, admit.review(body) if admit else body), admit)
        return _json(_CREATED, 201)

    async def _evict(self, request: web.Request, info: ResourceInfo, target: Target) -> web.Response:
        """`POST pods/{name}/eviction`: delete the pod with the Eviction's DeleteOptions (no disruption
        budgets are checked)."""
        assert target.name is not None
        assert target.namespace is not None
        eviction = await self._body(request, "Eviction")
        if not isinstance(eviction, dict) or (eviction.get("metadata") or {}).get("name", target.name) != target.name:
            raise bad_request("name in URL does not match name in Eviction object")
        admit, namespace, name = self._admit(request, info, target, CREATE), target.namespace, target.name
        reviewed = await run(lambda: admit.review(eviction), admit) if admit else eviction
        delete(self.api, info, namespace, name, DeleteOptions.parse(reviewed.get("deleteOptions"), {}))
        return _json(dumps(success_status(201)), 201)

    async def _token(self, request: web.Request, info: ResourceInfo, target: Target) -> web.Response:
        """`POST serviceaccounts/{name}/token` (TokenRequest): a token naming the ServiceAccount."""
        assert target.name is not None
        namespace = target.namespace or ""
        self.api.get(self.api.storage_of(info), namespace, target.name)  # 404 for a missing ServiceAccount
        body = await self._body(request, "TokenRequest")
        now = datetime.datetime.fromtimestamp(self.api.clock(), datetime.UTC)
        answered = reviews.token_request(self.access.identities, namespace, target.name, body, now)
        return _json(dumps(answered), 201)

    # watch ------------------------------------------------------------------------------------------

    async def _watch(
        self, request: web.Request, info: ResourceInfo, target: Target, query: dict[str, str]
    ) -> web.StreamResponse:
        if target.name is not None:
            selector = query.get("fieldSelector", "")
            query["fieldSelector"] = f"metadata.name={target.name}" + (f",{selector}" if selector else "")
        flt = Filter.compile(info, target.namespace, query)
        send_initial = parse_bool(query, "sendInitialEvents")
        bookmarks = parse_bool(query, "allowWatchBookmarks")
        if send_initial:
            check_initial_events(query, bookmarks)
        timeout = parse_int(query, "timeoutSeconds")
        rendering = negotiate(request.headers.get("Accept", ""))
        watch = WatchRequest(
            info,
            flt,
            parse_resource_version(query.get("resourceVersion", "")),
            send_initial=send_initial,
            bookmarks=bookmarks,
            timeout=float(timeout) if timeout else self.watch_timeout,
            table=self._table_request(rendering, request.query) if rendering.output is Output.TABLE else None,
        )
        response = web.StreamResponse(
            status=200, headers={"Content-Type": "application/json", "Cache-Control": "no-cache, private"}
        )
        response.enable_chunked_encoding()
        await response.prepare(request)
        stream = WatchStream(self.api, self.maker, self.waker(), watch, response.write, self.bookmark_interval)
        try:
            await stream.run()
            await response.write_eof()
        except (ConnectionResetError, ConnectionError):
            pass
        except Exception:
            log.exception("watch %s failed", request.path_qs)
        return response

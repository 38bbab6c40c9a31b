"""A recording proxy in front of the embedded API server, and the RBAC check of what it recorded.

`RecordingProxy(upstream).start()` serves `url`, forwards every request to the upstream server
(streaming answers, so watches work) and records it; `fail_once(method, pattern, code)` answers the
next matching request with an error Status instead (to drive a component down its retry paths).
`attributes()` turns a request into what the Kubernetes authorizer sees (verb, API group, resource,
subresource, namespace, name; the rules of k8s.io/apiserver's RequestInfoFactory), and `RbacPolicy`
decides, as the RBAC authorizer does, whether a ServiceAccount's Roles and ClusterRoles allow it.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "upgrade"}
NAMESPACE_SUBRESOURCES = {"status", "finalize"}


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    query: tuple[tuple[str, str], ...]

    @property
    def watch(self) -> bool:
        return any(k == "watch" and v.lower() in ("1", "true") for k, v in self.query)


@dataclass(frozen=True)
class Attributes:
    verb: str
    group: str
    resource: str  # with "/subresource" when there is one, as RBAC rules name it
    namespace: str
    name: str

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        named = f" {self.name}" if self.name else ""
        return f"{self.verb} {self.group or 'core'}/{self.resource}{named}{where}"


def attributes(request: Recorded) -> Attributes | None:
    """What the authorizer sees for a request; None for non-resource URLs (/version, /api, ...)."""
    parts = [p for p in request.path.split("/") if p]
    if len(parts) >= 3 and parts[0] == "api":
        group, rest = "", parts[2:]
    elif len(parts) >= 4 and parts[0] == "apis":
        group, rest = parts[1], parts[3:]
    else:
        return None
    watch = request.watch
    if rest and rest[0] == "watch":
        watch, rest = True, rest[1:]
    namespace = ""
    if len(rest) >= 2 and rest[0] == "namespaces":
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    if not rest:
        return None
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    if len(rest) > 2:
        resource = f"{resource}/{rest[2]}"
    verb = {
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete" if name else "deletecollection",
    }.get(request.method, "")
    if request.method == "GET":
        verb = "watch" if watch else ("get" if name else "list")
    return Attributes(verb, group, resource, namespace, name)


@dataclass(frozen=True)
class Grant:
    """One (verb, group, resource) of one rule, with the rule's scope."""

    verb: str
    group: str
    resource: str
    namespace: str | None  # None: every namespace and cluster-scoped objects (a ClusterRole bound cluster-wide)
    names: tuple[str, ...]
    source: str

    def allows(self, a: Attributes) -> bool:
        return (
            self.verb in (a.verb, "*")
            and self.group in (a.group, "*")
            and self.resource in (a.resource, "*")
            and (self.namespace is None or self.namespace == a.namespace)
            and (not self.names or a.name in self.names)
        )

    def __str__(self) -> str:
        where = "cluster-wide" if self.namespace is None else f"in {self.namespace}"
        names = f" {list(self.names)}" if self.names else ""
        return f"{self.verb} {self.group or 'core'}/{self.resource}{names} {where} ({self.source})"


@dataclass
class RbacPolicy:
    """The grants of one ServiceAccount, from the Roles, ClusterRoles and bindings of a manifest set."""

    grants: list[Grant] = field(default_factory=list)

    @classmethod
    def for_service_account(cls, objs: Iterable[Mapping[str, Any]], namespace: str, name: str) -> RbacPolicy:
        objs = list(objs)
        roles = {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objs}
        policy = cls()
        for binding in objs:
            if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
                continue
            subjects = binding.get("subjects") or []
            if not any(
                s["kind"] == "ServiceAccount" and s["name"] == name and s.get("namespace") == namespace
                for s in subjects
            ):
                continue
            bound_ns = binding["metadata"].get("namespace", "") if binding["kind"] == "RoleBinding" else None
            ref = binding["roleRef"]
            role_ns = (bound_ns or "") if ref["kind"] == "Role" else ""
            role = roles[(ref["kind"], role_ns, ref["name"])]
            source = f"{ref['kind']} {ref['name']}"
            for rule in role.get("rules") or []:
                for verb in rule["verbs"]:
                    for group in rule["apiGroups"]:
                        for resource in rule["resources"]:
                            names = tuple(rule.get("resourceNames") or ())
                            policy.grants.append(Grant(verb, group, resource, bound_ns, names, source))
        return policy

    def allows(self, a: Attributes) -> bool:
        return any(g.allows(a) for g in self.grants)

    def unused(self, seen: Iterable[Attributes]) -> list[Grant]:
        seen = list(seen)
        return [g for g in self.grants if not any(g.allows(a) for a in seen)]


@dataclass
class Fault:
    method: str
    pattern: re.Pattern[str]
    code: int
    reason: str


class RecordingProxy:
    """See the module docstring. Thread-safe; `stop()` ends open watches."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.requests: list[Recorded] = []
        self.injected: list[Recorded] = []
        self.url = ""
        self._faults: list[Fault] = []
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="recording-proxy", daemon=True)

    def start(self) -> RecordingProxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise TimeoutError("the recording proxy did not start")
        return self

    def stop(self) -> None:
        loop = self._loop
        if loop is not None and self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
            self._thread.join(10)

    def fail_once(self, method: str, pattern: str, code: int = 409, reason: str = "Conflict") -> None:
        with self._lock:
            self._faults.append(Fault(method, re.compile(pattern), code, reason))

    def seen(self) -> list[Attributes]:
        with self._lock:
            found = [attributes(r) for r in self.requests]
        return [a for a in found if a is not None]

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        loop.run_until_complete(self._serve())
        self._ready.set()
        loop.run_forever()
        loop.close()

    async def _serve(self) -> None:
        self._session = aiohttp.ClientSession(auto_decompress=False, timeout=aiohttp.ClientTimeout(total=None))
        app = web.Application(client_max_size=64 << 20)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"

    async def _shutdown(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def _take_fault(self, request: Recorded) -> Fault | None:
        with self._lock:
            self.requests.append(request)
            for fault in self._faults:
                if fault.method == request.method and fault.pattern.search(request.path):
                    self._faults.remove(fault)
                    self.injected.append(request)
                    return fault
        return None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        recorded = Recorded(request.method, request.path, tuple(request.rel_url.query.items()))
        fault = self._take_fault(recorded)
        if fault is not None:
            status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "injected by the test",
                      "reason": fault.reason, "code": fault.code}  # fmt: skip
            return web.json_response(status, status=fault.code)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        assert self._session is not None
        async with self._session.request(
            request.method, f"{self.upstream}{request.raw_path}", data=body or None, headers=headers
        ) as upstream:
            response = web.StreamResponse(
                status=upstream.status,
                headers={k: v for k, v in upstream.headers.items() if k.lower() not in HOP_BY_HOP},
            )
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response

"""`ApiServer`: the embedded Kubernetes-compatible API server, in-process or standalone.

`ApiServer(...).start()` runs an aiohttp server on its own event loop in a background thread and
returns once it accepts connections; `url` is then set (port 0 picks a free port). `stop()` ends
serving but keeps the objects, so `start()` again looks like an API server restart to clients;
`close()` (and leaving a `with` block) also closes the state database. When built, it restores
objects from `state_dir` (when given) and creates the namespaces every cluster has (`default`,
`kube-system`, `kube-public`, `kube-node-lease`). In-process code may also use `api` (write
semantics) and `store` directly; both are thread-safe.
Callers: test fixtures (`tests/fixtures/apiserver.py`), the embedded cluster, `runtimekit apiserver`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import TracebackType
from typing import cast

from aiohttp import HttpVersion11, web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http_parser import RawRequestMessage
from aiohttp.streams import StreamReader
from aiohttp.web_protocol import RequestHandler

from runtimekit.base.threads import Workers
from runtimekit.cluster.apiserver.admission.requests import Admission
from runtimekit.cluster.apiserver.authz.access import Access
from runtimekit.cluster.apiserver.authz.authorizer import Authorizer
from runtimekit.cluster.apiserver.authz.reviews import review_resources
from runtimekit.cluster.apiserver.bodies import MAX_BODY_BYTES, allow_deep_json
from runtimekit.cluster.apiserver.bootstrap import bootstrap, publish_endpoints
from runtimekit.cluster.apiserver.deletion import KubeletHook
from runtimekit.cluster.apiserver.discovery import KubernetesVersion
from runtimekit.cluster.apiserver.handlers import Handlers
from runtimekit.cluster.apiserver.identity import ADMIN, Identities, UserInfo
from runtimekit.cluster.apiserver.kubeconfig import write_kubeconfig
from runtimekit.cluster.apiserver.openapi import schema_version, shapes_for
from runtimekit.cluster.apiserver.openapiserve import OpenApi
from runtimekit.cluster.apiserver.operations import Api
from runtimekit.cluster.apiserver.persist import SqlitePersistence
from runtimekit.cluster.apiserver.resources import ResourceTable
from runtimekit.cluster.apiserver.store import DEFAULT_HISTORY_BYTES, Store
from runtimekit.cluster.apiserver.tables import TableMaker
from runtimekit.cluster.apiserver.watch import Waker
from runtimekit.protocol import KitProtocol

log = logging.getLogger(__name__)

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
DEFAULT_VERSION = "1.31"


class ApiServer:
    """A started server serves `url`; `stop()` is idempotent."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        kubernetes_version: str = DEFAULT_VERSION,
        state_dir: str | Path | None = None,
        history_size: int = 100_000,
        history_bytes: int = DEFAULT_HISTORY_BYTES,
        bookmark_interval: float = 60.0,
        watch_timeout: float = 1800.0,
        protocol: KitProtocol | None = None,
        clock: Callable[[], float] = time.time,
        seed: int | None = None,
    ) -> None:
        if not 0 <= port <= 65535:
            raise ValueError(f"port must be 0-65535, got {port}")
        if bookmark_interval <= 0 or watch_timeout <= 0:
            raise ValueError("bookmark_interval and watch_timeout must be positive")
        self.host, self.port = host, port
        self.version = KubernetesVersion.parse(kubernetes_version)
        self.bookmark_interval, self.watch_timeout = bookmark_interval, watch_timeout
        self.table = ResourceTable.builtin()
        self.table.add(review_resources())
        self.maker = TableMaker(protocol or KitProtocol.default(), clock)
        self._persistence = SqlitePersistence(state_dir) if state_dir is not None else None
        start_rv = self._persistence.rv if self._persistence is not None else 0
        self.store = Store(
            facts=self.maker.facts,
            history_size=history_size,
            history_bytes=history_bytes,
            start_rv=start_rv,
            persistence=self._persistence,
        )
        definitions = schema_version(self.version.major, self.version.minor)
        shapes = shapes_for(definitions)
        self.api = Api(self.table, self.store, clock=clock, rng=random.Random(seed), shapes=shapes)
        self.identities = Identities()  # bearer tokens of the kubeconfigs written, to who they name
        self.admission = Admission(self.store, self.table, self.identities)  # webhooks called for HTTP requests
        self.openapi = OpenApi(self.table, self.store, definitions, self.version.git_version)
        self.access = Access(self.identities, Authorizer(self.store, self.table))  # RBAC for non-admin requests
        allow_deep_json()
        self._restore()
        self._bootstrap()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._workers: Workers | None = None  # one set per start: a stopped server may start again
        self._runner: web.ServerRunner | None = None
        self._waker: Waker | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._closed = False
        self.url = ""

    # state ------------------------------------------------------------------------------------

    def _restore(self) -> None:
        if self._persistence is None:
            return
        restored = 0
        for storage, raw in self._persistence.load():
            info = self.table.storage_resource(storage)
            if info is None:
                log.warning("state: skipping an object of %s, a kind this server no longer serves", storage)
                continue
            stored = self.store.load(info, raw)
            restored += 1
            if info.group == "apiextensions.k8s.io":
                from runtimekit.cluster.apiserver.crds import CustomResourceDefinition

                self.api.register_crd(cast(CustomResourceDefinition, stored.obj()))
            elif info.kind == "Namespace" and stored.obj()["metadata"].get("deletionTimestamp"):
                self.api.terminating.add(stored.name)
        log.info("state: restored %d objects, resourceVersion %d", restored, self.store.rv)

    def _bootstrap(self) -> None:
        namespaces = self.api.resource("", "v1", "namespaces")
        for name in SYSTEM_NAMESPACES:
            if self.store.get(namespaces, "", name) is None:
                self.api.create(namespaces, "", {"metadata": {"name": name}})
        bootstrap(self.api)

    def add_kubelet_hook(self, hook: KubeletHook) -> None:
        """Let a simulated kubelet carry out graceful deletion of the pods on the nodes it manages."""
        self.api.kubelets.append(hook)

    def remove_kubelet_hook(self, hook: KubeletHook) -> None:
        if hook in self.api.kubelets:
            self.api.kubelets.remove(hook)

    def write_kubeconfig(self, path: str | Path, namespace: str = "default", user: UserInfo = ADMIN) -> Path:
        """A kubeconfig whose token names `user` (the cluster admin by default) to this server."""
        if not self.url:
            raise RuntimeError("start the server before writing a kubeconfig for it")
        return write_kubeconfig(path, self.url, namespace, self.identities.issue(user))

    # lifecycle --------------------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> ApiServer:
        if self._workers is not None:
            raise RuntimeError("the API server is already started")
        if self._closed:
            raise RuntimeError("the API server is closed; make a new one")
        self._workers = Workers("apiserver")
        self._workers.spawn("runtimekit-apiserver", self._run)
        if not self._ready.wait(timeout):
            raise TimeoutError(f"the API server did not start within {timeout} s")
        if self._failure is not None:
            self._workers.stop(None)
            self._workers = None
            raise RuntimeError(f"the API server failed to start: {self._failure}") from self._failure
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._serve())
        except BaseException as exc:  # reported to start()
            self._failure = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self._shutdown())
            loop.close()

    async def _serve(self) -> None:
        waker = Waker(asyncio.get_running_loop())
        self._waker = waker
        self.store.add_listener(waker.notify)
        handlers = Handlers(
            self.api,
            self.maker,
            self.version,
            lambda: waker,
            self.bookmark_interval,
            self.watch_timeout,
            lambda: f"{self.host}:{self.port}",
            self.admission,
            self.openapi,
            self.access,
        )
        # aiohttp's low-level server: every path goes to one handler, so an Application's router (a
        # regex match and a match-info object per request) would only cost CPU on every request
        web_server = web.Server(
            functools.partial(_serve, handlers.handle),
            request_factory=_request_factory(asyncio.get_running_loop()),
            handler_cancellation=True,
            access_log=None,
        )
        self._runner = web.ServerRunner(web_server, shutdown_timeout=2.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = sockets[0].getsockname()[1]
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"http://{host}:{self.port}"
        publish_endpoints(self.api, self.host, self.port)
        log.info("API server (Kubernetes %s) serving on %s", self.version.git_version, self.url)

    async def _shutdown(self) -> None:
        if self._waker is not None:
            self.store.remove_listener(self._waker.notify)
            self._waker.close()
        if self._runner is not None:
            await self._runner.cleanup()

    def end_watches(self) -> None:
        """End every watch open now, as if each had reached its timeout; later watches run as usual.
        A cluster that stops calls it once its informers are told to stop, so they leave at once
        instead of at their next bookmark. Safe from any thread."""
        loop, waker = self._loop, self._waker
        if loop is not None and waker is not None and not loop.is_closed():
            loop.call_soon_threadsafe(waker.end_round)

    def stop(self) -> None:
        """Stop serving: connections and watches end, the objects and their history stay, and
        `start()` serves them again on the same port (what clients see of an API server restart).
        Idempotent."""
        loop, workers = self._loop, self._workers
        if loop is not None and workers is not None and workers.alive():
            loop.call_soon_threadsafe(loop.stop)
            workers.stop(30.0)
        self._workers = None
        self._ready.clear()
        self._failure = None

    def close(self) -> None:
        """Stop serving and close the state database; the server cannot be started again."""
        self.stop()
        self._closed = True
        if self._persistence is not None:
            self._persistence.close()
            self._persistence = None

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _request_factory(
    loop: asyncio.AbstractEventLoop,
) -> Callable[[RawRequestMessage, StreamReader, RequestHandler, AbstractStreamWriter, asyncio.Task[None]], web.Request]:
    """Requests as an Application makes them, with the body limit kube-apiserver has."""

    def make(
        message: RawRequestMessage,
        payload: StreamReader,
        protocol: RequestHandler,
        writer: AbstractStreamWriter,
        task: asyncio.Task[None],
    ) -> web.Request:
        # aiohttp refuses bodies of client_max_size bytes or more
        return web.Request(message, payload, protocol, writer, task, loop, client_max_size=MAX_BODY_BYTES + 1)

    return make


async def _serve(
    handle: Callable[[web.Request], Awaitable[web.StreamResponse]], request: web.BaseRequest
) -> web.StreamResponse:
    """One request: `Expect: 100-continue` answered first, as an Application's router does (curl waits
    a second for it before it sends a body over 1 KiB), then `handle`."""
    assert isinstance(request, web.Request)  # made by `_request_factory`
    expect = request.headers.get("Expect")
    if expect and request.version == HttpVersion11:
        if expect.lower() == "100-continue":
            await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            request.writer.output_size = 0  # the body of the answer has not started yet
            await request.writer.drain()
        else:
            raise web.HTTPExpectationFailed(text=f"Unknown Expect: {expect}")
    return await handle(request)

"""Serve the runtime's gRPC API: the full API on its socket, the exporter's part on a second one.

Why asyncio: every open `WatchDevices` stream held one of the sync server's 16 threads, so 16
watchers (a device plugin restarting in a loop, or anyone on the socket) left no thread for
`Allocate` and pods stopped starting. Here both sockets are `grpc.aio` servers on one event loop
in a thread of their own: a stream is a coroutine waiting for the next device change (no thread),
and unary calls run the (blocking) servicer methods of `grpc_api` on a pool of `workers` threads
that streams never touch. Thousands of streams cost memory, not threads.

Least privilege: the exporter socket (`exporter_socket(path)`, by default `exporter/` beside the main
one) answers only `EXPORTER_METHODS`: the methods that change nothing (version, devices and their
watch, allocations, status, exporter data) and `SetDeviceHealth`, which the exporter's health
detector uses to mark GPUs (a mark only keeps new pods off a GPU). Allocate, Release, Enable,
Disable and InjectFault answer PERMISSION_DENIED there, so an exporter, or whoever takes it over,
cannot take or free GPUs, switch the runtime off or fake faults. The main socket is mode 0660
root:root; the exporter socket is 0660 with `exporter_group` as its group (the exporter's), or the
runtime's own group when none is given (never world-writable: anyone on the node could mark GPUs).
Unix socket permissions are the boundary: gRPC's Python server does not expose the peer's
credentials (SO_PEERCRED), so per-method checks by caller are not possible on one socket.

`RuntimeServer.stop(grace)` stops accepting, lets calls in flight finish for up to `grace` seconds,
then waits for the pool, so no call runs after it returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent import futures
from pathlib import Path
from typing import Any, TypeAlias, cast

import grpc

from runtimekit.api.kubelet import unix_target
from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.api.runtimekit.v1 import runtime_pb2_grpc as pb_grpc
from runtimekit.base.unixsockets import check_path
from runtimekit.protocol.loader import Sockets
from runtimekit.runtime.devices import DeviceTable
from runtimekit.runtime.grpc_api import (
    WATCH_POLL_S,
    AdminServicer,
    ConfigServicer,
    ExporterServicer,
    RuntimeServicer,
    device_message,
)
from runtimekit.runtime.service import NodeRuntime

log = logging.getLogger(__name__)
Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"

READ_ONLY_METHODS = frozenset(
    {
        "/runtimekit.v1.RuntimeService/GetVersion",
        "/runtimekit.v1.RuntimeService/ListDevices",
        "/runtimekit.v1.RuntimeService/WatchDevices",
        "/runtimekit.v1.RuntimeService/ListAllocations",
        "/runtimekit.v1.ExporterService/ExporterGetDataList",
        "/runtimekit.v1.ConfigService/GetStatus",
    }
)
EXPORTER_METHODS = READ_ONLY_METHODS | {"/runtimekit.v1.RuntimeService/SetDeviceHealth"}
WATCH_METHOD = "/runtimekit.v1.RuntimeService/WatchDevices"


def exporter_socket(socket_path: str) -> str:
    """Where the exporter socket of a runtime serving `socket_path` is: `<dir>/exporter/<name>`
    (the protocol's `sockets.exporter` for its `sockets.runtime`)."""
    return Sockets(runtime=socket_path).exporter


class _Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code, self.details = code, details


class _ThreadContext:
    """What a sync servicer method sees of its call while it runs on a pool thread: `abort` raises
    (as in the sync server) and is answered by the event loop; the rest is the call's own context."""

    def __init__(self, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        self._context = context

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise _Aborted(code, details)

    def is_active(self) -> bool:
        return not self._context.done()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


class _Capture:
    """Stands in for a server to collect the method handlers a generated `add_..._to_server` registers."""

    def __init__(self) -> None:
        self.handlers: dict[str, Handler] = {}

    def add_generic_rpc_handlers(self, handlers: object) -> None:
        """The same handlers are registered by name below."""

    def add_registered_method_handlers(self, service: str, handlers: Mapping[str, Handler]) -> None:
        for method, handler in handlers.items():
            self.handlers[f"/{service}/{method}"] = handler


class _Changes:
    """Device-table changes for coroutines: one thread waits on the table and wakes them."""

    def __init__(self, table: DeviceTable, loop: asyncio.AbstractEventLoop) -> None:
        self._table, self._loop = table, loop
        self._event = asyncio.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="runtime-rpc-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._table.wake()
        self._thread.join(5.0)

    def current(self) -> asyncio.Event:
        """The event set at the next change (take it before reading the table: no change is missed)."""
        return self._event

    def _run(self) -> None:
        generation = self._table.snapshot().generation
        while not self._stopped.is_set() and not self._table.closed:
            changed = self._table.wait_change(generation, WATCH_POLL_S)
            if changed is not None:
                generation = changed.generation
                self._loop.call_soon_threadsafe(self._fire)
        self._loop.call_soon_threadsafe(self._fire)

    def _fire(self) -> None:
        fired, self._event = self._event, asyncio.Event()
        fired.set()


def _unary(method: Callable[[Any, Any], Any], pool: futures.Executor) -> Callable[..., Any]:
    async def call(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        try:
            return await asyncio.get_running_loop().run_in_executor(pool, method, request, _ThreadContext(context))
        except _Aborted as exc:
            await context.abort(exc.code, exc.details)

    return call


def _refused(method: str) -> Callable[..., Any]:
    why = f"{method} is not served on the runtime's exporter socket; it needs the runtime's main socket"

    async def call(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        await context.abort(grpc.StatusCode.PERMISSION_DENIED, why)

    return call


class RuntimeServer:
    """The runtime's API on `socket_path` and the exporter's part on `exporter_path` (None: none)."""

    def __init__(
        self,
        runtime: NodeRuntime,
        socket_path: str,
        exporter_path: str | None = None,
        exporter_group: int | None = None,
        workers: int = 16,
    ) -> None:
        self.runtime = runtime
        self.socket_path, self.exporter_path, self.exporter_group = socket_path, exporter_path, exporter_group
        self._pool = futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="runtime-rpc")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="runtime-rpc-loop", daemon=True)
        self._servers: list[grpc.aio.Server] = []
        self._changes: _Changes | None = None
        self._stopped = False

    def start(self) -> RuntimeServer:
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(30.0)
        except BaseException:
            self.stop(0)
            raise
        return self

    def _handlers(self) -> dict[str, Handler]:
        capture = _Capture()
        server = cast(grpc.Server, capture)  # the generated functions call only the two methods it has
        rt = self.runtime
        pb_grpc.add_RuntimeServiceServicer_to_server(RuntimeServicer(rt), server)
        pb_grpc.add_ExporterServiceServicer_to_server(ExporterServicer(rt), server)
        pb_grpc.add_ConfigServiceServicer_to_server(ConfigServicer(rt), server)
        pb_grpc.add_AdminServiceServicer_to_server(AdminServicer(rt), server)
        handlers = {}
        for name, handler in capture.handlers.items():
            if name == WATCH_METHOD:
                handlers[name] = grpc.unary_stream_rpc_method_handler(
                    self._watch_devices, handler.request_deserializer, handler.response_serializer
                )
            elif handler.unary_unary is not None:
                handlers[name] = grpc.unary_unary_rpc_method_handler(
                    _unary(handler.unary_unary, self._pool), handler.request_deserializer, handler.response_serializer
                )
            else:  # pragma: no cover - the API has no other streaming method
                raise RuntimeError(f"{name}: only unary methods and WatchDevices are served")
        return handlers

    async def _start(self) -> None:
        self._changes = _Changes(self.runtime.devices, asyncio.get_running_loop())
        self._changes.start()
        handlers = self._handlers()
        await self._listen(self.socket_path, handlers, 0o660, None)
        if self.exporter_path:
            exporter = {
                name: handler if name in EXPORTER_METHODS else _refused_handler(name, handler)
                for name, handler in handlers.items()
            }
            group = os.getegid() if self.exporter_group is None else self.exporter_group
            await self._listen(self.exporter_path, exporter, 0o660, group)

    async def _listen(self, socket_path: str, handlers: Mapping[str, Handler], mode: int, group: int | None) -> None:
        check_path(socket_path, "the runtime's exporter socket" if socket_path == self.exporter_path else "its socket")
        path = Path(socket_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() or path.is_symlink():
            path.unlink()
        server = grpc.aio.server()
        by_service: dict[str, dict[str, Handler]] = {}
        for name, handler in handlers.items():
            service, method = name.strip("/").split("/")
            by_service.setdefault(service, {})[method] = handler
        server.add_generic_rpc_handlers(
            [grpc.method_handlers_generic_handler(service, methods) for service, methods in by_service.items()]
        )
        if server.add_insecure_port(unix_target(str(path))) == 0:
            raise OSError(f"cannot listen on {path}")
        await server.start()
        self._servers.append(server)
        if group is not None:
            os.chown(path, -1, group)
        os.chmod(path, mode)

    async def _watch_devices(
        self, request: pb.WatchDevicesRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[pb.WatchDevicesResponse]:
        """Every device snapshot from now on: the current one, then one per change, until the client
        goes or the runtime stops."""
        table, changes = self.runtime.devices, self._changes
        assert changes is not None
        wake = changes.current()
        snapshot = table.snapshot()
        while not table.closed:
            yield pb.WatchDevicesResponse(
                devices=[device_message(d) for d in snapshot.devices], generation=snapshot.generation
            )
            while True:
                if table.closed or self._stopped:
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), WATCH_POLL_S)
                wake = changes.current()
                changed = table.wait_change(snapshot.generation, 0)
                if changed is not None:
                    snapshot = changed
                    break

    def stop(self, grace_s: float = 1.0) -> None:
        """Stop both sockets; calls in flight get `grace_s` seconds, then the pool is drained. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        if self._thread.is_alive():
            try:
                asyncio.run_coroutine_threadsafe(self._stop(grace_s), self._loop).result(grace_s + 30.0)
            except (TimeoutError, RuntimeError) as exc:  # pragma: no cover - a wedged loop
                log.warning("runtime gRPC servers did not stop cleanly: %s", exc)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10.0)
        self._pool.shutdown(wait=True)
        if not self._thread.is_alive():
            self._loop.close()

    async def _stop(self, grace_s: float) -> None:
        await asyncio.gather(*(server.stop(grace_s) for server in self._servers))
        if self._changes is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._changes.stop)


def _refused_handler(name: str, handler: Handler) -> Handler:
    deserialize, serialize = handler.request_deserializer, handler.response_serializer
    return grpc.unary_unary_rpc_method_handler(_refused(name), deserialize, serialize)


def serve(
    runtime: NodeRuntime,
    socket_path: str,
    exporter_path: str | None = None,
    exporter_group: int | None = None,
    workers: int = 16,
) -> RuntimeServer:
    """Start serving (stale socket files are replaced); see `RuntimeServer`."""
    return RuntimeServer(runtime, socket_path, exporter_path, exporter_group, workers).start()

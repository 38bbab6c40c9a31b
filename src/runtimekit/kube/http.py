"""Raw JSON access to a Kubernetes API server over the connection lightkube configures.

lightkube reads the kubeconfig (or the in-cluster service account) and builds an HTTP client with
the server URL, TLS and credentials; `KubeHttp` sends plain requests through it and returns dicts
(`kube.objects.JsonObject`), which the caller that knows their kind casts to it (`Pod`, `Node`, ...).
The informers, the scheduler's binder and the controller use it where typed models would only be
converted back to dicts (list and watch of thousands of pods). Errors are `runtimekit.kube.errors`
exceptions chosen by the server's `Status` code, with its reason and message, so callers can tell
a conflict from a missing object, and a temporary failure from a permanent one.
"""

from __future__ import annotations

import http.client
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx
import msgspec
from lightkube.config import client_adapter
from lightkube.config.kubeconfig import KubeConfig, SingleConfig
from lightkube.config.models import Cluster, User
from lightkube.core.exceptions import ConfigError

from runtimekit.kube import jsoncodec
from runtimekit.kube.errors import KubeError, UnavailableError
from runtimekit.kube.objects import JsonObject
from runtimekit.kube.plainhttp import PlainHttp
from runtimekit.kube.ratelimit import RequestLimiter

QueryParams = Mapping[str, str | int | bool | None]
"""A request's query parameters (`labelSelector`, `limit`, `watch`...); a None value is left out."""
PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
}


def error_of(status_code: int, reason: str, content: bytes) -> KubeError:
    """The error of an answer: the server's `Status` object when the body is one, else the HTTP status."""
    text = content.decode(errors="replace")
    try:
        status = jsoncodec.loads(content)
        return KubeError.of(
            int(status.get("code", status_code)), str(status.get("reason", "")), str(status.get("message", text))
        )
    except (ValueError, AttributeError):
        return KubeError.of(status_code, reason, text[:500])


def unreachable(what: str, exc: BaseException) -> UnavailableError:
    return UnavailableError(f"{what}: {exc}", 0, "Unreachable")


class KubeConfigError(ValueError):
    """No usable connection config; the message is one line naming where it looked and what to do."""


def load_config(
    kubeconfig: str | os.PathLike[str] | None = None, server: str | None = None, master: str | None = None
) -> SingleConfig:
    """The connection config: an explicit server URL, a kubeconfig file, `$KUBECONFIG`, the in-cluster
    service account, or `~/.kube/config`, in that order. `master` replaces the server address of
    whichever config is found, keeping its credentials (client-go's `--master`); with no config at
    all it is used alone. A missing or unusable config is KubeConfigError."""
    if master:
        try:
            config = load_config(kubeconfig)
        except (OSError, ValueError, ConfigError):
            return load_config(server=master)
        return config._replace(cluster=msgspec.structs.replace(config.cluster, server=master))
    if server:
        return _single(KubeConfig.from_one(cluster=Cluster(server=server), user=User()))
    path = kubeconfig or os.environ.get("KUBECONFIG")
    in_cluster = not path and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
    where = "the in-cluster service account" if in_cluster else f"kubeconfig {path or Path.home() / '.kube' / 'config'}"
    try:
        if path:
            config = _single(KubeConfig.from_file(Path(path)))
        elif in_cluster:
            config = _single(KubeConfig.from_service_account())
        else:
            config = _single(KubeConfig.from_file(Path.home() / ".kube" / "config"))
    except Exception as exc:  # lightkube raises its ConfigError, KeyError, OSError... for a bad file
        reason = f"it has no {exc.args[0]!r}" if isinstance(exc, KeyError) and exc.args else str(exc) or repr(exc)
        raise KubeConfigError(
            f"cannot use {where}: {' '.join(reason.split())}; give --kubeconfig FILE (or an API server URL "
            "where accepted), set KUBECONFIG, or run in a pod with a service account"
        ) from None
    if config.user is None:  # a kubeconfig without credentials (e.g. the embedded cluster's)
        config = _single(KubeConfig.from_one(cluster=config.cluster, user=User(), namespace=config.namespace))
    return config


def _single(config: KubeConfig) -> SingleConfig:
    single = config.get()
    if single is None:
        raise KubeConfigError("the kubeconfig has no current context")
    return single


@dataclass(frozen=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
    object: JsonObject  # of the kind watched: the caller, which knows it, casts it


class KubeHttp:
    """Thread-safe: one pooled HTTP client shared by every caller."""

    def __init__(self, config: SingleConfig, timeout: float = 30.0, user_agent: str = "runtimekit") -> None:
        params = client_adapter.ConnectionParams(timeout=httpx.Timeout(timeout), trust_env=False)
        self._client = client_adapter.Client(config, params)
        self._client.headers["User-Agent"] = user_agent
        # Requests with an answer go through the standard library (a third of httpx's CPU) when the
        # credentials allow; watches, and exec or auth-provider credentials, through httpx.
        self._plain = PlainHttp(config, timeout, user_agent) if PlainHttp.supports(config) else None
        self.server = str(config.cluster.server)
        self.namespace = config.namespace or "default"
        self.limiter: RequestLimiter | None = None

    @classmethod
    def connect(
        cls, kubeconfig: str | None = None, server: str | None = None, master: str | None = None, **kwargs: Any
    ) -> KubeHttp:
        return cls(load_config(kubeconfig, server, master), **kwargs)

    def limit(self, qps: float, burst: int) -> None:
        """Requests with an answer wait to stay within `qps` a second, bursts up to `burst` (0: no limit)."""
        self.limiter = RequestLimiter(qps, burst) if qps > 0 else None

    def close(self) -> None:
        self._client.close()
        if self._plain is not None:
            self._plain.close()

    def _send(
        self,
        method: str,
        path: str,
        params: QueryParams | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> bytes:
        """Send a request; the answer's body, or a KubeError."""
        if self.limiter is not None:
            self.limiter.wait()
        content = jsoncodec.dumps(body) if body is not None else None
        if self._plain is not None:
            try:
                answer = self._plain.request(method, path, _params(params), content, content_type, timeout)
            except (OSError, http.client.HTTPException) as exc:
                raise unreachable(f"{method} {path}", exc) from exc
            if answer.status >= 400:
                raise error_of(answer.status, answer.reason, answer.content)
            return answer.content
        headers = {"Accept": "application/json"}
        if content is not None:
            headers["Content-Type"] = content_type
        try:
            response = self._client.request(
                method,
                path,
                params=_params(params),
                content=content,
                headers=headers,
                timeout=httpx.Timeout(timeout) if timeout is not None else httpx.USE_CLIENT_DEFAULT,
            )
        except httpx.HTTPError as exc:
            raise unreachable(f"{method} {path}", exc) from exc
        if response.status_code >= 400:
            raise error_of(response.status_code, response.reason_phrase, response.content)
        return response.content

    def get(self, path: str, params: QueryParams | None = None) -> JsonObject:
        """The object (or list) at `path`, as the server wrote it; the caller casts it to its kind."""
        result: JsonObject = jsoncodec.loads(self._send("GET", path, params))
        return result

    def post(self, path: str, body: Mapping[str, object], params: QueryParams | None = None) -> JsonObject:
        result: JsonObject = jsoncodec.loads(self._send("POST", path, params, body))
        return result

    def put(self, path: str, body: Mapping[str, object]) -> JsonObject:
        result: JsonObject = jsoncodec.loads(self._send("PUT", path, None, body))
        return result

    def patch(self, path: str, body: Any, kind: str = "merge", params: QueryParams | None = None) -> JsonObject:
        result: JsonObject = jsoncodec.loads(self._send("PATCH", path, params, body, PATCH_TYPES[kind]))
        return result

    def delete(self, path: str, body: Mapping[str, object] | None = None) -> JsonObject:
        result: JsonObject = jsoncodec.loads(self._send("DELETE", path, None, body))
        return result

    def list(self, path: str, params: QueryParams | None = None, page: int = 500) -> tuple[list[JsonObject], str]:
        """Every item of a collection (paged), and the list's resourceVersion; the caller casts the items
        to their kind."""
        items: list[JsonObject] = []
        query = dict(params or {}, limit=page)
        while True:
            body = self.get(path, query)
            items.extend(body.get("items") or [])
            meta = body.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                return items, str(meta.get("resourceVersion", ""))
            query["continue"] = token

    def watch(
        self,
        path: str,
        resource_version: str,
        params: QueryParams | None = None,
        timeout_seconds: int = 300,
        decode: Callable[[bytes], Any] = jsoncodec.loads,
    ) -> Iterator[WatchEvent]:
        """Stream watch events from `resource_version`, with bookmarks, until the server ends it.
        An ERROR event (e.g. 410 Gone) is raised as its KubeError (ExpiredError). `decode` parses
        each event's line (`jsoncodec.loads_event_lean`: without the objects' managedFields)."""
        query = dict(
            params or {},
            watch="true",
            resourceVersion=resource_version,
            allowWatchBookmarks="true",
            timeoutSeconds=timeout_seconds,
        )
        if self._plain is not None:
            yield from self._plain_watch(path, _params(query), timeout_seconds + 30.0, decode)
            return
        request = self._client.build_request(
            "GET", path, params=_params(query), timeout=httpx.Timeout(10.0, read=timeout_seconds + 30.0)
        )
        try:
            response = self._client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise unreachable(f"watch {path}", exc) from exc
        try:
            if response.status_code >= 400:
                response.read()
                raise error_of(response.status_code, response.reason_phrase, response.content)
            yield from _events(response.iter_bytes(), decode)
        except httpx.HTTPError as exc:
            raise unreachable(f"watch {path} broke", exc) from exc
        finally:
            response.close()

    def _plain_watch(
        self, path: str, params: dict[str, str], read_timeout: float, decode: Callable[[bytes], Any]
    ) -> Iterator[WatchEvent]:
        assert self._plain is not None
        try:
            stream = self._plain.stream(path, params, read_timeout)
        except (OSError, http.client.HTTPException) as exc:
            raise unreachable(f"watch {path}", exc) from exc
        try:
            if stream.status >= 400:
                raise error_of(stream.status, stream.reason, stream.read())
            yield from _events(stream.chunks(), decode)
        except (OSError, http.client.HTTPException) as exc:
            raise unreachable(f"watch {path} broke", exc) from exc
        finally:
            stream.close()


def _events(chunks: Iterable[bytes], decode: Callable[[bytes], Any] = jsoncodec.loads) -> Iterator[WatchEvent]:
    """The watch events of a stream: one JSON event per line; an ERROR event is raised as its KubeError."""
    for line in _lines(chunks):
        event = decode(line)
        kind, obj = event.get("type", ""), event.get("object") or {}
        if kind == "ERROR":
            raise KubeError.of(int(obj.get("code", 500)), str(obj.get("reason", "")), str(obj.get("message", "")))
        yield WatchEvent(kind, obj)


def _lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The non-empty lines of a byte stream (a watch sends one JSON event per line), split on bytes
    so that nothing is decoded to text on the way."""
    pending = bytearray()
    for chunk in chunks:
        pending += chunk
        start = 0
        while (end := pending.find(b"\n", start)) >= 0:
            if end > start:
                yield bytes(pending[start:end])
            start = end + 1
        del pending[:start]
    if pending.strip():
        yield bytes(pending)


def _params(params: QueryParams | None) -> dict[str, str]:
    if not params:
        return {}
    return {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in params.items() if v is not None}


def object_path(
    api_version: str, plural: str, namespace: str | None = None, name: str | None = None, subresource: str | None = None
) -> str:
    """The REST path of a collection or an object: ('v1', 'pods', 'ns', 'p', 'binding')."""
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    parts = [base]
    if namespace is not None:
        parts.append(f"namespaces/{namespace}")
    parts.append(plural)
    if name is not None:
        parts.append(name)
    if subresource is not None:
        parts.append(subresource)
    return "/".join(parts)

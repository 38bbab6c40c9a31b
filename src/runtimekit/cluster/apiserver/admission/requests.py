"""Admission for the HTTP handlers and `operations.Api`: who asks, which webhooks, and when.

`Admission.admit(...)` is called by a handler before a create, update, patch, delete, `pods/binding`
or `pods/eviction`. It returns None when no configuration is registered (two dict lookups) or when no
webhook's rules name the request, and the request then goes on as it always did. Otherwise it returns
an `Admit` for that one request, which knows the user (the bearer token's, `identity`), the operation
and its options, and which `Api` calls at kube-apiserver's points: `mutate` on the object as the
request gives it (before the server's defaults and the generated name, after a patch is applied),
`validate` on the object as it would be stored, both outside the store's lock. Requests on webhook
configurations themselves are never sent to webhooks (kube-apiserver exempts them too).
A Service in a webhook's clientConfig is reached at its Endpoints' first address and the Service
port's targetPort, and its certificate must name `<service>.<namespace>.svc`.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from runtimekit.cluster.apiserver import conversion
from runtimekit.cluster.apiserver.admission.attributes import (
    CREATE,
    Attributes,
    Kind,
    Resource,
    operation_options,
)
from runtimekit.cluster.apiserver.admission.client import CallFailed, Endpoint, WebhookClient, endpoint_of
from runtimekit.cluster.apiserver.admission.dispatch import Dispatcher, Equivalent
from runtimekit.cluster.apiserver.admission.registry import GROUP, WebhookRegistry
from runtimekit.cluster.apiserver.admission.webhooks import ClientConfig, WebhookSet
from runtimekit.cluster.apiserver.deletion import ApiState, Deleted, DeleteOptions, delete
from runtimekit.cluster.apiserver.errors import not_found
from runtimekit.cluster.apiserver.identity import Identities, UserInfo
from runtimekit.cluster.apiserver.resources import ResourceInfo, ResourceTable
from runtimekit.cluster.apiserver.store import Store
from runtimekit.kube.objects import JsonObject, meta

SUBRESOURCE_KINDS = {"binding": Kind("", "v1", "Binding"), "eviction": Kind("policy", "v1", "Eviction")}
T = TypeVar("T")


async def run(call: Callable[[], T], admit: Admit | None) -> T:
    """The call on the event loop when no webhook is asked (as always), else on a worker thread: a
    webhook may take seconds, and the server keeps answering meanwhile."""
    return call() if admit is None else await asyncio.to_thread(call)


def admitted_delete(
    api: ApiState, info: ResourceInfo, namespace: str, name: str, options: DeleteOptions, admit: Admit | None
) -> Deleted:
    """A delete, asked of the webhooks first with the stored object as the old object (404 before them)."""
    if admit is not None:
        admit.dry_run = admit.dry_run or options.dry_run  # DeleteOptions may say so instead of the query
        old = api.get(api.storage_of(info), namespace, name).obj()
        admit.mutate(None, old)
        admit.validate(None, old)
    return delete(api, info, namespace, name, options)


def _copy(obj: JsonObject) -> JsonObject:
    return copy.deepcopy(obj)


@dataclass
class Admit:
    """Admission of one request (see the module docstring)."""

    admission: Admission
    webhooks: WebhookSet
    info: ResourceInfo
    operation: str
    subresource: str
    name: str
    namespace: str
    user: UserInfo
    dry_run: bool
    options: JsonObject | None
    _equivalents: list[Equivalent] | None = field(default=None, repr=False)

    def mutate(self, obj: JsonObject | None, old: JsonObject | None) -> JsonObject | None:
        """The object after the mutating webhooks: `obj` in the form the request gave it, `old` as
        stored. A create in a namespace that does not exist is refused first, as kube-apiserver's
        NamespaceLifecycle plugin does before any webhook."""
        if self.operation == CREATE and self.info.namespaced and not self.subresource:
            self.admission.namespace_must_exist(self.namespace)
        if self.operation == CREATE and not self.name and obj is not None and not self.subresource:
            self.name = str(meta(obj).get("name", ""))
            if self.info.group == "" and self.info.plural == "namespaces":
                self.namespace = self.name  # a Namespace's own namespace is its name, as kube-apiserver sets it
        if not self.webhooks.mutating:
            return obj
        at = self._attributes(obj, self._served(old))
        return self.admission.dispatcher.mutate(self.webhooks.mutating, at, self.equivalents())

    def validate(self, obj: JsonObject | None, old: JsonObject | None) -> None:
        """Ask the validating webhooks about `obj` and `old`, both as stored."""
        if self.webhooks.validating:
            at = self._attributes(self._served(obj), self._served(old))
            self.admission.dispatcher.validate(self.webhooks.validating, at, self.equivalents())

    def review(self, obj: JsonObject) -> JsonObject:
        """Mutate, then validate, an object the server does not store (a Binding, an Eviction)."""
        mutated = self.mutate(obj, None) or obj
        self.validate(mutated, None)
        return mutated

    def equivalents(self) -> Sequence[Equivalent]:
        if self._equivalents is None:
            self._equivalents = [] if self.subresource in SUBRESOURCE_KINDS else self.admission.equivalents(self.info)
        return self._equivalents

    def _served(self, stored: JsonObject | None) -> JsonObject | None:
        """An object as stored, in the form of the request's resource."""
        if stored is None or self.subresource in SUBRESOURCE_KINDS:
            return stored
        storage = self.admission.table.storage_resource(self.info.storage) or self.info
        if not conversion.needs_conversion(self.info, storage):
            return stored
        return conversion.to_served(self.info, _copy(stored))

    def _attributes(self, obj: JsonObject | None, old: JsonObject | None) -> Attributes:
        info = self.info
        kind = SUBRESOURCE_KINDS.get(self.subresource) or Kind(info.group, info.version, info.kind)
        return Attributes(
            self.operation,
            Resource(info.group, info.version, info.plural),
            kind,
            self.subresource,
            self.name,
            self.namespace,
            obj,
            old,
            self.user,
            self.dry_run,
            self.options,
        )


class Admission:
    """The server's admission: its webhook registry and the dispatcher that calls them."""

    def __init__(self, store: Store, table: ResourceTable, identities: Identities) -> None:
        self.store, self.table, self.identities = store, table, identities
        self.registry = WebhookRegistry(store, table)
        self.active = self.registry.registered  # whether any configuration is stored: two dict lookups
        self.dispatcher = Dispatcher(WebhookClient(), self.resolve, self.namespace_labels)

    def admit(
        self,
        authorization: str | None,
        info: ResourceInfo,
        operation: str,
        *,
        namespace: str | None,
        name: str = "",
        subresource: str = "",
        dry_run: bool = False,
        options: JsonObject | None = None,
    ) -> Admit | None:
        """Admission for one request, or None when no webhook could be interested in it."""
        webhooks = self.registry.current()
        if webhooks is None or info.group == GROUP:
            return None
        scope = name if info.group == "" and info.plural == "namespaces" else (namespace or "")
        if not self.registry.relevant(webhooks, operation, info, subresource, scope, lambda: self._resources(info)):
            return None
        user = self.identities.who(authorization)
        given = operation_options(operation, options)
        return Admit(self, webhooks, info, operation, subresource, name, scope, user, dry_run, given)

    # -- what the dispatcher reads of the cluster ------------------------------------------------
    def namespace_labels(self, name: str) -> dict[str, str] | None:
        namespaces = self.table.lookup("", "v1", "namespaces")
        found = self.store.get(namespaces, "", name) if namespaces is not None else None
        return None if found is None else dict(found.labels)

    def namespace_must_exist(self, name: str) -> None:
        if name and self.namespace_labels(name) is None:
            raise not_found("namespaces", name)

    def resolve(self, config: ClientConfig) -> tuple[Endpoint, str]:
        if config.url:
            return endpoint_of(config.url), config.url
        service = config.service
        if service is None:
            raise CallFailed("the webhook's clientConfig has neither url nor service")
        server_name = f"{service.name}.{service.namespace}.svc"
        shown = f"https://{server_name}:{service.port}{service.path}"
        host, port = self._service_endpoint(service.namespace, service.name, service.port, shown)
        return Endpoint(host, port, server_name, service.path or "/"), shown

    def _service_endpoint(self, namespace: str, name: str, port: int, shown: str) -> tuple[str, int]:
        services, endpoints = self.table.lookup("", "v1", "services"), self.table.lookup("", "v1", "endpoints")
        svc = self.store.get(services, namespace, name) if services is not None else None
        if svc is None:
            raise CallFailed(f'Post "{shown}": service "{name}" not found')
        spec = cast(JsonObject, svc.obj().get("spec") or {})
        target: Any = port
        for entry in spec.get("ports") or ():
            if entry.get("port") == port:
                target = entry.get("targetPort", port)
        found = self.store.get(endpoints, namespace, name) if endpoints is not None else None
        for subset in (found.obj().get("subsets") or ()) if found is not None else ():
            addresses = subset.get("addresses") or ()
            ports = subset.get("ports") or ()
            number = (
                target
                if isinstance(target, int)
                else next((p.get("port") for p in ports if p.get("name") == target), None)
            )
            if addresses and number:
                return str(addresses[0].get("ip", "")), int(number)
        raise CallFailed(f'Post "{shown}": no endpoints available for service "{name}"')

    def _resources(self, info: ResourceInfo) -> list[Resource]:
        return [e.resource for e in self.equivalents(info)]

    def equivalents(self, info: ResourceInfo) -> list[Equivalent]:
        """The other resources serving the same stored objects (another version of a custom
        resource, events.k8s.io/v1 Events for core/v1 ones), with the conversions to and from them."""
        storage = self.table.storage_resource(info.storage) or info
        found = []
        for other in self.table.by_storage(info.storage):
            if other is info:
                continue

            def to_view(obj: JsonObject, other: ResourceInfo = other) -> JsonObject:
                return conversion.to_served(other, conversion.to_stored(info, storage, obj))

            def from_view(obj: JsonObject, other: ResourceInfo = other) -> JsonObject:
                return conversion.to_served(info, conversion.to_stored(other, storage, obj))

            resource = Resource(other.group, other.version, other.plural)
            found.append(Equivalent(resource, Kind(other.group, other.version, other.kind), to_view, from_view))
        return found

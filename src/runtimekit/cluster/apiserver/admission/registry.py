"""The webhooks registered now, compiled once per change of their configurations.

`current()` answers None at the cost of two dict lookups while no configuration is stored (the request
path of a server without webhooks stays as it was); otherwise it recompiles when a configuration was
created, changed or deleted since the last call (compared by name and resourceVersion). `relevant`
says, per operation and resource, whether any webhook's rules could match, so requests no rule names
skip admission altogether; it is memoised per compiled set. Thread-safe. Called by `requests`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import cast

from runtimekit.cluster.apiserver.admission.attributes import Resource
from runtimekit.cluster.apiserver.admission.webhooks import EQUIVALENT, WebhookSet, compile_webhooks
from runtimekit.cluster.apiserver.resources import ResourceInfo, ResourceTable
from runtimekit.cluster.apiserver.store import Store
from runtimekit.kube.objects import MutatingWebhookConfiguration, ValidatingWebhookConfiguration

GROUP = "admissionregistration.k8s.io"
RelevanceKey = tuple[str, str, str, str, str, bool]  # operation, group, version, resource, subresource, namespaced


class WebhookRegistry:
    def __init__(self, store: Store, table: ResourceTable) -> None:
        self._store = store
        mutating = table.lookup(GROUP, "v1", "mutatingwebhookconfigurations")
        validating = table.lookup(GROUP, "v1", "validatingwebhookconfigurations")
        assert mutating is not None, "the configurations are built-in resources"
        assert validating is not None, "the configurations are built-in resources"
        self._mutating, self._validating = mutating, validating
        self._keys = (mutating.storage, validating.storage)  # the buckets their objects live in
        self._lock = threading.Lock()
        self._key: tuple[tuple[str, int], ...] = ()
        self._set = WebhookSet()
        self._relevant: dict[RelevanceKey, bool] = {}

    def registered(self) -> bool:
        """Whether any configuration is stored: two dict lookups, all a request pays while none ever was."""
        store = self._store
        if not (store.has_bucket(self._keys[0]) or store.has_bucket(self._keys[1])):
            return False
        return bool(store.count(self._mutating) or store.count(self._validating))

    def current(self) -> WebhookSet | None:
        """The registered webhooks; None when there are none."""
        if not self._store.count(self._mutating) and not self._store.count(self._validating):
            return None
        mutating, validating = self._store.objects(self._mutating), self._store.objects(self._validating)
        key = tuple((f"{s.info.plural}/{s.name}", s.rv) for s in (*mutating, *validating))
        with self._lock:
            if key != self._key:
                self._set = compile_webhooks(
                    [cast(MutatingWebhookConfiguration, s.obj()) for s in mutating],
                    [cast(ValidatingWebhookConfiguration, s.obj()) for s in validating],
                )
                self._key, self._relevant = key, {}
            return self._set

    def relevant(
        self,
        webhooks: WebhookSet,
        operation: str,
        info: ResourceInfo,
        subresource: str,
        namespace: str,
        equivalents: Callable[[], Sequence[Resource]],
    ) -> bool:
        """Whether some rule of `webhooks` names the request (selectors aside)."""
        key = (operation, info.group, info.version, info.plural, subresource, bool(namespace))
        with self._lock:
            known = self._relevant.get(key) if webhooks is self._set else None
        if known is not None:
            return known
        resource = Resource(info.group, info.version, info.plural)
        hooks = (*webhooks.mutating, *webhooks.validating)
        found = any(r.matches(operation, resource, subresource, namespace) for h in hooks for r in h.rules)
        if not found and any(h.match_policy == EQUIVALENT for h in hooks):
            others = equivalents()
            found = any(
                r.matches(operation, other, subresource, namespace)
                for h in hooks
                if h.match_policy == EQUIVALENT
                for r in h.rules
                for other in others
            )
        with self._lock:
            if webhooks is self._set:
                self._relevant[key] = found
        return found

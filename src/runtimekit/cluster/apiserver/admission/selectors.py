"""A webhook's namespaceSelector and objectSelector (kube-apiserver's `predicates/namespace` and
`predicates/object`).

namespaceSelector: a cluster-scoped request that is not about a Namespace always matches; a request
on a Namespace object (create, update) is matched against the labels the request gives it, any other
against the labels of the namespace as stored; a namespace that does not exist answers 404
`namespaces "x" not found`, as kube-apiserver does. objectSelector: matches when the object or the
old object has matching labels (an empty selector matches everything, even requests without an object).
Pure apart from the namespace lookup passed in.
"""

from __future__ import annotations

from collections.abc import Callable

from runtimekit.cluster.apiserver.admission.attributes import CREATE, UPDATE, Attributes
from runtimekit.cluster.apiserver.errors import not_found
from runtimekit.kube.objects import JsonObject, labels_of
from runtimekit.kube.semantics.labels import Selector

NamespaceLabels = Callable[[str], "dict[str, str] | None"]
"""The labels of a namespace by name; None when there is no such namespace."""


def namespace_matches(selector: Selector, at: Attributes, labels: NamespaceLabels) -> bool:
    """Raises ApiError 404 when the request's namespace does not exist and the selector needs its labels."""
    if not at.namespace and not at.is_namespace:
        return True
    if selector.everything:
        return True
    if at.is_namespace and not at.subresource and at.operation in (CREATE, UPDATE) and at.obj is not None:
        return selector.matches(labels_of(at.obj))
    found = labels(at.namespace)
    if found is None:
        raise not_found("namespaces", at.namespace)
    return selector.matches(found)


def _labelled(obj: JsonObject | None, selector: Selector) -> bool:
    return obj is not None and selector.matches(labels_of(obj))


def object_matches(selector: Selector, at: Attributes) -> bool:
    if selector.everything:
        return True
    return _labelled(at.obj, selector) or _labelled(at.old, selector)

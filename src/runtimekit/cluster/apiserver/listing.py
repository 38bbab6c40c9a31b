"""Selecting and encoding collections: the `Filter` a list or watch applies, and the bytes of
`<Kind>List`, `Table` and `PartialObjectMetadataList` responses.

A `Filter` is compiled once per request from the namespace, `labelSelector` and `fieldSelector`
(field labels are checked against the kind: `field label not supported: x` is a 400) and tells the
store which field index can narrow the scan. Encoders join the stored JSON bytes; nothing is
re-serialised for a plain list. Called by the list and watch handlers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict

from runtimekit.cluster.apiserver.errors import bad_request
from runtimekit.cluster.apiserver.resources import ResourceInfo
from runtimekit.cluster.apiserver.selectors import FieldSelector, FieldTerm, parse_field_selector
from runtimekit.cluster.apiserver.store import INDEXED_FIELDS, RowFacts, Stored, dumps
from runtimekit.cluster.apiserver.tables import PodGpu, TableMaker
from runtimekit.kube import jsoncodec
from runtimekit.kube.objects import ListMeta, ObjectMeta
from runtimekit.kube.semantics.labels import Selector, SelectorError
from runtimekit.kube.semantics.labeltext import parse_label_selector


class PartialObjectMetadata(TypedDict):
    """`meta.k8s.io` PartialObjectMetadata: an object's metadata alone (for `as=PartialObjectMetadata`,
    and the object of a Table row by default)."""

    kind: str
    apiVersion: str
    metadata: ObjectMeta


@dataclass(frozen=True)
class Filter:
    namespace: str | None
    labels: Selector
    fields: FieldSelector  # terms name stored paths (aliases resolved)

    @classmethod
    def compile(cls, info: ResourceInfo, namespace: str | None, query: Mapping[str, str]) -> Filter:
        try:
            labels = parse_label_selector(query.get("labelSelector", ""))
            raw_fields = parse_field_selector(query.get("fieldSelector", ""))
        except SelectorError as exc:
            raise bad_request(str(exc)) from None
        terms = []
        for term in raw_fields.terms:
            path = info.field_path(term.field)
            if path is None:
                raise bad_request(f"field label not supported: {term.field}")
            terms.append(FieldTerm(path, term.value, term.negate))
        return cls(namespace if info.namespaced else None, labels, FieldSelector(tuple(terms)))

    @property
    def pinned(self) -> tuple[str, str] | None:
        """An equality term on an indexed field, for the store to scan its index instead."""
        for path in INDEXED_FIELDS:
            value = self.fields.required(path)
            if value is not None:
                return path, value
        return None

    @property
    def everything(self) -> bool:
        return self.labels.everything and self.fields.empty

    @property
    def matcher(self) -> Callable[[Stored], bool] | None:
        """What the store must still test (None: the namespace range or index already selects)."""
        return None if self.everything else self.matches

    def matches(self, stored: Stored) -> bool:
        if self.namespace is not None and stored.namespace != self.namespace:
            return False
        if not self.labels.matches(stored.labels):
            return False
        for term in self.fields.terms:
            if term.field == "metadata.name":
                value = stored.name
            elif term.field == "metadata.namespace":
                value = stored.namespace
            else:
                value = stored.fields.get(term.field, "")
            if (value == term.value) == term.negate:
                return False
        return True


def list_parts(info: ResourceInfo, rv: int, continue_token: str) -> tuple[bytes, bytes]:
    """The bytes before and after the comma-joined items of a `<Kind>List`."""
    meta: ListMeta = {"resourceVersion": str(rv)}
    if continue_token:
        meta["continue"] = continue_token
    head = dumps({"kind": info.list_kind, "apiVersion": info.api_version, "metadata": meta})
    return head[:-1] + b',"items":[', b"]}"


def list_bytes(info: ResourceInfo, rv: int, continue_token: str, items: Iterable[bytes]) -> bytes:
    head, tail = list_parts(info, rv, continue_token)
    return b"".join((head, b",".join(items), tail))


def _metadata(raw: bytes) -> ObjectMeta:
    meta: ObjectMeta = jsoncodec.loads(raw).get("metadata", {})
    meta.pop("managedFields", None)
    return meta


def partial_object(raw: bytes, version: str) -> PartialObjectMetadata:
    return {"kind": "PartialObjectMetadata", "apiVersion": f"meta.k8s.io/{version}", "metadata": _metadata(raw)}


def partial_list_bytes(rv: int, continue_token: str, items: Sequence[bytes], version: str) -> bytes:
    meta: ListMeta = {"resourceVersion": str(rv)}
    if continue_token:
        meta["continue"] = continue_token
    body = {
        "kind": "PartialObjectMetadataList",
        "apiVersion": f"meta.k8s.io/{version}",
        "metadata": meta,
        "items": [partial_object(raw, version) for raw in items],
    }
    return dumps(body)


@dataclass(frozen=True)
class TableRequest:
    """A Table response's shape: meta.k8s.io version, headers or not, what each row embeds."""

    version: str = "v1"
    include_object: str = "Metadata"  # None | Metadata | Object
    headers: bool = True


def table_bytes(
    maker: TableMaker,
    info: ResourceInfo,
    rows: Sequence[tuple[Stored, bytes]],
    request: TableRequest,
    *,
    rv: int,
    continue_token: str = "",
    pods_on_node: Callable[[str], Iterable[PodGpu]],
    facts: Callable[[Stored], RowFacts],
) -> bytes:
    """A `Table`; each row is (stored version, its served JSON)."""
    meta: ListMeta = {"resourceVersion": str(rv)}
    if continue_token:
        meta["continue"] = continue_token
    columns = [c.definition() for c in maker.columns(info)] if request.headers else None
    head = dumps(
        {
            "kind": "Table",
            "apiVersion": f"meta.k8s.io/{request.version}",
            "metadata": meta,
            "columnDefinitions": columns,
        }
    )
    encoded = [_row(maker, facts(stored), stored.name, raw, request, pods_on_node) for stored, raw in rows]
    return head[:-1] + b',"rows":[' + b",".join(encoded) + b"]}"


def _row(
    maker: TableMaker,
    facts: RowFacts,
    name: str,
    raw: bytes,
    request: TableRequest,
    pods_on_node: Callable[[str], Iterable[PodGpu]],
) -> bytes:
    cells = dumps(maker.cells(facts, name, pods_on_node))
    if request.include_object == "None":
        return b'{"cells":' + cells + b"}"
    embedded = raw if request.include_object == "Object" else dumps(partial_object(raw, request.version))
    return b'{"cells":' + cells + b',"object":' + embedded + b"}"

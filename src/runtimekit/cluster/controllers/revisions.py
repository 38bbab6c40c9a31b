"""ControllerRevisions of a StatefulSet: the templates it has had, numbered, as kube keeps them.

A revision's `data` is the patch `{"spec": {"template": <template, "$patch": "replace">}}`, its name
`<set>-<hash>` (hash of the data and the collision count), its labels the template's plus
`controller.kubernetes.io/hash`. `next_revisions` decides, from the set's template and its existing
revisions (oldest first), whether the latest revision stands, an older equal one comes back with a
new number (a rollback), or a new one is to be created. Pure functions; `statefulsets.py` writes.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from runtimekit.cluster.controllers.pods import owner_ref, semantic, template_hash
from runtimekit.kube.objects import ControllerRevision, JsonObject, PodTemplateSpec, StatefulSet, meta

HASH_LABEL = "controller.kubernetes.io/hash"


def revision_data(template: PodTemplateSpec) -> JsonObject:
    patched: JsonObject = copy.deepcopy(dict(template))
    patched["$patch"] = "replace"
    return {"spec": {"template": patched}}


def template_of(revision: ControllerRevision) -> PodTemplateSpec:
    """The pod template a revision records."""
    template: JsonObject = copy.deepcopy(((revision.get("data") or {}).get("spec") or {}).get("template") or {})
    template.pop("$patch", None)
    return cast(PodTemplateSpec, template)  # the data is a patch: a template once `$patch` is gone


def number(revision: ControllerRevision) -> int:
    return int(revision.get("revision") or 0)


def ordered(revisions: Sequence[ControllerRevision]) -> list[ControllerRevision]:
    """Oldest (lowest revision number) first, ties by name."""
    return sorted(revisions, key=lambda r: (number(r), str(meta(r).get("name"))))


def new_revision(owner: StatefulSet, template: PodTemplateSpec, revision: int, collisions: int) -> ControllerRevision:
    """A ControllerRevision to create for `owner` (a StatefulSet) recording `template`."""
    data = revision_data(template)
    digest = template_hash(data, collisions)
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    labels[HASH_LABEL] = digest
    return {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": f"{meta(owner).get('name')}-{digest}",
            "namespace": meta(owner).get("namespace", ""),
            "labels": labels,
            "ownerReferences": [owner_ref(owner, "apps/v1", "StatefulSet")],
        },
        "data": data,
        "revision": revision,
    }


@dataclass(frozen=True)
class Plan:
    """What to do: `reuse` an existing revision (possibly renumbered to `renumber`), or `create`."""

    reuse: ControllerRevision | None
    renumber: int | None
    create: ControllerRevision | None


def next_revisions(owner: StatefulSet, revisions: Sequence[ControllerRevision], collisions: int) -> Plan:
    """The update revision for the owner's current template (see the module docstring)."""
    history = ordered(revisions)
    template = (owner.get("spec") or {}).get("template") or {}
    data = revision_data(template)
    upcoming = (number(history[-1]) if history else 0) + 1
    equal = [r for r in history if semantic(r.get("data")) == semantic(data)]
    if equal and equal[-1] is history[-1]:
        return Plan(history[-1], None, None)
    if equal:
        return Plan(equal[-1], upcoming, None)
    return Plan(None, None, new_revision(owner, template, upcoming, collisions))


def history_victims(revisions: Sequence[ControllerRevision], live: set[str], limit: int) -> list[ControllerRevision]:
    """Revisions beyond `limit` that no pod and neither current nor update revision uses, oldest first."""
    history = [r for r in ordered(revisions) if str(meta(r).get("name")) not in live]
    surplus = len(history) - limit
    return history[:surplus] if surplus > 0 else []

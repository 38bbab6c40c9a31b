"""Write src/runtimekit/data/k8s-schemas.json.gz: the structural part of Kubernetes' OpenAPI
definitions for each minor version the embedded API server can report (1.27-1.35), taken from the
`kubernetes-validate` package (a dev dependency; the JSON Schema form of each release's OpenAPI v2).

Only what decoding needs is kept (type, format, properties, items, additionalProperties, oneOf and
$ref); descriptions go. A definition identical in several versions is stored once: the file is
{"versions": {"1.31": {definition name: key}}, "kinds": {"1.31": {"apps/v1/Deployment": definition
name}}, "pool": {key: definition}}. The embedded API server
compiles the version it reports from it (`runtimekit.cluster.apiserver.openapi`). Run it again
after upgrading kubernetes-validate; tests/cluster/test_apiserver_decoding.py checks that the
shipped file is what this script writes.

It also writes src/runtimekit/data/k8s-openapi-docs.json.gz, what the structural file leaves out and
the served OpenAPI documents need (`runtimekit.cluster.apiserver.openapidocs`): per definition its
description, `required` and `x-kubernetes-*` extensions, and those of each property (the patch
strategies and merge keys kubectl's apply reads, the group-version-kind explain looks kinds up by).
Stored as {"versions": {"1.31": {definition name: key}}, "pool": {key: {"": part key of the
definition's own, property name: part key of the property's}}, "parts": {part key: extras}}.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "src" / "runtimekit" / "data" / "k8s-schemas.json.gz"
DOCS_OUT = ROOT / "src" / "runtimekit" / "data" / "k8s-openapi-docs.json.gz"
MINORS = range(27, 36)
_KEEP = frozenset({"type", "format", "properties", "items", "additionalProperties", "oneOf", "$ref"})


def _strip(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_strip(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "properties":
            out[key] = {name: _strip(sub) for name, sub in value.items()}
        elif key in _KEEP:
            out[key] = _strip(value)
    return out


def _extras(schema: Any) -> dict[str, Any]:
    """The description, required list and vendor extensions of one schema (not its structure)."""
    return {k: v for k, v in schema.items() if k in ("description", "required") or k.startswith("x-kubernetes-")}


def _docs(schema: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if _extras(schema):
        out[""] = _extras(schema)
    for name, sub in (schema.get("properties") or {}).items():
        if isinstance(sub, dict) and _extras(sub):
            out[name] = _extras(sub)
    return out


def _pack(document: dict[str, Any]) -> bytes:
    raw = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    return gzip.compress(raw, compresslevel=9, mtime=0)


def _key(value: Any) -> tuple[str, Any]:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:10], json.loads(text)


def build_docs() -> bytes:
    """The documentation file's bytes (deterministic, as `build`). Descriptions change a little from
    release to release, so each property's part is pooled on its own (`parts`), and a definition is a
    map from property name to part (`pool`)."""
    root = resources.files("kubernetes_validate") / "kubernetes-json-schema"
    parts: dict[str, Any] = {}
    pool: dict[str, Any] = {}
    versions: dict[str, dict[str, str]] = {}
    for minor in MINORS:
        definitions = json.loads((root / f"v1.{minor}.0-local" / "_definitions.json").read_text())["$defs"]
        names: dict[str, str] = {}
        for name, schema in sorted(definitions.items()):
            refs: dict[str, str] = {}
            for prop, extras in _docs(schema).items():
                part, value = _key(extras)
                parts[part] = value
                refs[prop] = part
            key, value = _key(refs)
            pool[key] = value
            names[name] = key
        versions[f"1.{minor}"] = names
    return _pack({"versions": versions, "pool": dict(sorted(pool.items())), "parts": dict(sorted(parts.items()))})


def build() -> bytes:
    """The file's bytes (deterministic: same package version, same bytes)."""
    root = resources.files("kubernetes_validate") / "kubernetes-json-schema"
    pool: dict[str, Any] = {}
    versions: dict[str, dict[str, str]] = {}
    kinds: dict[str, dict[str, str]] = {}
    for minor in MINORS:
        definitions = json.loads((root / f"v1.{minor}.0-local" / "_definitions.json").read_text())["$defs"]
        names: dict[str, str] = {}
        for name, schema in sorted(definitions.items()):
            for gvk in schema.get("x-kubernetes-group-version-kind", []):
                if not name.endswith(".apis.meta.v1.WatchEvent") and not name.endswith("DeleteOptions"):
                    group = gvk["group"]
                    api_version = f"{group}/{gvk['version']}" if group else gvk["version"]
                    kinds.setdefault(f"1.{minor}", {})[f"{api_version}/{gvk['kind']}"] = name
            text = json.dumps(_strip(schema), sort_keys=True, separators=(",", ":"))
            key = hashlib.sha256(text.encode()).hexdigest()[:16]
            pool[key] = json.loads(text)
            names[name] = key
        versions[f"1.{minor}"] = names
    return _pack({"versions": versions, "kinds": kinds, "pool": dict(sorted(pool.items()))})


def main() -> int:
    data = build()
    OUT.write_bytes(data)
    print(f"wrote {OUT.relative_to(ROOT)} ({len(data)} bytes, versions 1.{MINORS[0]}-1.{MINORS[-1]})")
    docs = build_docs()
    DOCS_OUT.write_bytes(docs)
    print(f"wrote {DOCS_OUT.relative_to(ROOT)} ({len(docs)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

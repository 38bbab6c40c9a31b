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
    document = {"versions": versions, "kinds": kinds, "pool": dict(sorted(pool.items()))}
    raw = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    return gzip.compress(raw, compresslevel=9, mtime=0)


def main() -> int:
    data = build()
    OUT.write_bytes(data)
    print(f"wrote {OUT.relative_to(ROOT)} ({len(data)} bytes, versions 1.{MINORS[0]}-1.{MINORS[-1]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

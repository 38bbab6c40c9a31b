"""Write src/runtimekit/data/k8s-proto.json.gz: the protobuf field numbers of the built-in kinds the
embedded API server serves, read from Kubernetes' generated.proto files, so that it can decode request
bodies sent as `application/vnd.kubernetes.protobuf` (`runtimekit.cluster.apiserver.protobody`).

Usage: scripts/gen_k8s_proto.py API_CHECKOUT APIMACHINERY_CHECKOUT, the two git checkouts of
github.com/kubernetes/api and github.com/kubernetes/apimachinery (a release tag). Kept: every message
reachable from the served kinds (and DeleteOptions, Eviction, Scale, Binding), each as
{message: [[number, json name, type, label]]} where type is a scalar (`string`, `int64`, ...) or a
message name and label is `o` (optional), `r` (repeated) or `m` (map<string, type>). The file also
names the commits it was made from.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "src" / "runtimekit" / "data" / "k8s-proto.json.gz"
_PACKAGE = re.compile(r"^package ([\w.]+);", re.M)
_MESSAGE = re.compile(r"^message (\w+) \{(.*?)^\}", re.M | re.S)
_FIELD = re.compile(r"^\s*(?:(optional|repeated) ([.\w]+)|map<string, ([.\w]+)>) (\w+) = (\d+);", re.M)
_SCALARS = frozenset({"string", "bytes", "bool", "int32", "int64", "double", "float"})
_EXTRA_ROOTS = (
    "k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions",
    "k8s.io.api.policy.v1.Eviction",
    "k8s.io.api.autoscaling.v1.Scale",
    "k8s.io.api.core.v1.Binding",
)


def _parse(text: str) -> dict[str, list[list[object]]]:
    package = _PACKAGE.search(text)
    assert package is not None
    out: dict[str, list[list[object]]] = {}
    for name, body in _MESSAGE.findall(text):
        fields: list[list[object]] = []
        for label, declared, map_value, field, number in _FIELD.findall(body):
            kind = declared or map_value
            if kind.startswith("."):
                kind = kind[1:]
            elif kind not in _SCALARS:
                kind = f"{package.group(1)}.{kind}"  # a message of the same package
            fields.append([int(number), field, kind, label[:1] or "m"])
        out[f"{package.group(1)}.{name}"] = sorted(fields)
    return out


def _files(checkout: Path) -> list[str]:
    listed = subprocess.run(
        ["git", "-C", str(checkout), "ls-tree", "-r", "--name-only", "HEAD"], capture_output=True, text=True, check=True
    )
    return [line for line in listed.stdout.splitlines() if line.endswith("generated.proto")]


def _read(checkout: Path, path: str) -> str:
    return subprocess.run(
        ["git", "-C", str(checkout), "show", f"HEAD:{path}"], capture_output=True, text=True, check=True
    ).stdout


def _commit(checkout: Path) -> str:
    done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def message_name(group: str, version: str, kind: str) -> str:
    """`apps`, `v1`, `Deployment` -> `k8s.io.api.apps.v1.Deployment` (core for the legacy group)."""
    return f"k8s.io.api.{group.split('.', maxsplit=1)[0] if group else 'core'}.{version}.{kind}"


def build(api: Path, apimachinery: Path) -> bytes:
    sys.path.insert(0, str(ROOT / "src"))
    from runtimekit.cluster.apiserver.resources import BUILTIN

    messages: dict[str, list[list[object]]] = {}
    for checkout in (api, apimachinery):
        for path in _files(checkout):
            messages.update(_parse(_read(checkout, path)))
    roots = [message_name(i.group, i.version, i.kind) for i in BUILTIN if not i.custom]
    seen: set[str] = set()
    stack = [name for name in [*roots, *_EXTRA_ROOTS] if name in messages]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        stack.extend(str(f[2]) for f in messages[name] if str(f[2]) in messages and str(f[2]) not in seen)
    document = {
        "sources": {"kubernetes/api": _commit(api), "kubernetes/apimachinery": _commit(apimachinery)},
        "messages": {name: messages[name] for name in sorted(seen)},
    }
    raw = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    return gzip.compress(raw, compresslevel=9, mtime=0)


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    data = build(Path(sys.argv[1]), Path(sys.argv[2]))
    OUT.write_bytes(data)
    print(f"wrote {OUT.relative_to(ROOT)} ({len(data)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

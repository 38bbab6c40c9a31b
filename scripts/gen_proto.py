"""Generate the gRPC/protobuf Python stubs from proto/ into src/runtimekit/api/ (`make proto`).

Each proto/<path>.proto is compiled as runtimekit/api/<path>.proto so that the generated modules
import each other as `runtimekit.api....`; the proto packages (and so the gRPC method paths, e.g.
`/v1beta1.DevicePlugin/Allocate`) are the ones the .proto files declare. Stubs are never edited.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "proto"
OUT = ROOT / "src"
API = OUT / "runtimekit" / "api"


def main() -> int:
    protos = sorted(SRC.rglob("*.proto"))
    if not protos:
        print("no .proto files under proto/; nothing to generate")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        staged = []
        for proto in protos:
            target = Path(tmp) / "runtimekit" / "api" / proto.relative_to(SRC)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(proto, target)
            staged.append(str(target.relative_to(tmp)))
        include = Path(protoc.__file__).parent / "_proto"
        for top in {Path(s).parts[2] for s in staged}:
            shutil.rmtree(API / top, ignore_errors=True)
        args = [
            "protoc",
            f"-I{tmp}",
            f"-I{include}",
            f"--python_out={OUT}",
            f"--grpc_python_out={OUT}",
            f"--pyi_out={OUT}",
            *staged,
        ]
        code = protoc.main(args)
        if code != 0:
            print(f"protoc failed with exit code {code}", file=sys.stderr)
            return int(code)
    for package in {p.parent for p in API.rglob("*_pb2.py")}:
        for directory in [package, *package.parents]:
            if directory == API:
                break
            (directory / "__init__.py").touch()
    print(f"generated stubs for {len(protos)} proto files under {API.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

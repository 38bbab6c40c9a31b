"""Generate the gRPC/protobuf Python stubs, typed, from proto/ (`make proto`, and the build backend).

Each proto/<path>.proto is compiled as runtimekit/api/<path>.proto so that the generated modules
import each other as `runtimekit.api....`; the proto packages (and so the gRPC method paths, e.g.
`/v1beta1.DevicePlugin/Allocate`) are the ones the .proto files declare. Besides the `_pb2.py` and
`_pb2_grpc.py` modules, mypy-protobuf writes `_pb2.pyi` and `_pb2_grpc.pyi`, so the stubs, servicers
and `add_*_to_server` functions are typed. Stubs are never edited.

`make proto` runs this file to write into src/ (the editable install imports from there); setup.py's
build step calls `generate` to write into the build folder of a wheel, so `pip install` of a checkout,
an sdist or a git URL needs neither make nor generated files in the source tree.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto"
SRC = ROOT / "src"

# protoc plugins of mypy-protobuf: protoc runs them as programs, so each is a small script that runs
# the plugin's entry point with this interpreter (an isolated build environment may not put the
# package's own console scripts on PATH).
_PLUGINS = {"mypy": "main", "mypy_grpc": "grpc"}


def _plugin_scripts(folder: Path) -> list[str]:
    args = []
    for name, function in _PLUGINS.items():
        script = folder / f"protoc-gen-{name}"
        script.write_text(f"#!{sys.executable}\nfrom mypy_protobuf.main import {function}\n{function}()\n")
        script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        args.append(f"--plugin=protoc-gen-{name}={script}")
    return args


def generate(out: Path, proto_dir: Path = PROTO_DIR) -> list[Path]:
    """Compile every proto_dir/**/*.proto into out/runtimekit/api/ and return the files written.

    Replaces what an earlier run wrote there (each proto's top folder is removed first) and adds the
    `__init__.py` files that make the folders packages. Raises RuntimeError when protoc fails.
    """
    from grpc_tools import protoc  # type: ignore[import-untyped]  # a build-time requirement only

    api = out / "runtimekit" / "api"
    protos = sorted(proto_dir.rglob("*.proto"))
    if not protos:
        return []
    with tempfile.TemporaryDirectory() as tmp:
        staged = []
        for proto in protos:
            target = Path(tmp) / "runtimekit" / "api" / proto.relative_to(proto_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(proto, target)
            staged.append(str(target.relative_to(tmp)))
        tops = {Path(s).parts[2] for s in staged}
        for top in tops:
            shutil.rmtree(api / top, ignore_errors=True)
        plugins = Path(tmp) / "plugins"
        plugins.mkdir()
        include = Path(protoc.__file__).parent / "_proto"
        args = [
            "protoc",
            f"-I{tmp}",
            f"-I{include}",
            *_plugin_scripts(plugins),
            f"--python_out={out}",
            f"--grpc_python_out={out}",
            f"--mypy_out=quiet:{out}",
            f"--mypy_grpc_out=quiet:{out}",
            *staged,
        ]
        out.mkdir(parents=True, exist_ok=True)
        code = protoc.main(args)
        if code != 0:
            raise RuntimeError(f"protoc failed with exit code {code} (arguments: {' '.join(args[1:])})")
    for package in {p.parent for p in api.rglob("*_pb2.py")}:
        for directory in [package, *package.parents]:
            if directory == api:
                break
            (directory / "__init__.py").touch()
    return sorted(p for top in tops for p in (api / top).rglob("*") if p.is_file())


def main() -> int:
    try:
        written = generate(SRC)
    except RuntimeError as err:
        print(err, file=sys.stderr)
        return 1
    if not written:
        print("no .proto files under proto/; nothing to generate")
        return 0
    protos = len(list(PROTO_DIR.rglob("*.proto")))
    where = os.path.relpath(SRC / "runtimekit" / "api", ROOT)
    print(f"generated {len(written)} files for {protos} proto files under {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

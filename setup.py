"""The build step that makes `pip install` of a checkout, an sdist or a git URL work without make.

Everything else about the package is in pyproject.toml. The gRPC stubs under runtimekit/api/ are
generated from proto/ (scripts/gen_proto.py, with grpcio-tools and mypy-protobuf from
[build-system] requires) while setuptools builds the Python files: into the wheel's build folder, or,
for an editable install (which imports from src/), into src/ as `make proto` does.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_runtimekit_gen_proto", HERE / "scripts" / "gen_proto.py")
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {HERE / 'scripts' / 'gen_proto.py'}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildPyWithStubs(build_py):
    """setuptools' build_py, then the gRPC stubs from proto/ next to the modules it built."""

    def run(self) -> None:
        super().run()
        gen = _generator()
        out = HERE / "src" if self.editable_mode else Path(self.build_lib)
        written = gen.generate(out, HERE / "proto")
        if not written:
            raise RuntimeError(f"no .proto files under {HERE / 'proto'}: the gRPC stubs cannot be generated")
        self.announce(f"generated {len(written)} gRPC stub files under {out / 'runtimekit' / 'api'}", level=2)


setup(cmdclass={"build_py": BuildPyWithStubs})

#!/usr/bin/env bash
# Gather here what run_all.sh needs on a GPU machine that cannot download anything, into .gpu-carry/
# (ignored by git): wheels of the kit's compiled dependencies for Python 3.12 at the versions this
# checkout's .venv has (grpcio, protobuf, msgspec, nvidia-ml-py), HAMi-core's source (from a git
# checkout of Project-HAMi/HAMi-core, its HEAD), and NVML's header (nvml.h, from NVIDIA's
# nvidia-nvml-dev wheel), which CUDA toolkits without the NVML component lack and HAMi-core includes.
# Also makes the gRPC stubs (make proto), which run_all.sh imports.
# Usage: benchmarks/gpu/prepare.sh HAMI_CORE_GIT_DIR
set -euo pipefail
HAMI_GIT=${1:?usage: prepare.sh HAMI_CORE_GIT_DIR}
CARRY=.gpu-carry
PIP=".venv/bin/python -m pip"
grep -qx '/.gpu-carry/' .git/info/exclude 2>/dev/null || echo '/.gpu-carry/' >>.git/info/exclude
rm -rf "$CARRY" && mkdir -p "$CARRY/wheels" "$CARRY/include" "$CARRY/hami-core"
make proto >/dev/null
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
wanted=()
for name in grpcio protobuf msgspec nvidia-ml-py; do
  wanted+=("$name==$($PIP show "$name" | awk '/^Version:/ {print $2}')")
done
$PIP download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}" \
  -d "$CARRY/wheels" "${wanted[@]}"
tmp=$(mktemp -d)
$PIP download -q --no-deps --only-binary=:all: --python-version 3.12 "${platforms[@]}" -d "$tmp" nvidia-nvml-dev-cu12
unzip -q -j -o "$tmp"/nvidia_nvml_dev*.whl 'nvidia/nvml_dev/include/nvml.h' -d "$CARRY/include"
rm -rf "$tmp"
git --git-dir="$HAMI_GIT" archive HEAD 2>/dev/null | tar -x -C "$CARRY/hami-core" \
  || git -C "$HAMI_GIT" archive HEAD | tar -x -C "$CARRY/hami-core"
rm -rf "$CARRY/hami-core/docs"
du -sh "$CARRY" && ls "$CARRY/wheels" "$CARRY/include"

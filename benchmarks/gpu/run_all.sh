#!/usr/bin/env bash
# Every real-GPU check in one run on a machine with an NVIDIA GPU (docs/user-guide/runtime.md, "Checking on a real GPU").
# Writes into $OUT (default out/gpu): env.txt (the machine), nvidia-smi-q.xml (raw, for the tests),
# nvml.json, mig.json, mps.json, hami.json, hami-build.log, stderr.log. Uses what prepare.sh gathered in
# .gpu-carry (CARRY): the kit's compiled dependencies as wheels, installed into /tmp/site when there; and
# HAMi-core's source with NVML's header, built into /usr/local/vgpu, where the runtime's HAMi-core
# environment expects libvgpu.so. Never changes GPU settings.
set -u
OUT=${OUT:-out/gpu}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
CARRY=${CARRY:-.gpu-carry}
HAMI_SRC=${HAMI_SRC:-$CARRY/hami-core}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export PATH="$PATH:/usr/local/nvidia/bin:/usr/local/cuda/bin"  # the driver's tools (nvidia-cuda-mps-control) where a VM mounts them
if compgen -G "$CARRY/wheels/*.whl" >/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$CARRY"/wheels/*.whl && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
ERR="$OUT/stderr.log"
{
  date -u; uname -a; nvidia-smi; nvidia-smi -L; command -v nvidia-cuda-mps-control nvcc cmake
  nvcc --version | tail -2; cmake --version | head -1; mount | grep cgroup; ls /sys/fs/cgroup | head -30
  "$PY" -c "import sys, torch, grpc, google.protobuf as p, pynvml, prometheus_client as pc; print(sys.version, torch.__version__, grpc.__version__, p.__version__, pc.__version__)"
} >"$OUT/env.txt" 2>&1
nvidia-smi -q -x >"$OUT/nvidia-smi-q.xml" 2>>"$ERR"

build_hami() {
  local nvcc cuda extra=/tmp/hami-extra lib so
  nvcc=$(command -v nvcc) || { echo "no nvcc"; return 1; }
  # the toolkit is the folder with include/cuda.h (nvcc may be a wrapper script elsewhere)
  for cuda in "${CUDA_HOME:-}" /usr/local/cuda /usr/local/cuda-* "$(dirname "$(dirname "$(readlink -f "$nvcc")")")"; do
    [ -f "$cuda/include/cuda.h" ] && break
  done
  echo "CUDA toolkit: $cuda"
  mkdir -p "$extra/include" "$extra/lib"
  [ -f "$cuda/include/nvml.h" ] || cp "$CARRY/include/nvml.h" "$extra/include/"  # a toolkit without NVML's header
  for lib in libcuda libnvidia-ml; do  # link against the driver's own libraries where no stubs are
    so=$(ldconfig -p | awk -v l="$lib.so.1" '$1 == l {print $NF; exit}')
    [ -n "$so" ] || so=$(find /usr/local/nvidia /usr/lib /usr/lib64 -name "$lib.so.1" 2>/dev/null | head -1)
    [ -n "$so" ] && ln -sf "$so" "$extra/lib/$lib.so" && echo "linking $so"
  done
  rm -rf /tmp/hami && cp -r "$HAMI_SRC" /tmp/hami && cd /tmp/hami || return 1
  sed -i 's/^add_subdirectory(test)/# &/' CMakeLists.txt  # the library only
  # CMake 4 refuses a cmake_minimum_required below 3.5 (HAMi-core asks 2.8.11) unless told the policy floor
  export CUDA_HOME=$cuda CFLAGS="-I$extra/include"
  export LIBRARY_PATH="$extra/lib:$cuda/lib64/stubs:$cuda/lib64${LIBRARY_PATH:+:$LIBRARY_PATH}"
  mkdir -p build && cd build || return 1
  cmake .. -DDLSYM_HOOK_ENABLE=1 -DMULTIPROCESS_LIMIT_ENABLE=1 -DHOOK_MEMINFO_ENABLE=1 -DHOOK_NVML_ENABLE=1 \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_POLICY_VERSION_MINIMUM=3.5 && make -j8 vgpu && mkdir -p /usr/local/vgpu &&
    cp libvgpu.so /usr/local/vgpu/
}
( time build_hami ) >"$OUT/hami-build.log" 2>&1 &
BUILD=$!

# After a check, whatever it left running (a check stopped by its timeout leaves its clients, runtime and
# exporter behind, and the MPS daemon, which would hold the GPU in the next check)
leftovers() {
  command -v nvidia-smi >/dev/null || return 0  # no GPU: the checks skipped and started nothing
  pkill -9 -f benchmarks/gpu/gpu_client.py; pkill -f "from runtimekit.cli.main import main; sys.exit"  # kit.LAUNCH
  if [ -d "$1/kit/mps-pipe" ]; then
    echo quit | CUDA_MPS_PIPE_DIRECTORY="$1/kit/mps-pipe" timeout 20 nvidia-cuda-mps-control
  fi
  return 0
}

echo "== nvml" >>"$ERR"; timeout 80 "$PY" benchmarks/gpu/check_nvml.py >"$OUT/nvml.json" 2>>"$ERR"
leftovers /nonexistent
echo "== mig" >>"$ERR"; timeout 40 "$PY" benchmarks/gpu/check_mig.py >"$OUT/mig.json" 2>>"$ERR"
echo "== mps" >>"$ERR"; timeout 190 "$PY" benchmarks/gpu/check_sharing.py --isolation mps --window 6 --fault \
  --keep /tmp/gpu-check-mps >"$OUT/mps.json" 2>>"$ERR"
leftovers /tmp/gpu-check-mps
for _ in $(seq 60); do kill -0 $BUILD 2>/dev/null || break; sleep 1; done  # the build had minutes already
kill $BUILD 2>/dev/null
mkdir -p /tmp/vgpulock  # HAMi-core's lock folder
echo "== hami-core" >>"$ERR"; timeout 160 "$PY" benchmarks/gpu/check_sharing.py --isolation hami-core --window 6 \
  --keep /tmp/gpu-check-hami >"$OUT/hami.json" 2>>"$ERR"
leftovers /tmp/gpu-check-hami
nvidia-smi >>"$OUT/env.txt" 2>&1
for f in "$OUT"/*.json; do echo "$f: $("$PY" -c "import json,sys; print(json.load(open(sys.argv[1])).get('result'))" "$f" 2>&1)"; done

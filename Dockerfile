# syntax=docker/dockerfile:1
# One image for every LJ RuntimeKit component: the entry point is `runtimekit`, so a container's args
# name the component (`runtime`, `device-plugin`, `scheduler`, `exporter`, `controller`, `job-agent`).
#
#   make docker IMAGE=registry.example.com/lj-runtimekit/runtimekit TAG=0.1.0
#   docker build -t registry.example.com/lj-runtimekit/runtimekit:0.1.0 .
#
# The builder stage generates the gRPC stubs from proto/ (scripts/gen_proto.py, as `make proto`) and
# builds the wheel plus the wheels of every dependency; the runtime stage installs them offline, so it
# carries no compiler, no grpcio-tools and no build context. The image runs as the non-root user
# 65532; the manifests under deploy/ set root only where a component needs the host (runtime, device
# plugin) — see docs/install.md.
#
# The base is pinned by tag and digest (python 3.11.14, Debian bookworm, multi-arch index). Bump both
# together: docker buildx imagetools inspect python:3.11.14-slim-bookworm
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# grpcio-tools generates the stubs (the same lower bound as pyproject's dev extra); build makes the wheel.
RUN python -m pip install "grpcio-tools>=1.85.1" "build>=1.2"
COPY pyproject.toml README.md ./
COPY proto ./proto
COPY scripts/gen_proto.py ./scripts/gen_proto.py
COPY src ./src
RUN python scripts/gen_proto.py \
 && python -m build --wheel --outdir /dist . \
 && python -m pip wheel --wheel-dir /wheels /dist/*.whl

FROM ${PYTHON_IMAGE} AS runtime
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="lj-runtimekit" \
      org.opencontainers.image.description="LJ RuntimeKit: GPU sharing for Kubernetes (runtime, device plugin, scheduler, exporter, controller)" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}"
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MPLCONFIGDIR=/tmp/matplotlib
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    python -m pip install --no-index --find-links=/wheels /wheels/lj_runtimekit-*.whl \
 && groupadd --system --gid 65532 runtimekit \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin runtimekit \
 && runtimekit --version
USER 65532:65532
ENTRYPOINT ["runtimekit"]
CMD ["--help"]

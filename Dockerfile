# syntax=docker/dockerfile:1
# One image for every LJ RuntimeKit component: the entry point is `runtimekit`, so a container's args
# name the component (`runtime`, `device-plugin`, `scheduler`, `exporter`, `controller`, `job-agent`).
#
#   make docker IMAGE=registry.example.com/lj-runtimekit/runtimekit TAG=0.1.0
#   docker build -t registry.example.com/lj-runtimekit/runtimekit:0.1.0 .
#   scripts/build_image.sh        # podman, no Docker engine: on a Debian base made with mmdebstrap
#
# The builder stage builds the wheel (the build backend generates the gRPC stubs from proto/, see
# setup.py) and installs it with its dependencies into the virtualenv /opt/runtimekit, made without
# pip; the runtime stage copies only that virtualenv, so it carries no compiler, no pip cache, no
# grpcio-tools, no build frontend and no build context. The image runs as the non-root user 65532;
# the manifests under deploy/ set root only where a component needs the host (runtime, device
# plugin) — see docs/install.md.
#
# PYTHON_IMAGE is the base of both stages: any image with python3 (3.11 or newer) and its venv
# module at the same path in both stages. The default is pinned by tag and digest (python 3.11.14,
# Debian bookworm, multi-arch index); bump both together:
#   docker buildx imagetools inspect python:3.11.14-slim-bookworm
# scripts/build_image.sh passes a Debian bookworm base built locally (python3 and python3-venv).
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# pip's cache is a cache mount and pip's configuration (a private index, a CA bundle) may come as the
# optional build secrets `pip.conf` and `pip-ca.crt` (`cert = /run/secrets/pip-ca.crt` in it): none
# of them is written into a layer. The build frontend gets a virtualenv of its own (a distribution's
# python3 may refuse a global pip install).
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=secret,id=pip.conf,target=/etc/pip.conf \
    --mount=type=secret,id=pip-ca.crt \
    python3 -m venv /opt/build \
 && /opt/build/bin/pip install --no-compile "build>=1.2"
COPY pyproject.toml setup.py MANIFEST.in README.md ./
COPY proto ./proto
COPY scripts/gen_proto.py ./scripts/gen_proto.py
COPY src ./src
# The wheel, then the kit's virtualenv: made without pip, the builder's pip installs into it.
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=secret,id=pip.conf,target=/etc/pip.conf \
    --mount=type=secret,id=pip-ca.crt \
    /opt/build/bin/python -m build --wheel --outdir /dist . \
 && python3 -m venv --without-pip /opt/runtimekit \
 && /opt/build/bin/pip --python /opt/runtimekit/bin/python install /dist/*.whl

FROM ${PYTHON_IMAGE} AS runtime
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="lj-runtimekit" \
      org.opencontainers.image.description="LJ RuntimeKit: GPU sharing for Kubernetes (runtime, device plugin, scheduler, exporter, controller)" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}"
ENV PATH=/opt/runtimekit/bin:${PATH} \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MPLCONFIGDIR=/tmp/matplotlib
COPY --from=builder /opt/runtimekit /opt/runtimekit
RUN groupadd --system --gid 65532 runtimekit \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin runtimekit \
 && runtimekit --version
USER 65532:65532
ENTRYPOINT ["runtimekit"]
CMD ["--help"]

# LJ RuntimeKit — developer entry points. `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
PROTO_OUT := src/runtimekit/api
PROTOS := $(shell find proto -name '*.proto' 2>/dev/null)
STUBS_STAMP := $(PROTO_OUT)/.stubs-stamp
PYTEST_ARGS ?=

.PHONY: help venv proto demo test test-slow test-all image-test lint bench build docker deploy tools clean

help:
	@echo "make demo       create .venv, install, run the demo on the embedded default"
	@echo "make test       unit and integration tests (slow and e2e suites: make test-all)"
	@echo "make lint       ruff, mypy --strict, import-linter"
	@echo "make bench      run every benchmark under benchmarks/ (prints JSON)"
	@echo "make proto      regenerate gRPC stubs from proto/"
	@echo "make tools      fetch prometheus/promtool, helm, shellcheck, hadolint into .tools/ (tests use them)"
	@echo "make test-slow  only the slow and end-to-end suites; make test-all: everything"
	@echo "make image-test build the image with podman (scripts/build_image.sh) and check it (root, podman, mmdebstrap)"
	@echo "make build      sdist and wheel into dist/"
	@echo "make docker     build the image (IMAGE=... TAG=...); make deploy: deploy-all.sh with it"
	@echo "make clean      remove the virtualenv, generated stubs and caches"

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

$(STUBS_STAMP): $(STAMP) $(PROTOS) scripts/gen_proto.py
	$(BIN)/python scripts/gen_proto.py
	@touch $(STUBS_STAMP)

proto: $(STAMP)
	$(BIN)/python scripts/gen_proto.py
	@touch $(STUBS_STAMP)

demo: $(STUBS_STAMP)
	$(BIN)/runtimekit demo

test: $(STUBS_STAMP)
	$(BIN)/python -m pytest -m "not slow and not e2e and not image" $(PYTEST_ARGS)

test-slow: $(STUBS_STAMP)
	$(BIN)/python -m pytest -m "slow or e2e" $(PYTEST_ARGS)

test-all: $(STUBS_STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The image built with podman on a Debian base made with mmdebstrap, then checked from its files
# (tests/deploy/test_image.py); the build's JSON report (size, seconds) ends in out/image-report.json.
IMAGE_REPORT ?= out/image-report.json
image-test: $(STUBS_STAMP)
	RUNTIMEKIT_IMAGE_REPORT=$(IMAGE_REPORT) $(BIN)/python -m pytest -m image tests/deploy/test_image.py $(PYTEST_ARGS)
	@cat $(IMAGE_REPORT)

lint: $(STUBS_STAMP)
	$(BIN)/ruff check src tests benchmarks examples scripts
	$(BIN)/mypy
	$(BIN)/lint-imports

tools: $(STAMP)
	scripts/fetch_tools.sh

bench: $(STUBS_STAMP)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# the sdist, then the wheel built from it (the build step generates the gRPC stubs; see setup.py)
build: $(STAMP)
	$(BIN)/python -m build --outdir dist .

# The kit's image (Dockerfile) and its installation with deploy/deploy-all.sh (docs/install.md).
# `make docker IMAGE=registry.example.com/lj-runtimekit/runtimekit TAG=0.1.0`; `make deploy` with the same
# IMAGE and TAG (DEPLOY_ARGS adds deploy-all.sh options, e.g. --namespace=gpu --kubeconfig=FILE).
IMAGE  ?= ghcr.io/lj-runtimekit/runtimekit
TAG    ?= $(shell sed -n 's/^__version__ = "\(.*\)"/\1/p' src/runtimekit/_version.py)
DOCKER ?= docker
DEPLOY_ARGS ?=

docker:
	@command -v $(DOCKER) >/dev/null 2>&1 || { echo "make docker: '$(DOCKER)' is not installed (set DOCKER=podman to use Podman)" >&2; exit 1; }
	@$(DOCKER) info >/dev/null 2>&1 || { echo "make docker: no container engine answers ('$(DOCKER) info' failed): start the Docker daemon or point DOCKER_HOST at one" >&2; exit 1; }
	$(DOCKER) build --build-arg VERSION=$(TAG) -t $(IMAGE):$(TAG) .

deploy:
	deploy/deploy-all.sh deploy --image=$(IMAGE):$(TAG) $(DEPLOY_ARGS)

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache $(PROTO_OUT)/v1beta1 $(PROTO_OUT)/podresources $(PROTO_OUT)/runtimekit $(STUBS_STAMP)

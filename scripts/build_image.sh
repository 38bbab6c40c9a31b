#!/usr/bin/env bash
# Build the kit's image with podman, where no Docker engine runs (docs/install.md, "Build the image").
#
#   scripts/build_image.sh [--tag=IMAGE] [--base=IMAGE] [--root=DIR]
#
#   --tag        the image to build (default: ghcr.io/lj-runtimekit/runtimekit:<version>)
#   --base       the Dockerfile's PYTHON_IMAGE; default: a Debian bookworm base made here with
#                mmdebstrap (minbase, python3, python3-venv) and `podman import`ed as
#                localhost/lj-runtimekit-base:bookworm (made once, reused while it exists)
#   --root       podman's storage folder (default: podman's own); its run folder is DIR/run
#
# Builds with `podman build --isolation chroot` (no daemon, no cgroups needed) and prints one JSON
# object on stdout: image, base, version, size_bytes, base_seconds, build_seconds. Where PIP_CERT
# names a CA bundle (a proxy that re-signs TLS), pip in the build gets it as a build secret (never
# written into the image). Needs podman and, for the default base, mmdebstrap (Debian: apt-get
# install podman mmdebstrap); runs as root. The image is checked by `make image-test`.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="$(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$HERE/src/runtimekit/_version.py")"
DEFAULT_BASE="localhost/lj-runtimekit-base:bookworm"

die() {
  echo "build_image.sh: $*" >&2
  exit 2
}

tag="ghcr.io/lj-runtimekit/runtimekit:$VERSION"
base=""
root=""
for arg in "$@"; do
  case "$arg" in
    --tag=*) tag="${arg#*=}" ;;
    --base=*) base="${arg#*=}" ;;
    --root=*) root="${arg#*=}" ;;
    -h | --help)
      awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
      exit 0
      ;;
    *) die "unknown argument '$arg' (see --help)" ;;
  esac
done
[[ -n "$VERSION" ]] || die "no __version__ in src/runtimekit/_version.py"
command -v podman >/dev/null || die "podman is not installed (Debian: apt-get install podman mmdebstrap)"

podman_() {
  if [[ -n "$root" ]]; then
    podman --root "$root" --runroot "$root/run" "$@"
  else
    podman "$@"
  fi
}

now() { date +%s.%N; }
seconds() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# 1. The base: python3 and its venv module on Debian bookworm, from Debian's packages.
started="$(now)"
if [[ -z "$base" ]]; then
  base="$DEFAULT_BASE"
  if ! podman_ image exists "$base"; then
    command -v mmdebstrap >/dev/null || die "mmdebstrap is not installed (Debian: apt-get install mmdebstrap), or pass --base=IMAGE"
    echo "build_image.sh: making $base with mmdebstrap" >&2
    mmdebstrap --quiet --variant=minbase --include=python3,python3-venv bookworm "$work/rootfs.tar" >&2
    podman_ import --quiet --change 'CMD ["/usr/bin/python3"]' "$work/rootfs.tar" "$base" >/dev/null
    rm -f "$work/rootfs.tar"
  fi
fi
base_seconds="$(seconds "$started" "$(now)")"

# 2. The image. pip in the builder gets this machine's CA bundle, where one is set, as build secrets.
secrets=()
if [[ -n "${PIP_CERT:-}" && -r "${PIP_CERT}" ]]; then
  printf '[global]\ncert = /run/secrets/pip-ca.crt\n' >"$work/pip.conf"
  secrets+=(--secret "id=pip.conf,src=$work/pip.conf" --secret "id=pip-ca.crt,src=$PIP_CERT")
fi
started="$(now)"
podman_ build --isolation chroot --quiet "${secrets[@]}" \
  --build-arg "PYTHON_IMAGE=$base" --build-arg "VERSION=$VERSION" --tag "$tag" "$HERE" >&2
build_seconds="$(seconds "$started" "$(now)")"

size="$(podman_ image inspect --format '{{.Size}}' "$tag")"
printf '{"image": "%s", "base": "%s", "version": "%s", "size_bytes": %s, "base_seconds": %s, "build_seconds": %s}\n' \
  "$tag" "$base" "$VERSION" "$size" "$base_seconds" "$build_seconds"

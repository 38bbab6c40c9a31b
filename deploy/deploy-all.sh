#!/usr/bin/env bash
# Install, remove or print the LJ RuntimeKit manifests under deploy/ (docs/install.md).
#
#   deploy/deploy-all.sh deploy|delete|render|restart [--components=a,b] [--image=REGISTRY/NAME:TAG]
#                        [--namespace=NS] [--kubeconfig=FILE] [--preset=NAME] [--scheduler-plugins=DIR]
#                        [--scheduler-mode=standalone|extender] [--kube-scheduler-image=IMAGE]
#                        [--webhook-tls=generate|cert-manager|secret:NAME]
#
#   deploy   kubectl apply the manifests (idempotent: a second run changes nothing); with the scheduler
#            or the device plugin, first make the Secret lj-runtimekit-assignment-key with a random key
#            unless it exists (the key the scheduler signs assignments with; docs/security.md)
#   delete   kubectl delete them (absent objects are fine); keeps the CRDs unless --components names crds,
#            and the assignment key Secret unless every component is deleted
#   render   print the manifests, with the image and namespace applied, without touching a cluster
#   restart  kubectl rollout restart the DaemonSets and Deployments (after a ConfigMap edit)
#
# Components, in install order: crds runtime deviceplugin scheduler exporter controller webhook (default:
# all; device-plugin is accepted for deviceplugin). The webhook's serving certificate (--webhook-tls):
# generate (default) makes the Secret lj-runtimekit-webhook-tls with a CA of its own (openssl) unless it
# exists, cert-manager has cert-manager make it (deploy/webhook/cert-manager.yaml), secret:NAME mounts
# your Secret NAME (tls.crt, tls.key, ca.crt); deploy writes its ca.crt into the configurations' caBundle.
# --image replaces the kit's image everywhere, including the controller's --image for its job-agent Jobs; --namespace replaces kube-system everywhere, including
# the RoleBindings' subjects and the components' --namespace/--lease-namespace flags. --preset puts a
# protocol preset (hami, gpushare, volcano-vgpu, nvidia: deploy/presets/, as `runtimekit protocol preset`
# writes them) into every component's ConfigMap, so that system's pods run unchanged. --scheduler-plugins
# adds the ConfigMap lj-runtimekit-scheduler-plugins with the Python modules of DIR (custom actions and
# plugins, docs/customise.md), which the scheduler loads from its --plugins-dir. --scheduler-mode=extender
# installs the scheduler component as kube-scheduler (--kube-scheduler-image, default
# registry.k8s.io/kube-scheduler:v1.32.0: use your cluster's version) calling the kit's extender
# (deploy/scheduler/extender/, docs/user-guide/extender.md) instead of the standalone scheduler.
# KUBECTL names the kubectl binary (default: kubectl).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DEFAULT_IMAGE="ghcr.io/lj-runtimekit/runtimekit:0.1.0"
DEFAULT_NAMESPACE="kube-system"
ALL_COMPONENTS=(crds runtime deviceplugin scheduler exporter controller webhook)
KUBECTL="${KUBECTL:-kubectl}"
KEY_SECRET="lj-runtimekit-assignment-key"
DEFAULT_KUBE_SCHEDULER_IMAGE="registry.k8s.io/kube-scheduler:v1.32.0"
TLS_SECRET="lj-runtimekit-webhook-tls"
WEBHOOK="lj-runtimekit-webhook"

usage() {
  sed -n '2,31p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

die() {
  echo "deploy-all.sh: $*" >&2
  exit 2
}

action=""
components=""
image="$DEFAULT_IMAGE"
namespace="$DEFAULT_NAMESPACE"
kubeconfig=""
preset=""
plugins_dir=""
scheduler_mode="standalone"
kube_scheduler_image="$DEFAULT_KUBE_SCHEDULER_IMAGE"
webhook_tls="generate"

for arg in "$@"; do
  case "$arg" in
    deploy | delete | render | restart)
      [[ -z "$action" ]] || die "one action only (got '$action' and '$arg')"
      action="$arg"
      ;;
    --components=*) components="${arg#*=}" ;;
    --image=*) image="${arg#*=}" ;;
    --namespace=*) namespace="${arg#*=}" ;;
    --kubeconfig=*) kubeconfig="${arg#*=}" ;;
    --preset=*) preset="${arg#*=}" ;;
    --scheduler-plugins=*) plugins_dir="${arg#*=}" ;;
    --scheduler-mode=*) scheduler_mode="${arg#*=}" ;;
    --kube-scheduler-image=*) kube_scheduler_image="${arg#*=}" ;;
    --webhook-tls=*) webhook_tls="${arg#*=}" ;;
    -h | --help)
      usage
      exit 0
      ;;
    *) die "unknown argument '$arg' (see --help)" ;;
  esac
done

[[ -n "$action" ]] || die "give an action: deploy, delete, render or restart (see --help)"
[[ "$image" =~ ^[A-Za-z0-9][A-Za-z0-9._/:@-]*$ ]] || die "--image '$image' is not an image reference (REGISTRY/NAME:TAG)"
[[ "$image" == */* ]] || die "--image '$image' has no repository path (REGISTRY/NAME:TAG)"
[[ ${#namespace} -le 63 && "$namespace" =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] ||
  die "--namespace '$namespace' is not a valid namespace name (lower-case letters, digits, '-')"
if [[ "$namespace" == "$DEFAULT_NAMESPACE" ]]; then
  EXCLUDED_NAMESPACES="kube-system, lj-runtimekit-jobs"
else
  EXCLUDED_NAMESPACES="kube-system, ${namespace}, lj-runtimekit-jobs"
fi
if [[ -n "$preset" && ! -r "$HERE/presets/$preset.yaml" ]]; then
  known_presets=()
  for f in "$HERE"/presets/*.yaml; do known_presets+=("$(basename "$f" .yaml)"); done
  die "--preset '$preset' is not a preset (known: ${known_presets[*]})"
fi
[[ "$scheduler_mode" == standalone || "$scheduler_mode" == extender ]] ||
  die "--scheduler-mode '$scheduler_mode' is neither standalone nor extender"
[[ "$kube_scheduler_image" =~ ^[A-Za-z0-9][A-Za-z0-9._/:@-]*$ && "$kube_scheduler_image" == */* ]] ||
  die "--kube-scheduler-image '$kube_scheduler_image' is not an image reference (REGISTRY/NAME:TAG)"
if [[ "$scheduler_mode" == extender && (-n "$preset" || -n "$plugins_dir") ]]; then
  # kube-scheduler's configuration names the protocol's resources and scheduler, and the extender
  # mounts no plugins folder: write those by hand (docs/user-guide/extender.md)
  die "--scheduler-mode=extender takes neither --preset nor --scheduler-plugins (see docs/user-guide/extender.md)"
fi
case "$webhook_tls" in
  generate | cert-manager) tls_secret="$TLS_SECRET" ;;
  secret:?*) tls_secret="${webhook_tls#secret:}" ;;
  *) die "--webhook-tls '$webhook_tls' must be generate, cert-manager or secret:NAME" ;;
esac
[[ "$tls_secret" =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]] || die "--webhook-tls: '$tls_secret' is not a Secret name"
if [[ -n "$kubeconfig" && ! -r "$kubeconfig" ]]; then
  die "--kubeconfig '$kubeconfig' cannot be read"
fi
plugin_files=()
if [[ -n "$plugins_dir" ]]; then
  [[ -d "$plugins_dir" ]] || die "--scheduler-plugins '$plugins_dir' is not a folder"
  for f in "$plugins_dir"/*.py; do
    [[ -e "$f" ]] || continue
    name="$(basename "$f")"
    [[ "$name" == _* ]] && continue # as the scheduler does: private modules are not loaded
    [[ "$name" =~ ^[A-Za-z][A-Za-z0-9_]*\.py$ ]] || die "--scheduler-plugins: '$name' is not a module file name"
    plugin_files+=("$f")
  done
  [[ ${#plugin_files[@]} -gt 0 ]] || die "--scheduler-plugins '$plugins_dir' has no Python module (*.py)"
fi

# The selected components, in install order, each named once.
selected=()
if [[ -z "$components" ]]; then
  for c in "${ALL_COMPONENTS[@]}"; do
    if [[ "$action" == delete && "$c" == crds ]]; then
      continue # deleting the CRDs deletes every PodGroup and Queue, Volcano's too: only when asked by name
    fi
    selected+=("$c")
  done
else
  IFS=',' read -r -a wanted <<<"$components"
  [[ ${#wanted[@]} -gt 0 ]] || die "--components is empty"
  for w in "${wanted[@]}"; do
    [[ "$w" == device-plugin ]] && w=deviceplugin
    known=0
    for c in "${ALL_COMPONENTS[@]}"; do [[ "$c" == "$w" ]] && known=1; done
    [[ $known == 1 ]] || die "unknown component '$w' (known: ${ALL_COMPONENTS[*]})"
  done
  for c in "${ALL_COMPONENTS[@]}"; do
    for w in "${wanted[@]}"; do
      [[ "$w" == device-plugin ]] && w=deviceplugin
      if [[ "$c" == "$w" ]]; then
        selected+=("$c")
        break
      fi
    done
  done
fi

# A manifest file with the images, the namespace, the protocol preset and the webhook's Secret applied.
# The webhook's namespace exclusion keeps kube-system beside the kit's own namespace.
substitute() {
  sed -e "s|${DEFAULT_IMAGE//./\\.}|${image}|g" -e "s|${DEFAULT_NAMESPACE}|${namespace}|g" \
    -e "s|${DEFAULT_KUBE_SCHEDULER_IMAGE//./\\.}|${kube_scheduler_image}|g" \
    -e "s|secretName: ${TLS_SECRET}$|secretName: ${tls_secret}|" \
    -e "s|values: \[${namespace}, lj-runtimekit-jobs\]|values: [${EXCLUDED_NAMESPACES}]|" "$1" |
    with_preset | with_hami_opt_out
}

# The folder of a component's manifests: the scheduler's in extender mode is scheduler/extender.
folder_of() {
  if [[ "$1" == scheduler && "$scheduler_mode" == extender ]]; then
    echo scheduler/extender
  else
    echo "$1"
  fi
}

sha256() {
  if command -v sha256sum >/dev/null; then sha256sum; else shasum -a 256; fi | cut -d' ' -f1
}

# The sha256 of the data of a component's ConfigMap (its 02-configmap.yaml from `data:` on, as
# rendered): the value of its pod template's checksum/config annotation, so that a changed protocol
# or conf changes the pod template and `deploy` rolls the pods (the Helm chart does the same).
config_checksum() {
  local f
  f="$HERE/$(folder_of "$1")/02-configmap.yaml"
  [[ -e "$f" ]] || return 0
  substitute "$f" | sed -n '/^data:/,$p' | sha256
}

# The ConfigMap of custom scheduler plugins: one key per module, its source as a literal block.
plugins_configmap() {
  local f
  cat <<EOF_CM
# Source: --scheduler-plugins=$plugins_dir
apiVersion: v1
kind: ConfigMap
metadata:
  name: lj-runtimekit-scheduler-plugins
  namespace: ${namespace}
  labels:
    app.kubernetes.io/name: lj-runtimekit
    app.kubernetes.io/component: scheduler
data:
EOF_CM
  for f in "${plugin_files[@]}"; do
    echo "  $(basename "$f"): |2"
    sed -e 's/^/    /' "$f"
    [[ -z "$(tail -c1 "$f")" ]] || echo # a last line without its newline still ends the block
  done
}

# The scheduler's pod template also carries the plugins' checksum, so that changed plugins roll it.
with_plugins_checksum() {
  if [[ ${#plugin_files[@]} -eq 0 ]]; then
    cat
    return
  fi
  local sum
  sum="$(plugins_configmap | sed -n '/^data:/,$p' | sha256)"
  sed -e "s|^\( *\)\(checksum/config:.*\)|\1\2\n\1checksum/plugins: ${sum}|"
}

# Print the manifests of the given components (in the order given), image and namespace applied; the
# plugins ConfigMap (--scheduler-plugins) goes before the scheduler's Deployment.
render() {
  local first=1 c f checksum folder
  for c in "$@"; do
    checksum="$(config_checksum "$c")"
    folder="$(folder_of "$c")"
    for f in "$HERE/$folder"/[0-9][0-9]-*.yaml; do
      [[ -e "$f" ]] || die "no manifests in $HERE/$folder"
      if [[ "$c" == scheduler && "$(basename "$f")" == 03-* && ${#plugin_files[@]} -gt 0 ]]; then
        echo "---"
        plugins_configmap
      fi
      [[ $first == 1 ]] || echo "---"
      first=0
      echo "# Source: deploy/$folder/$(basename "$f")"
      if [[ -n "$checksum" ]]; then
        substitute "$f" | sed -e "s|^\( *checksum/config:\).*|\1 ${checksum}|" | with_plugins_checksum
      else
        substitute "$f"
      fi
    done
    if [[ "$c" == webhook && "$webhook_tls" == cert-manager ]]; then
      echo "---"
      echo "# Source: deploy/webhook/cert-manager.yaml"
      substitute "$HERE/webhook/cert-manager.yaml"
    fi
  done
}

# Under --preset=hami, HAMi's opt-out label (hami.io/webhook: ignore) on a pod or its namespace keeps the
# mutating webhook away, as HAMi's chart configures it: added to the first webhook of the configurations
# (the mutating one) only.
with_hami_opt_out() {
  if [[ "$preset" != hami ]]; then
    cat
    return
  fi
  awk '
    /^kind: MutatingWebhookConfiguration$/ { mutating = 1 }
    /^kind: ValidatingWebhookConfiguration$/ { mutating = 0 }
    mutating && /^      values: \[/ {
      print
      print "    - key: hami.io/webhook"
      print "      operator: NotIn"
      print "      values: [ignore]"
      next
    }
    mutating && /^  objectSelector: \{\}$/ {
      print "  objectSelector:"
      print "    matchExpressions:"
      print "    - key: hami.io/webhook"
      print "      operator: NotIn"
      print "      values: [ignore]"
      next
    }
    { print }
  '
}

# The ConfigMaps' protocol.yaml replaced by the preset's file (indented as the block it replaces).
with_preset() {
  if [[ -z "$preset" ]]; then
    cat
    return
  fi
  awk -v file="$HERE/presets/$preset.yaml" '
    skipping && /^    / { next }
    { skipping = 0 }
    /^  protocol\.yaml: \|$/ {
      print
      while ((getline line < file) > 0) print "    " line
      close(file)
      skipping = 1
      next
    }
    { print }
  '
}

kube() {
  if [[ -n "$kubeconfig" ]]; then
    "$KUBECTL" --kubeconfig "$kubeconfig" "$@"
  else
    "$KUBECTL" "$@"
  fi
}

workloads() {
  local c
  for c in "$@"; do
    case "$c" in
      runtime) echo daemonset/lj-runtimekit-runtime-ds ;;
      deviceplugin) echo daemonset/lj-runtimekit-device-plugin-ds ;;
      exporter) echo daemonset/lj-runtimekit-exporter-ds ;;
      scheduler)
        if [[ "$scheduler_mode" == extender ]]; then
          echo deployment/lj-runtimekit-extender
          echo deployment/lj-runtimekit-kube-scheduler
        else
          echo deployment/lj-runtimekit-scheduler-framework
        fi
        ;;
      controller) echo deployment/lj-runtimekit-controller ;;
      webhook) echo deployment/lj-runtimekit-webhook ;;
    esac
  done
}

# Make the assignment key Secret unless it exists (never replace a key: pods bound with it would be refused;
# rotate it in the two phases of docs/security.md#rotation).
ensure_assignment_key() {
  local c needed=0 secret
  for c in "$@"; do [[ "$c" == scheduler || "$c" == deviceplugin ]] && needed=1; done
  [[ $needed == 1 ]] || return 0
  if kube -n "$namespace" get secret "$KEY_SECRET" >/dev/null 2>&1; then
    return 0
  fi
  secret="$(head -c 36 /dev/urandom | base64 | tr -d '\n')"
  kube create -f - >/dev/null <<EOF
apiVersion: v1
kind: Secret
metadata:
  name: $KEY_SECRET
  namespace: $namespace
  labels:
    app.kubernetes.io/name: lj-runtimekit
    app.kubernetes.io/component: scheduler
type: Opaque
stringData:
  current: $secret
EOF
  echo "deploy-all.sh: created the Secret $namespace/$KEY_SECRET (the key assignments are signed with)" >&2
}

# The webhook's serving certificate, made with a CA of its own unless the Secret exists (generate only).
ensure_webhook_tls() {
  local c needed=0 tmp svc="$WEBHOOK"
  for c in "$@"; do [[ "$c" == webhook ]] && needed=1; done
  [[ $needed == 1 && "$webhook_tls" == generate ]] || return 0
  if kube -n "$namespace" get secret "$TLS_SECRET" >/dev/null 2>&1; then
    return 0
  fi
  command -v openssl >/dev/null ||
    die "making the webhook's certificate needs openssl; or give --webhook-tls=cert-manager or secret:NAME"
  tmp="$(mktemp -d)"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
    -subj "/CN=${svc}-ca" -keyout "$tmp/ca.key" -out "$tmp/ca.crt" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=${svc}.${namespace}.svc" \
    -keyout "$tmp/tls.key" -out "$tmp/tls.csr" 2>/dev/null
  printf 'subjectAltName=DNS:%s.%s.svc,DNS:%s.%s.svc.cluster.local\nextendedKeyUsage=serverAuth\n' \
    "$svc" "$namespace" "$svc" "$namespace" >"$tmp/ext"
  openssl x509 -req -in "$tmp/tls.csr" -CA "$tmp/ca.crt" -CAkey "$tmp/ca.key" -CAcreateserial -days 3650 \
    -extfile "$tmp/ext" -out "$tmp/tls.crt" 2>/dev/null
  kube create -f - >/dev/null <<EOF
apiVersion: v1
kind: Secret
metadata:
  name: $TLS_SECRET
  namespace: $namespace
  labels:
    app.kubernetes.io/name: lj-runtimekit
    app.kubernetes.io/component: webhook
type: kubernetes.io/tls
data:
  tls.crt: $(base64 <"$tmp/tls.crt" | tr -d '\n')
  tls.key: $(base64 <"$tmp/tls.key" | tr -d '\n')
  ca.crt: $(base64 <"$tmp/ca.crt" | tr -d '\n')
EOF
  rm -rf "$tmp"
  echo "deploy-all.sh: created the Secret $namespace/$TLS_SECRET (the webhook's serving certificate)" >&2
}

# The webhook configurations' caBundle: the ca.crt of the webhook's Secret, patched in after the apply (the
# files carry none, so a re-apply keeps it; cert-manager's CA injector writes its own).
inject_ca_bundle() {
  local ca i patch
  if [[ "$webhook_tls" == cert-manager ]] || ! printf '%s\n' "$@" | grep -qx webhook; then
    return 0
  fi
  ca="$(kube -n "$namespace" get secret "$tls_secret" -o 'jsonpath={.data.ca\.crt}')" ||
    die "cannot read the Secret $namespace/$tls_secret"
  [[ -n "$ca" ]] || die "the Secret $namespace/$tls_secret has no ca.crt for the webhook configurations' caBundle"
  for kind in mutatingwebhookconfiguration:1 validatingwebhookconfiguration:2; do
    patch=""
    for ((i = 0; i < ${kind#*:}; i++)); do
      patch+="${patch:+,}{\"op\":\"add\",\"path\":\"/webhooks/$i/clientConfig/caBundle\",\"value\":\"$ca\"}"
    done
    kube patch "${kind%:*}" "$WEBHOOK" --type=json -p "[$patch]" >/dev/null
  done
}

[[ ${#selected[@]} -gt 0 ]] || die "no component selected"
case "$action" in
  render)
    render "${selected[@]}"
    ;;
  deploy)
    command -v "$KUBECTL" >/dev/null || die "'$KUBECTL' not found: install kubectl or set KUBECTL"
    if ! kube get namespace "$namespace" >/dev/null 2>&1; then
      kube create namespace "$namespace"
    fi
    ensure_assignment_key "${selected[@]}"
    ensure_webhook_tls "${selected[@]}"
    render "${selected[@]}" | kube apply -f -
    inject_ca_bundle "${selected[@]}"
    echo "deploy-all.sh: applied ${selected[*]} in namespace $namespace with image $image" >&2
    ;;
  delete)
    command -v "$KUBECTL" >/dev/null || die "'$KUBECTL' not found: install kubectl or set KUBECTL"
    backwards=()
    for ((i = ${#selected[@]} - 1; i >= 0; i--)); do backwards+=("${selected[i]}"); done
    render "${backwards[@]}" | kube delete --ignore-not-found -f -
    if printf '%s\n' "${selected[@]}" | grep -qx webhook && [[ "$webhook_tls" == generate ]]; then
      kube -n "$namespace" delete secret "$TLS_SECRET" --ignore-not-found >/dev/null
    fi
    if [[ -z "$components" ]]; then
      kube -n "$namespace" delete secret "$KEY_SECRET" --ignore-not-found >/dev/null
      echo "deploy-all.sh: kept the CRDs (podgroups, queues); remove them with --components=crds" >&2
    fi
    ;;
  restart)
    command -v "$KUBECTL" >/dev/null || die "'$KUBECTL' not found: install kubectl or set KUBECTL"
    targets=()
    for target in $(workloads "${selected[@]}"); do targets+=("$target"); done
    [[ ${#targets[@]} -gt 0 ]] || die "nothing to restart among: ${selected[*]}"
    kube -n "$namespace" rollout restart "${targets[@]}"
    ;;
esac

{{/* Shared names and snippets. Every template mirrors a file of deploy/ (same objects, same fields). */}}

{{- define "lj-runtimekit.namespace" -}}
{{- .Values.namespace | default .Release.Namespace -}}
{{- end }}

{{/* The kit's image; a component's own `image` value wins: include "lj-runtimekit.image" (list $ .Values.runtime.image) */}}
{{- define "lj-runtimekit.image" -}}
{{- $root := index . 0 -}}
{{- $own := index . 1 -}}
{{- if $own -}}
{{- $own -}}
{{- else -}}
{{- printf "%s:%s" $root.Values.image.repository ($root.Values.image.tag | default $root.Chart.AppVersion) -}}
{{- end -}}
{{- end }}

{{/* Labels every object carries: the selector labels plus Helm's own (metadata only). */}}
{{- define "lj-runtimekit.labels" -}}
{{- $root := index . 0 -}}
{{- include "lj-runtimekit.selectorLabels" (index . 1) }}
helm.sh/chart: {{ printf "%s-%s" $root.Chart.Name $root.Chart.Version }}
app.kubernetes.io/managed-by: {{ $root.Release.Service }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
{{- end }}

{{/* The labels pods are selected by (fixed: they must not change on an upgrade). */}}
{{- define "lj-runtimekit.selectorLabels" -}}
app.kubernetes.io/name: lj-runtimekit
app.kubernetes.io/component: {{ . }}
{{- end }}

{{/* protocol.yaml, dotted keys in the loader's order (runtimekit protocol show); with protocol.preset,
the preset's file (files/presets/, as `runtimekit protocol preset NAME` writes it) with the device-plugin
settings of protocol.rules (memoryScaling, defaultMemory, defaultCores) in place of the preset's. */}}
{{- define "lj-runtimekit.protocol" -}}
{{- $p := .Values.protocol -}}
{{- if $p.preset -}}
{{- if ne $p.sockets.runtime "/run/lj-runtimekit/runtime.sock" -}}
{{- fail "protocol.preset keeps the runtime socket at /run/lj-runtimekit/runtime.sock: leave protocol.sockets.runtime as it is" -}}
{{- end -}}
{{- $text := .Files.Get (printf "files/presets/%s.yaml" $p.preset) | trim -}}
{{- range $key := list "memoryScaling" "defaultMemory" "defaultCores" }}
{{- $text = regexReplaceAll (printf "(?m)^rules[.]%s: .*$" $key) $text (printf "rules.%s: %v" $key (index $p.rules $key)) }}
{{- end }}
{{- $text -}}
{{- else -}}
resources.gpu: {{ $p.resources.gpu }}
resources.core: {{ $p.resources.core }}
resources.memory: {{ $p.resources.memory }}
resources.migPrefix: {{ $p.resources.migPrefix }}
memoryUnit: {{ $p.memoryUnit }}
schedulerName: {{ $p.schedulerName }}
labels.enable: {{ $p.labels.enable }}
labels.state: {{ $p.labels.state }}
labels.gpuModel: {{ $p.labels.gpuModel }}
labels.gpuCount: {{ $p.labels.gpuCount }}
labels.migMode: {{ $p.labels.migMode }}
labels.memoryUnit: {{ $p.labels.memoryUnit }}
annotations.nodeDevices: {{ $p.annotations.nodeDevices }}
annotations.assignment: {{ $p.annotations.assignment }}
annotations.assignmentSignature: {{ $p.annotations.assignmentSignature }}
annotations.assumeTime: {{ $p.annotations.assumeTime }}
annotations.allocated: {{ $p.annotations.allocated }}
annotations.policy: {{ $p.annotations.policy }}
annotations.gpuModels: {{ $p.annotations.gpuModels }}
annotations.simulatedRuntime: {{ $p.annotations.simulatedRuntime }}
sockets.runtime: {{ $p.sockets.runtime }}
{{- include "lj-runtimekit.protocolV2" $p }}
{{- end -}}
{{- end }}

{{/* The keys of protocol version 2, each only when it differs from its default (so that the default
render is the version-1 file of deploy/). */}}
{{- define "lj-runtimekit.protocolV2" -}}
{{- $names := dict "resources.memoryPercent" .resources.memoryPercent "aliases.gpu" .aliases.gpu "aliases.core" .aliases.core "aliases.memory" .aliases.memory "aliases.memoryPercent" .aliases.memoryPercent "annotations.gpuModelsExcluded" .annotations.gpuModelsExcluded "annotations.gpuUuids" .annotations.gpuUuids "annotations.gpuUuidsExcluded" .annotations.gpuUuidsExcluded "annotations.nodePolicy" .annotations.nodePolicy "annotations.gpuPolicy" .annotations.gpuPolicy "annotations.gpusCordoned" .annotations.gpusCordoned "schedulerAliases" .schedulerAliases -}}
{{- range $key := keys $names | sortAlpha }}
{{- with index $names $key }}
{{ $key }}: {{ . | quote }}
{{- end }}
{{- end }}
{{- if ne (int .resources.gpuReplicas) 1 }}
resources.gpuReplicas: {{ .resources.gpuReplicas }}
{{- end }}
{{- if not .resources.memoryAdvertised }}
resources.memoryAdvertised: false
{{- end }}
{{- if ne .rules.memoryDefault "proportional" }}
rules.memoryDefault: {{ .rules.memoryDefault }}
{{- end }}
{{- if ne .rules.modelMatch "exact" }}
rules.modelMatch: {{ .rules.modelMatch }}
{{- end }}
{{- if ne (float64 .rules.memoryScaling) 1.0 }}
rules.memoryScaling: {{ .rules.memoryScaling }}
{{- end }}
{{- if ne (int .rules.defaultMemory) 0 }}
rules.defaultMemory: {{ .rules.defaultMemory }}
{{- end }}
{{- if ne (int .rules.defaultCores) 0 }}
rules.defaultCores: {{ .rules.defaultCores }}
{{- end }}
{{- end }}

{{- define "lj-runtimekit.socketDir" -}}
{{- dir .Values.protocol.sockets.runtime -}}
{{- end }}

{{/* A checksum of a component's ConfigMap on its pods, so `helm upgrade` with new config restarts them. */}}
{{- define "lj-runtimekit.configChecksum" -}}
{{- $root := index . 0 -}}
checksum/config: {{ include (print $root.Template.BasePath (index . 1)) $root | sha256sum }}
{{- end }}

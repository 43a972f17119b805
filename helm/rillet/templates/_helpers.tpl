{{- define "rillet.fullname" -}}
{{- printf "%s-operator" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "rillet.labels" -}}
app.kubernetes.io/name: rillet-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "rillet.selector" -}}
app.kubernetes.io/name: rillet-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Peering object name: one per release. */}}
{{- define "rillet.peering" -}}
{{- printf "%s-rillet" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The brokers' node-reader ClusterRole: one per release; the operator is told its name. */}}
{{- define "rillet.nodeReader" -}}
{{- printf "%s-broker-node-reader" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The prefix of every object's name. */}}
{{- define "weir.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "weir.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selects the operator pods only (the drivers carry app.kubernetes.io/name weir too). */}}
{{- define "weir.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "weir.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "weir.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "weir.driverServiceAccountName" -}}
{{- if .Values.sparkDriver.serviceAccount.create -}}
{{- default "weir-spark" .Values.sparkDriver.serviceAccount.name -}}
{{- else -}}
{{- .Values.sparkDriver.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "weir.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "weir.sparkImage" -}}
{{- printf "%s:%s" .Values.spark.image.repository (default .Chart.AppVersion .Values.spark.image.tag) -}}
{{- end -}}

{{/* The namespaces the operator watches, as a JSON list; [] means every namespace (cluster-wide only). */}}
{{- define "weir.watchNamespaces" -}}
{{- if .Values.watchNamespaces -}}
{{- .Values.watchNamespaces | uniq | toJson -}}
{{- else if .Values.rbac.clusterWide -}}
{{- list | toJson -}}
{{- else -}}
{{- list .Release.Namespace | toJson -}}
{{- end -}}
{{- end -}}

{{/* The namespaces that get the Spark driver ServiceAccount and Role, as a JSON list. */}}
{{- define "weir.driverNamespaces" -}}
{{- $watched := include "weir.watchNamespaces" . | fromJsonArray -}}
{{- if .Values.sparkDriver.namespaces -}}
{{- .Values.sparkDriver.namespaces | uniq | toJson -}}
{{- else if $watched -}}
{{- $watched | toJson -}}
{{- else -}}
{{- list .Release.Namespace | toJson -}}
{{- end -}}
{{- end -}}

{{/* Hardening shared by every pod the chart runs. */}}
{{- define "weir.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.runAsUser }}
runAsGroup: {{ .Values.runAsUser }}
fsGroup: {{ .Values.runAsUser }}
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "weir.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "weir.zookeeperConnect" -}}
{{- if .Values.zookeeper.enabled -}}
{{- $name := printf "%s-zookeeper" (include "weir.fullname" .) -}}
{{- printf "%s.%s.svc:2181" $name .Release.Namespace -}}
{{- else -}}
{{- .Values.zookeeper.connect -}}
{{- end -}}
{{- end -}}

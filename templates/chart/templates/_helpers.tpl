{{/*
Names and labels shared by the templates. Object names follow the Determined documents
(determined-master-deployment-<release>, determined-master-service-<release>, ...), because
operators look them up by those names.
*/}}

{{- define "determined.labels" -}}
release: {{ .Release.Name }}
app.kubernetes.io/name: determined
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{- define "determined.masterApp" -}}
determined-master-{{ .Release.Name }}
{{- end -}}

{{- define "determined.dbApp" -}}
determined-db-{{ .Release.Name }}
{{- end -}}

{{- define "determined.secretName" -}}
determined-master-secrets-{{ .Release.Name }}
{{- end -}}

{{- define "determined.masterImage" -}}
{{- $name := ternary "hpecaide-master" "determined-master" (.Values.enterpriseEdition | default false) -}}
{{- printf "%s/%s:%s" .Values.imageRegistry $name (required "Chart.yaml needs an appVersion (the Determined version to install)" .Chart.AppVersion) -}}
{{- end -}}

{{- define "determined.dbHost" -}}
{{- if .Values.db.hostAddress -}}
{{ .Values.db.hostAddress }}
{{- else -}}
determined-db-service-{{ .Release.Name }}
{{- end -}}
{{- end -}}

{{- define "determined.scheduler" -}}
{{- $s := .Values.defaultScheduler | default "" | trim -}}
{{- if or (eq $s "coscheduler") (eq $s "preemption") -}}
{{ $s }}
{{- end -}}
{{- end -}}

{{/*
Environment variables carrying secrets into the master. The master reads any configuration key
from DET_<KEY PATH IN UPPER CASE>, so no password is ever written into the ConfigMap.
*/}}
{{- define "determined.secretEnv" -}}
- name: DET_DB_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "determined.secretName" . }}
      key: db-password
{{- $cs := .Values.checkpointStorage | default dict }}
{{- range $key, $env := dict "accessKey" "DET_CHECKPOINT_STORAGE_ACCESS_KEY" "secretKey" "DET_CHECKPOINT_STORAGE_SECRET_KEY" "connection_string" "DET_CHECKPOINT_STORAGE_CONNECTION_STRING" "credential" "DET_CHECKPOINT_STORAGE_CREDENTIAL" }}
{{- if index $cs $key }}
- name: {{ $env }}
  valueFrom:
    secretKeyRef:
      name: {{ include "determined.secretName" $ }}
      key: {{ printf "checkpoint-%s" ($key | kebabcase) }}
{{- end }}
{{- end }}
{{- if and .Values.logging .Values.logging.security .Values.logging.security.password }}
- name: DET_LOGGING_SECURITY_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "determined.secretName" . }}
      key: logging-password
{{- end }}
{{- end -}}

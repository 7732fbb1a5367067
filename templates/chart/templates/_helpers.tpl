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
The database password reaches the master as DET_DB_PASSWORD, one of the options the master binds to
an environment variable; it is never written into the ConfigMap.
*/}}
{{- define "determined.secretEnv" -}}
- name: DET_DB_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "determined.secretName" . }}
      key: db-password
{{- end -}}


{{/*
The master reads one config file and binds only a few options to environment variables
(DET_DB_PASSWORD among them, but nothing under checkpoint_storage or logging). So settings that
hold keys are written as whole top-level blocks into the release Secret (`master-secrets.yaml`)
and left out of the ConfigMap; an init container concatenates the two files (their top-level
keys never overlap, so the result is one YAML mapping) into the file the master reads.
*/}}
{{- define "determined.storageHasSecrets" -}}
{{- $cs := .Values.checkpointStorage | default dict -}}
{{- if or $cs.accessKey $cs.secretKey $cs.connection_string $cs.credential }}true{{ end -}}
{{- end -}}

{{- define "determined.loggingHasSecrets" -}}
{{- if and .Values.logging .Values.logging.security .Values.logging.security.password }}true{{ end -}}
{{- end -}}

{{- define "determined.checkpointStorageConfig" -}}
{{- $cs := .Values.checkpointStorage | default dict }}
checkpoint_storage:
  type: {{ required "checkpointStorage.type is required" $cs.type | quote }}
  {{- if eq $cs.type "shared_fs" }}
  host_path: {{ required "checkpointStorage.hostPath is required for shared_fs" $cs.hostPath | quote }}
  {{- else if eq $cs.type "s3" }}
  bucket: {{ required "checkpointStorage.bucket is required for s3" $cs.bucket | quote }}
  {{- if $cs.endpointUrl }}
  endpoint_url: {{ $cs.endpointUrl | quote }}
  {{- end }}
  {{- if $cs.accessKey }}
  access_key: {{ $cs.accessKey | toString | quote }}
  {{- end }}
  {{- if $cs.secretKey }}
  secret_key: {{ $cs.secretKey | toString | quote }}
  {{- end }}
  {{- if $cs.prefix }}
  prefix: {{ $cs.prefix | quote }}
  {{- end }}
  {{- else if eq $cs.type "gcs" }}
  bucket: {{ required "checkpointStorage.bucket is required for gcs" $cs.bucket | quote }}
  {{- if $cs.prefix }}
  prefix: {{ $cs.prefix | quote }}
  {{- end }}
  {{- else if eq $cs.type "azure" }}
  container: {{ required "checkpointStorage.container is required for azure" $cs.container | quote }}
  {{- if and $cs.connection_string $cs.account_url }}
  {{- fail "exactly one of checkpointStorage.connection_string or checkpointStorage.account_url may be set" }}
  {{- end }}
  {{- if $cs.connection_string }}
  connection_string: {{ $cs.connection_string | toString | quote }}
  {{- end }}
  {{- if $cs.account_url }}
  account_url: {{ $cs.account_url | quote }}
  {{- end }}
  {{- if $cs.credential }}
  credential: {{ $cs.credential | toString | quote }}
  {{- end }}
  {{- else }}
  {{- fail (printf "checkpointStorage.type %q is not one of shared_fs, s3, gcs, azure" $cs.type) }}
  {{- end }}
  save_experiment_best: {{ $cs.saveExperimentBest | default 0 }}
  save_trial_best: {{ ternary 1 $cs.saveTrialBest (kindIs "invalid" $cs.saveTrialBest) }}
  save_trial_latest: {{ ternary 1 $cs.saveTrialLatest (kindIs "invalid" $cs.saveTrialLatest) }}
{{- end -}}

{{- define "determined.loggingConfig" -}}
{{- with .Values.logging }}
{{- if .type }}
logging:
  type: {{ .type | quote }}
  {{- if eq .type "elastic" }}
  host: {{ required "logging.host is required for elastic" .host | quote }}
  port: {{ required "logging.port is required for elastic" .port }}
  {{- with .security }}
  security:
    {{- if .username }}
    username: {{ .username | quote }}
    {{- end }}
    {{- if .password }}
    password: {{ .password | toString | quote }}
    {{- end }}
    {{- with .tls }}
    tls:
      enabled: {{ .enabled | default false }}
      skip_verify: {{ .skipVerify | default false }}
      {{- if .certificateName }}
      certificate_name: {{ .certificateName | quote }}
      {{- end }}
      {{- if .certificate }}
      certificate: /etc/determined/elastic.crt
      {{- end }}
    {{- end }}
  {{- end }}
  {{- end }}
{{- end }}
{{- end }}
{{- end -}}

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
{{- $name := "determined-master" -}}
{{- if .Values.enterpriseEdition -}}
{{- $name = ternary "hpe-mlde-master" "hpecaide-master" (include "determined.has" (list . "chart.enterprise_image.hpe_mlde") | eq "true") -}}
{{- end -}}
{{- printf "%s/%s:%s" .Values.imageRegistry $name (required "Chart.yaml needs an appVersion (the Determined version to install)" .Chart.AppVersion) -}}
{{- end -}}

{{- define "determined.dbHost" -}}
{{- if .Values.db.hostAddress -}}
{{ .Values.db.hostAddress }}
{{- else -}}
determined-db-service-{{ .Release.Name }}
{{- end -}}
{{- end -}}

{{/* defaultScheduler, trimmed as the official chart trims it, when it names a gang scheduler. */}}
{{- define "determined.scheduler" -}}
{{- $s := .Values.defaultScheduler | default "" | trim -}}
{{- if or (eq $s "coscheduler") (and (eq $s "preemption") (include "determined.has" (list . "master.resource_manager.default_scheduler.preemption"))) -}}
{{ $s }}
{{- end -}}
{{- end -}}

{{/* The master's default_scheduler, so the schedulerName of its task pods: 0.17.x writes coscheduler for
     both coscheduler and preemption; from 0.18.1 the value passes through. */}}
{{- define "determined.masterScheduler" -}}
{{- with include "determined.scheduler" . -}}
{{- if include "determined.has" (list $ "chart.default_scheduler.passthrough") }}{{ . }}{{ else }}coscheduler{{ end -}}
{{- end -}}
{{- end -}}

{{/* Where the master's configuration lives: a Secret from Determined 0.26.2 (all of it, as the official
     chart), before that a ConfigMap without secrets plus the release Secret's blocks. */}}
{{- define "determined.configIsSecret" -}}
{{- include "determined.has" (list . "master.config.secret") -}}
{{- end -}}

{{/* The PEM files the master reads under /mount/determined/secrets/: the TLS pair and the database CA. */}}
{{- define "determined.secretPath" -}}
/mount/determined/secrets/
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
  {{- if and $cs.prefix (include "determined.has" (list . "checkpoint_storage.s3.prefix")) }}
  prefix: {{ $cs.prefix | quote }}
  {{- end }}
  {{- else if eq $cs.type "gcs" }}
  bucket: {{ required "checkpointStorage.bucket is required for gcs" $cs.bucket | quote }}
  {{- if and $cs.prefix (include "determined.has" (list . "checkpoint_storage.gcs.prefix")) }}
  prefix: {{ $cs.prefix | quote }}
  {{- end }}
  {{- else if eq $cs.type "azure" }}
  container: {{ required "checkpointStorage.container is required for azure" $cs.container | quote }}
  {{- if and $cs.connection_string $cs.account_url }}
  {{- fail "exactly one of checkpointStorage.connection_string or checkpointStorage.account_url may be set" }}
  {{- end }}
  {{- if and $cs.connection_string $cs.credential }}
  {{- fail "checkpointStorage.connection_string and checkpointStorage.credential must not both be set" }}
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
  {{- else if and (eq $cs.type "directory") (include "determined.has" (list . "checkpoint_storage.directory")) }}
  container_path: {{ required "checkpointStorage.containerPath is required for directory" $cs.containerPath | quote }}
  {{- else if and (eq $cs.type "hdfs") (include "determined.has" (list . "checkpoint_storage.hdfs")) }}
  hdfs_url: {{ required "checkpointStorage.hdfsUrl is required for hdfs" $cs.hdfsUrl | quote }}
  hdfs_path: {{ required "checkpointStorage.hdfsPath is required for hdfs" $cs.hdfsPath | quote }}
  {{- if $cs.user }}
  user: {{ $cs.user | quote }}
  {{- end }}
  {{- else }}
  {{- fail (printf "checkpointStorage.type %q is not a checkpoint storage of Determined %s" $cs.type .Chart.AppVersion) }}
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


{{/* The initial password of the admin and determined users (Determined 0.31 and later), checked as the
     official chart checks it: required on a fresh install (no database Service yet), 8+ characters with
     upper, lower and digit. An upgrade never needs it (the users exist), also when rendered offline
     (`det-k8s diff`: helm template --is-upgrade, where lookup finds nothing). */}}
{{- define "determined.initialPassword" -}}
{{- if include "determined.has" (list . "master.security.initial_user_password") -}}
{{- $password := coalesce .Values.initialUserPassword .Values.defaultPassword -}}
{{- if and (not .Release.IsUpgrade) (empty (lookup "v1" "Service" .Release.Namespace (printf "determined-db-service-%s" .Release.Name))) -}}
{{- $password = $password | required "An initial password for admin and determined users is required (initialUserPassword)" | toString -}}
{{- if not (gt (len $password) 7) }}{{ fail "initialUserPassword must have at least 8 characters" }}{{ end -}}
{{- if not (regexMatch "[A-Z]" $password) }}{{ fail "initialUserPassword must include an uppercase letter" }}{{ end -}}
{{- if not (regexMatch "[a-z]" $password) }}{{ fail "initialUserPassword must include a lowercase letter" }}{{ end -}}
{{- if not (regexMatch "[0-9]" $password) }}{{ fail "initialUserPassword must include a number" }}{{ end -}}
{{- end -}}
{{- with $password }}{{ . | toString }}{{ end -}}
{{- end -}}
{{- end -}}

{{/* task_container_defaults.image, as the official chart of the release writes it. */}}
{{- define "determined.taskImages" -}}
{{- $tcd := .Values.taskContainerDefaults | default dict -}}
{{- $di := .Values.defaultImages | default dict -}}
{{- if include "determined.has" (list . "chart.task_images_independent") }}
image:
  cpu: {{ coalesce $tcd.cpuImage $di.cpuImage (include "determined.value" (list . "chart.image.cpu")) | quote }}
  gpu: {{ coalesce $tcd.gpuImage $di.gpuImage (include "determined.value" (list . "chart.image.gpu")) | quote }}
  rocm: {{ coalesce $tcd.rocmImage $di.rocmImage (include "determined.value" (list . "chart.image.rocm")) | quote }}
{{- else if and $tcd.cpuImage $tcd.gpuImage }}
image:
  cpu: {{ $tcd.cpuImage | quote }}
  gpu: {{ $tcd.gpuImage | quote }}
{{- else if or $tcd.cpuImage $tcd.gpuImage }}
{{- fail "taskContainerDefaults.cpuImage and taskContainerDefaults.gpuImage must be set together" }}
{{- else if include "determined.has" (list . "chart.default_images") }}
image:
  cpu: {{ coalesce $di.cpuImage (include "determined.value" (list . "chart.image.cpu")) | quote }}
  gpu: {{ coalesce $di.gpuImage (include "determined.value" (list . "chart.image.gpu")) | quote }}
{{- else if .Values.imageRegistry }}
image:
  cpu: {{ printf "%s/%s" .Values.imageRegistry (include "determined.value" (list . "chart.image.cpu")) | quote }}
  gpu: {{ printf "%s/%s" .Values.imageRegistry (include "determined.value" (list . "chart.image.gpu")) | quote }}
{{- end }}
{{- end -}}

{{/*
The master's configuration file. (list $ true): everything, for the Secret the master mounts from
Determined 0.26.2; (list $ false): without the blocks that hold keys (those are in the release Secret's
master-secrets.yaml, appended by the init container) and without db.password (DET_DB_PASSWORD), for the
ConfigMap of earlier releases.
*/}}
{{- define "determined.masterConfig" -}}
{{- $ := index . 0 -}}
{{- $inline := index . 1 -}}
{{- $tcd := $.Values.taskContainerDefaults | default dict -}}
{{- $rm := $.Values.resourceManager | default dict -}}
port: 8081
{{- if include "determined.has" (list $ "master.log") }}
log:
  level: {{ $.Values.logLevel | default "info" | quote }}
  color: {{ ternary true $.Values.logColor (kindIs "invalid" $.Values.logColor) }}
{{- end }}
{{- $password := include "determined.initialPassword" $ }}
{{- $sec := $.Values.security | default dict }}
{{- if or $.Values.tlsSecret ($sec.defaultTask) ($sec.authz) (and $inline $password) }}
security:
  {{- if and $inline $password }}
  initial_user_password: {{ $password | quote }}
  {{- end }}
  {{- if $.Values.tlsSecret }}
  tls:
    cert: {{ include "determined.secretPath" $ }}tls.crt
    key: {{ include "determined.secretPath" $ }}tls.key
  {{- end }}
  {{- with $sec.defaultTask }}
  default_task:
    user: {{ .user | quote }}
    uid: {{ .uid }}
    group: {{ .group | quote }}
    gid: {{ .gid }}
  {{- end }}
  {{- with $sec.authz }}
  authz:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
db:
  user: {{ required "db.user is required" $.Values.db.user | quote }}
  {{- if $inline }}
  password: {{ required "db.password is required" $.Values.db.password | toString | quote }}
  {{- end }}
  host: {{ include "determined.dbHost" $ | quote }}
  port: {{ $.Values.db.port | default 5432 }}
  name: {{ required "db.name is required" $.Values.db.name | quote }}
  {{- if $.Values.db.sslMode }}
  ssl_mode: {{ $.Values.db.sslMode | quote }}
  ssl_root_cert: {{ printf "%s%s" (include "determined.secretPath" $) (required "db.sslRootCert is required with db.sslMode" $.Values.db.sslRootCert) | quote }}
  {{- end }}
{{- if or $inline (not (include "determined.storageHasSecrets" $)) }}
{{ include "determined.checkpointStorageConfig" $ }}
{{- end }}
resource_manager:
  type: kubernetes
  {{- if include "determined.has" (list $ "master.resource_manager.default_namespace") }}
  default_namespace: {{ coalesce $rm.defaultNamespace $.Release.Namespace | quote }}
  {{- with $rm.clusterName }}
  cluster_name: {{ . | quote }}
  {{- end }}
  {{- else }}
  namespace: {{ $.Release.Namespace | quote }}
  {{- end }}
  max_slots_per_pod: {{ required "maxSlotsPerPod is required: the GPUs per node (GCD of the node sizes)" $.Values.maxSlotsPerPod }}
  master_service_name: determined-master-service-{{ $.Release.Name }}
  {{- with include "determined.masterScheduler" $ }}
  default_scheduler: {{ . }}
  {{- end }}
  {{- $slotType := $.Values.slotType | default "gpu" }}
  {{- if eq $slotType "cpu" }}
  slot_type: cpu
  slot_resource_requests:
    cpu: {{ required "slotResourceRequests.cpu is required when slotType is cpu" ($.Values.slotResourceRequests | default dict).cpu }}
  {{- else if ne $slotType "gpu" }}
  slot_type: {{ $slotType }}
  {{- end }}
  {{- with $.Values.fluent }}
  {{- if include "determined.has" (list $ "master.resource_manager.fluent.uid_gid") }}
  fluent:
    {{- toYaml . | nindent 4 }}
  {{- else if .image }}
  fluent:
    image: {{ .image | quote }}
  {{- end }}
  {{- end }}
  {{- if and $.Values.determinedMasterHost (include "determined.has" (list $ "master.resource_manager.determined_master_host")) }}
  determined_master_scheme: {{ $.Values.determinedMasterScheme | default (ternary "https" "http" (not (empty $.Values.tlsSecret))) | quote }}
  determined_master_host: {{ $.Values.determinedMasterHost | quote }}
  determined_master_port: {{ $.Values.determinedMasterPort | default $.Values.masterPort }}
  {{- end }}
  {{- if include "determined.has" (list $ "master.resource_pools") }}
  {{- with $.Values.defaultAuxResourcePool }}
  default_aux_resource_pool: {{ . | quote }}
  {{- end }}
  {{- with $.Values.defaultComputeResourcePool }}
  default_compute_resource_pool: {{ . | quote }}
  {{- end }}
  {{- end }}
{{- if and $.Values.resourcePools (include "determined.has" (list $ "master.resource_pools")) }}
resource_pools:
  {{- toYaml $.Values.resourcePools | nindent 2 }}
{{- end }}
task_container_defaults:
  {{- include "determined.taskImages" $ | trim | nindent 2 }}
  {{- if $tcd.forcePullImage }}
  force_pull_image: true
  {{- end }}
  {{- with $tcd.networkMode }}
  network_mode: {{ . | quote }}
  {{- end }}
  {{- with $tcd.dtrainNetworkInterface }}
  dtrain_network_interface: {{ . | quote }}
  {{- end }}
  {{- if include "determined.has" (list $ "master.task_container_defaults.port_ranges") }}
  {{- with $tcd.ncclPortRange }}
  nccl_port_range: {{ . | quote }}
  {{- end }}
  {{- with $tcd.glooPortRange }}
  gloo_port_range: {{ . | quote }}
  {{- end }}
  {{- end }}
  {{- with $tcd.cpuPodSpec }}
  cpu_pod_spec: {{ . | toJson }}
  {{- end }}
  {{- with $tcd.gpuPodSpec }}
  gpu_pod_spec: {{ . | toJson }}
  {{- end }}
  {{- if include "determined.has" (list $ "master.task_container_defaults.v0_38") }}
  {{- with $tcd.checkpointGcPodSpec }}
  checkpoint_gc_pod_spec: {{ . | toJson }}
  {{- end }}
  {{- with $tcd.logPolicies }}
  log_policies:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $tcd.startupHook }}
  startup_hook: {{ . | quote }}
  {{- end }}
  {{- end }}
telemetry:
  enabled: {{ if $.Values.telemetry }}{{ $.Values.telemetry.enabled | default false }}{{ else }}false{{ end }}
{{- if and $.Values.observability (include "determined.has" (list $ "master.observability")) }}
observability:
  enable_prometheus: {{ $.Values.observability.enable_prometheus | default false }}
{{- end }}
{{- with $.Values.clusterName }}
cluster_name: {{ . | quote }}
{{- end }}
{{- if include "determined.has" (list $ "master.idle_timeouts") }}
{{- with $.Values.tensorboardTimeout }}
tensorboard_timeout: {{ . }}
{{- end }}
{{- with $.Values.notebookTimeout }}
notebook_timeout: {{ . }}
{{- end }}
{{- end }}
{{- if and $.Values.retentionPolicy (include "determined.has" (list $ "master.retention_policy")) }}
retention_policy:
  {{- with $.Values.retentionPolicy.logRetentionDays }}
  log_retention_days: {{ . }}
  {{- end }}
  {{- with $.Values.retentionPolicy.schedule }}
  schedule: {{ . | quote }}
  {{- end }}
{{- end }}
{{- if or $inline (not (include "determined.loggingHasSecrets" $)) }}
{{- include "determined.loggingConfig" $ }}
{{- end }}
{{- end -}}

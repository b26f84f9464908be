{{/* Names, labels, the image, the database environment, and the render-time checks. */}}

{{- define "partq.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "partq.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "partq.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object; call with (dict "ctx" $ "component" "worker"). */}}
{{- define "partq.labels" -}}
helm.sh/chart: {{ include "partq.chart" .ctx }}
{{ include "partq.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: partq
{{- end -}}

{{- define "partq.selectorLabels" -}}
app.kubernetes.io/name: {{ include "partq.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "partq.workerName" -}}
{{- printf "%s-worker" (include "partq.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "partq.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "partq.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The image: repository@digest, else repository:tag (tag defaults to the appVersion). */}}
{{- define "partq.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (toString (default .Chart.AppVersion .Values.image.tag)) -}}
{{- end -}}
{{- end -}}

{{/* The migration job's image: migration.image when its repository is set, else the workers' image. */}}
{{- define "partq.migrationImage" -}}
{{- $m := .Values.migration.image -}}
{{- if not $m.repository -}}
{{- include "partq.image" . -}}
{{- else if $m.digest -}}
{{- printf "%s@%s" $m.repository $m.digest -}}
{{- else -}}
{{- printf "%s:%s" $m.repository (toString (default .Chart.AppVersion $m.tag)) -}}
{{- end -}}
{{- end -}}

{{/*
The connection, as partq and libpq read it: PARTQ_DSN from the Secret when dsnKey is set,
and the PG* variables (libpq applies them to whatever the DSN leaves out, e.g. sslmode).
No credential is ever a literal value here: user and password come from the Secret.
*/}}
{{- define "partq.databaseEnv" -}}
{{- $db := .Values.database -}}
- name: PARTQ_SCHEMA
  value: {{ $db.schema | quote }}
{{- if $db.dsnKey }}
- name: PARTQ_DSN
  valueFrom:
    secretKeyRef:
      name: {{ $db.existingSecret }}
      key: {{ $db.dsnKey }}
{{- end }}
{{- if $db.host }}
- name: PGHOST
  value: {{ $db.host | quote }}
- name: PGPORT
  value: {{ $db.port | quote }}
{{- end }}
{{- if $db.database }}
- name: PGDATABASE
  value: {{ $db.database | quote }}
{{- end }}
{{- if $db.userKey }}
- name: PGUSER
  valueFrom:
    secretKeyRef:
      name: {{ $db.existingSecret }}
      key: {{ $db.userKey }}
{{- else if $db.user }}
- name: PGUSER
  value: {{ $db.user | quote }}
{{- end }}
{{- if $db.passwordKey }}
- name: PGPASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $db.existingSecret }}
      key: {{ $db.passwordKey }}
{{- end }}
{{- if $db.sslmode }}
- name: PGSSLMODE
  value: {{ $db.sslmode | quote }}
{{- end }}
{{- if $db.sslRootCert.secretName }}
- name: PGSSLROOTCERT
  value: /etc/partq/db-ca/{{ $db.sslRootCert.key }}
{{- end }}
- name: PGCONNECT_TIMEOUT
  value: {{ $db.connectTimeoutSeconds | quote }}
{{- end -}}

{{- define "partq.databaseVolumes" -}}
{{- if .Values.database.sslRootCert.secretName -}}
- name: db-ca
  secret:
    secretName: {{ .Values.database.sslRootCert.secretName }}
    items:
      - key: {{ .Values.database.sslRootCert.key }}
        path: {{ .Values.database.sslRootCert.key }}
{{ end -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end -}}

{{- define "partq.databaseVolumeMounts" -}}
{{- if .Values.database.sslRootCert.secretName -}}
- name: db-ca
  mountPath: /etc/partq/db-ca
  readOnly: true
{{ end -}}
- name: tmp
  mountPath: /tmp
{{- end -}}

{{/* Pod-level settings shared by the workers, the bridge and the migration job. */}}
{{- define "partq.podCommon" -}}
{{- with .Values.imagePullSecrets -}}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{ end -}}
automountServiceAccountToken: false
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- end -}}

{{/* An HTTP probe on the metrics port, for workers and bridge pods: dict "kind"
(startupProbe, livenessProbe or readinessProbe: /readyz for readiness, /healthz for the
others) and "probe" (its values; timeoutSeconds optional). */}}
{{- define "partq.httpProbe" -}}
{{ .kind }}:
  httpGet:
    path: {{ ternary "/readyz" "/healthz" (eq .kind "readinessProbe") }}
    port: metrics
  periodSeconds: {{ .probe.periodSeconds }}
  {{- if hasKey .probe "timeoutSeconds" }}
  timeoutSeconds: {{ .probe.timeoutSeconds }}
  {{- end }}
  failureThreshold: {{ .probe.failureThreshold }}
{{- end -}}

{{/* Refuses extraArgs that set a flag the chart sets from a value other settings follow:
--metrics-addr (the probes, the scrape port) and, where "drain" names its value,
--drain-timeout (the grace period). Call with (dict "args" $w.extraArgs "key"
"worker.extraArgs" "drain" "worker.drainTimeoutSeconds"). */}}
{{- define "partq.refuseGeneratedFlags" -}}
{{- $flags := dict "--metrics-addr" "metrics.port" -}}
{{- if .drain -}}{{- $_ := set $flags "--drain-timeout" .drain -}}{{- end -}}
{{- range .args -}}
{{- $arg := toString . -}}
{{- range $flag, $value := $flags -}}
{{- if or (eq $arg $flag) (hasPrefix (printf "%s=" $flag) $arg) -}}
{{- fail (printf "%s: %q is set by the chart from %s, which the grace period or probes follow: set that value instead" $.key $arg $value) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The part count of the worker's queue: worker.queueParts, else its entry in queues. */}}
{{- define "partq.queueParts" -}}
{{- $parts := int .Values.worker.queueParts -}}
{{- range .Values.queues -}}
{{- if eq .name $.Values.worker.queue -}}
{{- if and $parts (ne $parts (int .parts)) -}}
{{- fail (printf "worker.queueParts is %d but queues[] declares %q with %d parts: they must agree (or leave worker.queueParts at 0)" $parts .name (int .parts)) -}}
{{- end -}}
{{- $parts = int .parts -}}
{{- end -}}
{{- end -}}
{{- if not $parts -}}
{{- fail (printf "worker.queue %q is not declared in queues[]: declare it there, or set worker.queueParts to its part count (the chart caps replicas at it)" .Values.worker.queue) -}}
{{- end -}}
{{- $parts -}}
{{- end -}}

{{/* maxReplicas of an autoscaler: its own setting, else the part count; call with (dict "ctx" $ "cfg" .Values.autoscaling.hpa "key" "autoscaling.hpa"). */}}
{{- define "partq.maxReplicas" -}}
{{- $parts := int (include "partq.queueParts" .ctx) -}}
{{- $max := int .cfg.maxReplicas -}}
{{- if not $max -}}{{- $max = $parts -}}{{- end -}}
{{- if gt $max $parts -}}
{{- fail (printf "%s.maxReplicas is %d but queue %q has %d parts: a worker beyond the part count owns no part and does nothing, so maxReplicas must be <= %d (0 means: the part count)" .key $max .ctx.Values.worker.queue $parts $parts) -}}
{{- end -}}
{{- if gt (int .cfg.minReplicas) $max -}}
{{- fail (printf "%s.minReplicas (%d) is greater than maxReplicas (%d)" .key (int .cfg.minReplicas) $max) -}}
{{- end -}}
{{- $max -}}
{{- end -}}

{{/* Whether the workers' replica count is managed by an autoscaler. */}}
{{- define "partq.autoscaled" -}}
{{- if or .Values.autoscaling.hpa.enabled .Values.autoscaling.keda.enabled -}}true{{- end -}}
{{- end -}}

{{/* Checks that span several values (the schema checks each value alone). */}}
{{- define "partq.validate" -}}
{{- if and .Values.autoscaling.hpa.enabled .Values.autoscaling.keda.enabled -}}
{{- fail "autoscaling.hpa.enabled and autoscaling.keda.enabled are both true: enable one of them (KEDA manages its own HPA; two autoscalers on one workload fight over the replica count)" -}}
{{- end -}}
{{- $db := .Values.database -}}
{{- if not $db.existingSecret -}}
{{- fail "database.existingSecret is empty: name the Secret that holds the DSN (dsnKey) or the password (passwordKey); the chart never takes a password in values" -}}
{{- end -}}
{{- if and (not $db.dsnKey) (not $db.host) -}}
{{- fail "database: set dsnKey (a key of database.existingSecret holding a libpq DSN) or host (+ port, database, user/userKey, passwordKey)" -}}
{{- end -}}
{{- if .Values.worker.enabled -}}
{{- $parts := int (include "partq.queueParts" .) -}}
{{- if and (not (include "partq.autoscaled" .)) (gt (int .Values.worker.replicas) $parts) -}}
{{- fail (printf "worker.replicas is %d but queue %q has %d parts: a worker beyond the part count owns no part and does nothing" (int .Values.worker.replicas) .Values.worker.queue $parts) -}}
{{- end -}}
{{- end -}}
{{- if .Values.autoscaling.keda.enabled -}}
{{- if not .Values.worker.enabled -}}
{{- fail "autoscaling.keda.enabled needs worker.enabled" -}}
{{- end -}}
{{- if and (not $db.dsnKey) (or (not $db.database) (and (not $db.user) (not $db.userKey)) (not $db.sslmode)) -}}
{{- fail "autoscaling.keda without database.dsnKey: KEDA's postgresql scaler needs database.host, port, database, user (or userKey), sslmode and passwordKey" -}}
{{- end -}}
{{- end -}}
{{- if .Values.autoscaling.hpa.enabled -}}
{{- if not .Values.worker.enabled -}}
{{- fail "autoscaling.hpa.enabled needs worker.enabled" -}}
{{- end -}}
{{- if and (not .Values.autoscaling.hpa.targetCPUUtilizationPercentage) (not .Values.autoscaling.hpa.externalMetric.enabled) -}}
{{- fail "autoscaling.hpa: set targetCPUUtilizationPercentage or enable externalMetric (at least one metric)" -}}
{{- end -}}
{{- end -}}
{{- end -}}

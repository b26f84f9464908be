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

{{/* An image reference: repository@digest, else repository:tag; call with (dict "image"
VALUES "tag" DEFAULT-TAG). */}}
{{- define "partq.imageRef" -}}
{{- if .image.digest -}}
{{- printf "%s@%s" .image.repository .image.digest -}}
{{- else -}}
{{- printf "%s:%s" .image.repository (toString (default .tag .image.tag)) -}}
{{- end -}}
{{- end -}}

{{/* The image: repository@digest, else repository:tag (tag defaults to the appVersion). */}}
{{- define "partq.image" -}}
{{- include "partq.imageRef" (dict "image" .Values.image "tag" .Chart.AppVersion) -}}
{{- end -}}

{{/* The workers' image: worker.image when its repository is set (partq.validateHandler
requires its tag or digest), else the image. */}}
{{- define "partq.workerImage" -}}
{{- if .Values.worker.image.repository -}}
{{- include "partq.imageRef" (dict "image" .Values.worker.image "tag" "") -}}
{{- else -}}
{{- include "partq.image" . -}}
{{- end -}}
{{- end -}}

{{/* The migration job's image: migration.image when its repository is set, else the image. */}}
{{- define "partq.migrationImage" -}}
{{- if .Values.migration.image.repository -}}
{{- include "partq.imageRef" (dict "image" .Values.migration.image "tag" .Chart.AppVersion) -}}
{{- else -}}
{{- include "partq.image" . -}}
{{- end -}}
{{- end -}}

{{/*
The connection, as partq and libpq read it: PARTQ_DSN from the Secret when dsnKey is set,
and the PG* variables (libpq applies them to whatever the DSN leaves out, e.g. sslmode).
No credential is ever a literal value here: user and password come from the Secret.
*/}}
{{- define "partq.databaseEnv" -}}
{{- include "partq.databaseEnvAs" (dict "ctx" . "worker" false) -}}
{{- end -}}

{{/* The worker pods' connection: as database.worker.role when it is set (its own Secret,
DSN or password; the owner's host, port, database and TLS settings), else as the owner. */}}
{{- define "partq.workerDatabaseEnv" -}}
{{- include "partq.databaseEnvAs" (dict "ctx" . "worker" (ne .Values.database.worker.role "")) -}}
{{- end -}}

{{- define "partq.databaseEnvAs" -}}
{{- $db := .ctx.Values.database -}}
{{- $secret := $db.existingSecret -}}
{{- $dsnKey := $db.dsnKey -}}
{{- $userKey := $db.userKey -}}
{{- $user := $db.user -}}
{{- $passwordKey := $db.passwordKey -}}
{{- if .worker -}}
{{- $secret = $db.worker.existingSecret | default $db.existingSecret -}}
{{- $dsnKey = $db.worker.dsnKey -}}
{{- $userKey = "" -}}
{{- $user = $db.worker.role -}}
{{- $passwordKey = $db.worker.passwordKey -}}
{{- end -}}
- name: PARTQ_SCHEMA
  value: {{ $db.schema | quote }}
{{- if $dsnKey }}
- name: PARTQ_DSN
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: {{ $dsnKey }}
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
{{- if $userKey }}
- name: PGUSER
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: {{ $userKey }}
{{- else if $user }}
- name: PGUSER
  value: {{ $user | quote }}
{{- end }}
{{- if $passwordKey }}
- name: PGPASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: {{ $passwordKey }}
{{- end }}
{{- if $db.sslmode }}
- name: PGSSLMODE
  value: {{ $db.sslmode | quote }}
{{- end }}
{{- if $db.targetSessionAttrs }}
- name: PGTARGETSESSIONATTRS
  value: {{ $db.targetSessionAttrs | quote }}
{{- end }}
{{- if $db.sslRootCert.secretName }}
- name: PGSSLROOTCERT
  value: /etc/partq/db-ca/{{ $db.sslRootCert.key }}
{{- end }}
- name: PGCONNECT_TIMEOUT
  value: {{ $db.connectTimeoutSeconds | quote }}
{{- if $db.poolMode }}
- name: PARTQ_POOL_MODE
  value: {{ $db.poolMode | quote }}
{{- end }}
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

{{/* An HTTP probe: dict "kind" (startupProbe, livenessProbe or readinessProbe) and "probe"
(its values; timeoutSeconds optional); on the metrics port of workers and bridge pods (/readyz
for readiness, /healthz for the others) unless "path" and "port" say otherwise. */}}
{{- define "partq.httpProbe" -}}
{{ .kind }}:
  httpGet:
    path: {{ get . "path" | default (ternary "/readyz" "/healthz" (eq .kind "readinessProbe")) }}
    port: {{ get . "port" | default "metrics" }}
  periodSeconds: {{ .probe.periodSeconds }}
  {{- if hasKey .probe "timeoutSeconds" }}
  timeoutSeconds: {{ .probe.timeoutSeconds }}
  {{- end }}
  failureThreshold: {{ .probe.failureThreshold }}
{{- end -}}

{{/* Refuses extraArgs that set a flag the chart sets from a value other settings follow:
--metrics-addr (the probes, the scrape port), where "drain" names its value --drain-timeout
(the grace period), and with "handler" --handler and --handler-ca (one handler per worker,
the sidecar's URL, the CA's mount). Call with (dict "args" $w.extraArgs "key"
"worker.extraArgs" "drain" "worker.drainTimeoutSeconds" "handler" true). */}}
{{- define "partq.refuseGeneratedFlags" -}}
{{- $why := "which the grace period or probes follow" -}}
{{- $flags := dict "--metrics-addr" (list "metrics.port" $why) -}}
{{- if get . "console" -}}
{{- $c := "console.enabled, console.port, console.token and console.readOnly" -}}
{{- range $f := list "--console-listen" "--console-token-file" "--console-read-only" -}}
{{- $_ := set $flags $f (list $c "which the pods' ports and volumes follow") -}}
{{- end -}}
{{- end -}}
{{- if .drain -}}{{- $_ := set $flags "--drain-timeout" (list .drain $why) -}}{{- end -}}
{{- if get . "kafka" -}}
{{- $_ := set $flags "--kafka-config-file" (list "bridge.kafkaConfig" "which it mounts") -}}
{{- end -}}
{{- if get . "handler" -}}
{{- $_ := set $flags "--handler" (list "worker.handler, handler.exec or handler.http" "of which exactly one applies") -}}
{{- $_ := set $flags "--handler-ca" (list "handler.http.caFile" "which it mounts") -}}
{{- end -}}
{{- range .args -}}
{{- $arg := toString . -}}
{{- range $flag, $from := $flags -}}
{{- if or (eq $arg $flag) (hasPrefix (printf "%s=" $flag) $arg) -}}
{{- fail (printf "%s: %q is set by the chart from %s, %s: set that value instead" $.key $arg (index $from 0) (index $from 1)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Whether the workers' handler is an HTTP server (handler.http's url or sidecar). */}}
{{- define "partq.httpHandler" -}}
{{- if or .Values.handler.http.url .Values.handler.http.sidecar.enabled -}}true{{- end -}}
{{- end -}}

{{/* The workers' --handler spec: handler.exec.command, handler.http.url (default: the
sidecar on localhost) or worker.handler, else noop. partq.validateHandler has made sure
that at most one is set. */}}
{{- define "partq.handlerSpec" -}}
{{- $h := .Values.handler -}}
{{- if $h.exec.command -}}
{{- printf "exec:%s" $h.exec.command -}}
{{- else if include "partq.httpHandler" . -}}
{{- printf "http:%s" (default (printf "http://127.0.0.1:%d/" (int $h.http.sidecar.port)) $h.http.url) -}}
{{- else -}}
{{- default "noop" .Values.worker.handler -}}
{{- end -}}
{{- end -}}

{{/* Whether handler.http.caFile names a Secret or a ConfigMap. */}}
{{- define "partq.handlerCA" -}}
{{- with .Values.handler.http.caFile -}}
{{- if or .secretName .configMapName -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{/* Checks of the handler values (the schema checks each value alone). */}}
{{- define "partq.validateHandler" -}}
{{- $w := .Values.worker -}}
{{- $h := .Values.handler -}}
{{- $http := include "partq.httpHandler" . -}}
{{- $set := list -}}
{{- if $w.handler -}}{{- $set = append $set "worker.handler" -}}{{- end -}}
{{- if $h.exec.command -}}{{- $set = append $set "handler.exec.command" -}}{{- end -}}
{{- if $http -}}{{- $set = append $set "handler.http" -}}{{- end -}}
{{- if gt (len $set) 1 -}}
{{- fail (printf "%s are %s set, but a worker runs one handler: set only one of worker.handler (a built-in), handler.exec.command (a program in the worker's image) and handler.http (a server: url and/or sidecar)" (join " and " $set) (ternary "both" "all" (eq (len $set) 2))) -}}
{{- end -}}
{{- if hasPrefix "exec:" $w.handler -}}
{{- fail (printf "worker.handler %q is an exec handler: set handler.exec.command to the command instead (worker.handler is for built-in handlers)" $w.handler) -}}
{{- end -}}
{{- if hasPrefix "http:" $w.handler -}}
{{- fail (printf "worker.handler %q is an HTTP handler: set handler.http.url (or handler.http.sidecar for a server in the pod) instead (worker.handler is for built-in handlers)" $w.handler) -}}
{{- end -}}
{{- if and $w.args (or $h.exec.command $http) -}}
{{- fail "handler.exec and handler.http set the worker's --handler flag, but worker.args replaces the generated args: leave worker.args empty (more flags go in worker.extraArgs), or give your binary its handler in worker.args and leave handler unset" -}}
{{- end -}}
{{- if and $w.image.repository (not (or $w.image.tag $w.image.digest)) -}}
{{- fail (printf "worker.image.repository is %q without a tag or digest: set worker.image.tag (or digest) to the version of your image" $w.image.repository) -}}
{{- end -}}
{{- $sc := $h.http.sidecar -}}
{{- if and $sc.enabled (not (and $sc.image.repository (or $sc.image.tag $sc.image.digest))) -}}
{{- fail "handler.http.sidecar.enabled needs image.repository and image.tag (or image.digest): the image of your HTTP handler" -}}
{{- end -}}
{{- if and $sc.enabled (eq (int $sc.port) (int .Values.metrics.port)) -}}
{{- fail (printf "handler.http.sidecar.port and metrics.port are both %d: the sidecar and the worker share the pod's network, so they need different ports" (int $sc.port)) -}}
{{- end -}}
{{- if and $sc.enabled $sc.native (semverCompare "<1.29.0-0" .Capabilities.KubeVersion.Version) -}}
{{- fail (printf "handler.http.sidecar.native needs Kubernetes 1.29 or later (native sidecar containers, stopped after the worker), and this cluster is %s: set native to false" .Capabilities.KubeVersion.Version) -}}
{{- end -}}
{{- $ca := $h.http.caFile -}}
{{- if and $ca.secretName $ca.configMapName -}}
{{- fail "handler.http.caFile: set secretName or configMapName, not both" -}}
{{- end -}}
{{- if include "partq.handlerCA" . -}}
{{- if not $http -}}
{{- fail "handler.http.caFile is set but handler.http has neither a url nor a sidecar: set handler.http.url to your handler's https:// URL" -}}
{{- end -}}
{{- if not (hasPrefix "https://" (trimPrefix "http:" (include "partq.handlerSpec" .))) -}}
{{- fail (printf "handler.http.caFile verifies the certificate of an https:// url, but the handler is %q: set handler.http.url to an https:// URL, or drop caFile" (include "partq.handlerSpec" .)) -}}
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
{{- /* A worker of several queues owns parts while any of them has parts left for it. */ -}}
{{- $seen := list .Values.worker.queue -}}
{{- range .Values.worker.moreQueues -}}
{{- $name := .name -}}
{{- if has $name $seen -}}
{{- fail (printf "worker.moreQueues: queue %q is named twice (worker.queue counts): a worker has one session per queue" $name) -}}
{{- end -}}
{{- $seen = append $seen $name -}}
{{- $found := 0 -}}
{{- range $.Values.queues -}}
{{- if eq .name $name -}}{{- $found = int .parts -}}{{- end -}}
{{- end -}}
{{- if not $found -}}
{{- fail (printf "worker.moreQueues: queue %q is not declared in queues[]: declare it there (the chart caps replicas at the largest part count of the worker's queues)" $name) -}}
{{- end -}}
{{- if gt $found $parts -}}{{- $parts = $found -}}{{- end -}}
{{- end -}}
{{- $parts -}}
{{- end -}}

{{/* How the render errors name the part count that caps the workers. */}}
{{- define "partq.partsOwner" -}}
{{- if .Values.worker.moreQueues -}}
the largest of the worker's queues
{{- else -}}
queue {{ .Values.worker.queue | quote }}
{{- end -}}
{{- end -}}

{{/* The worker's queues, worker.queue first, comma-separated: jobs,thumbs. Queue names hold
no comma (values.schema.json: [A-Za-z0-9_.-]). */}}
{{- define "partq.workerQueueNames" -}}
{{- $names := list .Values.worker.queue -}}
{{- range .Values.worker.moreQueues -}}
{{- $names = append $names .name -}}
{{- end -}}
{{- join "," $names -}}
{{- end -}}

{{/* The worker's queues as a SQL list, for KEDA's queries: 'jobs', 'thumbs'. Queue names are
safe to inline (see above). */}}
{{- define "partq.queuesSqlList" -}}
'{{ include "partq.workerQueueNames" . | replace "," "', '" }}'
{{- end -}}

{{- define "partq.maxReplicas" -}}
{{- $parts := int (include "partq.queueParts" .ctx) -}}
{{- $max := int .cfg.maxReplicas -}}
{{- if not $max -}}{{- $max = $parts -}}{{- end -}}
{{- if gt $max $parts -}}
{{- fail (printf "%s.maxReplicas is %d but %s has %d parts: a worker beyond the part count owns no part and does nothing, so maxReplicas must be <= %d (0 means: the part count)" .key $max (include "partq.partsOwner" .ctx) $parts $parts) -}}
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
{{- $w := $db.worker -}}
{{- if $w.role -}}
{{- if and $db.dsnKey (not $w.dsnKey) -}}
{{- fail "database.worker.role with database.dsnKey: the owner's DSN names the owner, so give the worker role a DSN of its own (database.worker.dsnKey)" -}}
{{- end -}}
{{- if and (not $w.dsnKey) (not $w.passwordKey) -}}
{{- fail "database.worker.role needs its credentials: database.worker.dsnKey (a DSN) or database.worker.passwordKey (with the owner's host fields)" -}}
{{- end -}}
{{- else if or $w.existingSecret $w.dsnKey $w.passwordKey -}}
{{- fail "database.worker: credentials given without a role: set database.worker.role (the role they log in as, which the migration Job grants the worker's queue)" -}}
{{- end -}}
{{- if .Values.worker.enabled -}}
{{- include "partq.validateHandler" . -}}
{{- include "partq.validateConsole" . -}}
{{- $parts := int (include "partq.queueParts" .) -}}
{{- if and (not (include "partq.autoscaled" .)) (gt (int .Values.worker.replicas) $parts) -}}
{{- fail (printf "worker.replicas is %d but %s has %d parts: a worker beyond the part count owns no part and does nothing" (int .Values.worker.replicas) (include "partq.partsOwner" .) $parts) -}}
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

{{/* The HTTP handler's sidecar container (handler.http.sidecar), for containers (it then
sleeps through the worker's preStop pause and drain before its SIGTERM) or, when native,
for initContainers (restartPolicy Always: Kubernetes stops it after the worker). */}}
{{- define "partq.handlerSidecar" -}}
{{- $sc := .Values.handler.http.sidecar -}}
{{- $w := .Values.worker -}}
- name: handler
  image: {{ include "partq.imageRef" (dict "image" $sc.image "tag" "") | quote }}
  imagePullPolicy: {{ $sc.image.pullPolicy }}
  {{- if $sc.native }}
  restartPolicy: Always
  {{- end }}
  {{- with $sc.command }}
  command:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $sc.args }}
  args:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  env:
    - name: PORT
      value: {{ $sc.port | quote }}
    {{- with $sc.env }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $sc.envFrom }}
  envFrom:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  ports:
    - name: handler
      containerPort: {{ $sc.port }}
      protocol: TCP
  {{- range $kind := list "startupProbe" "readinessProbe" }}
  {{- $probe := index $sc $kind }}
  {{- if $probe.enabled }}
  {{- include "partq.httpProbe" (dict "kind" $kind "probe" $probe "path" $sc.readinessProbe.path "port" "handler") | nindent 2 }}
  {{- end }}
  {{- end }}
  {{- if not $sc.native }}
  {{- $sleep := add $w.preStopSleepSeconds $w.drainTimeoutSeconds }}
  {{- if $sleep }}
  # Its SIGTERM comes after the worker's preStop pause and drain, so it answers every batch
  # the worker drains. Needs `sleep` in the image (else use native: true).
  lifecycle:
    preStop:
      exec:
        command: ["sleep", "{{ $sleep }}"]
  {{- end }}
  {{- end }}
  resources:
    {{- toYaml $sc.resources | nindent 4 }}
  securityContext:
    {{- toYaml (default .Values.securityContext $sc.securityContext) | nindent 4 }}
  volumeMounts:
    - name: handler-tmp
      mountPath: /tmp
    {{- with $sc.extraVolumeMounts }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end -}}

{{/* console.*: ports apart from the others, actions only with a token, generated flags. */}}
{{- define "partq.validateConsole" -}}
{{- $console := .Values.console -}}
{{- $sc := .Values.handler.http.sidecar -}}
{{- if and $console.enabled (eq (int $console.port) (int .Values.metrics.port)) -}}
{{- fail (printf "console.port and metrics.port are both %d: the worker serves both, so they need different ports" (int $console.port)) -}}
{{- end -}}
{{- if and $console.enabled $sc.enabled (eq (int $console.port) (int $sc.port)) -}}
{{- fail (printf "console.port and handler.http.sidecar.port are both %d: the sidecar and the worker share the pod's network, so they need different ports" (int $console.port)) -}}
{{- end -}}
{{- if and $console.enabled (not $console.readOnly) (not $console.token.secretName) -}}
{{- fail "console.readOnly is false but console.token.secretName is empty: actions need a token (a Secret's key); set one, or leave readOnly true" -}}
{{- end -}}
{{- if and $console.enabled .Values.worker.args -}}
{{- fail "console.enabled adds the worker's --console-* flags, but worker.args replaces the generated args: leave worker.args empty, or serve the console with flags of your own in worker.args" -}}
{{- end -}}
{{- end -}}

{{/* Names and labels shared by every object of the release. */}}

{{- define "gpu-portal.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gpu-portal.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "gpu-portal.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpu-portal.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "gpu-portal.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "gpu-portal.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Labels of one component: pass (dict "root" $ "component" "web"). */}}
{{- define "gpu-portal.componentLabels" -}}
{{ include "gpu-portal.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "gpu-portal.componentSelectorLabels" -}}
{{ include "gpu-portal.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "gpu-portal.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "gpu-portal.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image: a digest wins over a tag; the tag defaults to the chart's appVersion. */}}
{{- define "gpu-portal.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "gpu-portal.host" -}}
{{- required "portal.host is required: the public host name people open the portal at" .Values.portal.host }}
{{- end }}

{{- define "gpu-portal.scheme" -}}
{{- if .Values.portal.https }}https{{ else }}http{{ end }}
{{- end }}

{{/*
"true" when a component connects to the database as the owner role (database.owner): the
migrations Job, which also grants the runtime role its privileges, and the audit archive.
Pass (dict "root" $ "component" "web").
*/}}
{{- define "gpu-portal.databaseOwner" -}}
{{- if and .root.Values.database.owner.enabled (has .component (list "migrations" "audit-archive")) }}true{{ end }}
{{- end }}

{{/*
The secrets the portal reads from files: a YAML list of {env, secret, key}. The container gets
`<env>_FILE=/var/run/secrets/gpu-portal/<env>` and the file comes from key `key` of Secret
`secret` (the entry's own secretName, else existingSecret). Pass (dict "root" $ "component" …):
DATABASE_URL is the owner's for the components that connect as it.
*/}}
{{- define "gpu-portal.secretFiles" -}}
{{- $database := ternary .root.Values.database.owner.url .root.Values.database.url (eq (include "gpu-portal.databaseOwner" .) "true") }}
{{- with .root }}
{{- $default := .Values.existingSecret }}
{{- $entries := list }}
{{- $entries = append $entries (dict "env" "SECRET_KEY" "ref" .Values.secretKey) }}
{{- $entries = append $entries (dict "env" "DATABASE_URL" "ref" $database) }}
{{- $entries = append $entries (dict "env" "REDIS_URL" "ref" .Values.redis.url) }}
{{- if .Values.sso.enabled }}
{{- $entries = append $entries (dict "env" "OIDC_CLIENT_SECRET" "ref" .Values.sso.clientSecret) }}
{{- if .Values.sso.keycloakSync.enabled }}
{{- $entries = append $entries (dict "env" "KEYCLOAK_ADMIN_CLIENT_SECRET" "ref" .Values.sso.keycloakSync.clientSecret) }}
{{- end }}
{{- end }}
{{- if .Values.webhook.url }}
{{- $entries = append $entries (dict "env" "PORTAL_WEBHOOK_SECRET" "ref" .Values.webhook.secret) }}
{{- end }}
{{- if .Values.metrics.token.enabled }}
{{- $entries = append $entries (dict "env" "METRICS_TOKEN" "ref" .Values.metrics.token) }}
{{- end }}
{{- range .Values.extraSecretFiles }}
{{- $entries = append $entries (dict "env" .env "ref" .) }}
{{- end }}
files:
{{- range $entries }}
  - env: {{ .env }}
    secret: {{ default $default .ref.secretName | required (printf "no Secret for %s: set existingSecret or its secretName" .env) }}
    key: {{ .ref.key }}
{{- end }}
{{- end }}
{{- end }}

{{/* The environment of every portal container: pass (dict "root" $ "component" "web"). */}}
{{- define "gpu-portal.env" -}}
{{- $owner := include "gpu-portal.databaseOwner" . }}
{{- $component := .component }}
{{- with .root }}
{{- $host := include "gpu-portal.host" . }}
{{- $origin := printf "%s://%s" (include "gpu-portal.scheme" .) $host }}
# The pod's own address is an allowed host too: probes and Prometheus connect to it.
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
- name: HOME
  value: /tmp
- name: ALLOWED_HOSTS
  value: {{ printf "%s,$(POD_IP)" $host | quote }}
- name: CSRF_TRUSTED_ORIGINS
  value: {{ $origin | quote }}
- name: PORTAL_BASE_URL
  value: {{ $origin | quote }}
- name: SECURE_PROXY_SSL_HEADER
  value: {{ .Values.portal.https | quote }}
- name: SECURE_COOKIES
  value: {{ .Values.portal.https | quote }}
- name: PORTAL_CLUSTER_MODE
  value: {{ .Values.portal.clusterMode | quote }}
- name: LOG_LEVEL
  value: {{ .Values.portal.logLevel | quote }}
- name: PORTAL_TRUSTED_PROXY_COUNT
  value: {{ .Values.portal.trustedProxyCount | quote }}
{{- with .Values.portal.prometheusUrl }}
- name: PROMETHEUS_URL
  value: {{ . | quote }}
{{- end }}
{{- with .Values.metrics.allowedNetworks }}
- name: METRICS_ALLOWED_NETWORKS
  value: {{ join "," . | quote }}
{{- end }}
{{- if .Values.sso.enabled }}
- name: OIDC_ISSUER_URL
  value: {{ required "sso.issuerUrl is required when sso.enabled" .Values.sso.issuerUrl | quote }}
- name: OIDC_CLIENT_ID
  value: {{ .Values.sso.clientId | quote }}
- name: PORTAL_MEMBERSHIP_SOURCE
  value: {{ .Values.sso.membershipSource | quote }}
{{- with .Values.sso.breakGlassUsers }}
- name: PORTAL_BREAK_GLASS_USERS
  value: {{ join "," . | quote }}
{{- end }}
{{- if .Values.sso.keycloakSync.enabled }}
- name: KEYCLOAK_ADMIN_CLIENT_ID
  value: {{ .Values.sso.keycloakSync.clientId | quote }}
{{- end }}
{{- end }}
{{- with .Values.webhook.url }}
- name: PORTAL_WEBHOOK_URL
  value: {{ . | quote }}
{{- end }}
{{- if $owner }}
- name: PORTAL_DATABASE_RUNTIME_ROLE
  value: {{ .Values.database.owner.runtimeRole | quote }}
{{- end }}
{{- if eq $component "audit-archive" }}
- name: PORTAL_AUDIT_RETENTION_DAYS
  value: {{ .Values.auditArchive.retentionDays | quote }}
- name: PORTAL_AUDIT_ARCHIVE_DIR
  value: /var/lib/gpu-portal/audit-archive
{{- end }}
{{- range (include "gpu-portal.secretFiles" $ | fromYaml).files }}
- name: {{ printf "%s_FILE" .env }}
  value: {{ printf "/var/run/secrets/gpu-portal/%s" .env | quote }}
{{- end }}
{{- range $name, $value := .Values.portal.env }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/* Volumes of every portal pod: the secret files, a writable /tmp, the audit archive's claim
and extraVolumes. Pass (dict "root" $ "component" "web"). */}}
{{- define "gpu-portal.volumes" -}}
- name: secrets
  projected:
    defaultMode: 0440
    sources:
{{- range (include "gpu-portal.secretFiles" . | fromYaml).files }}
      - secret:
          name: {{ .secret }}
          items:
            - key: {{ .key }}
              path: {{ .env }}
{{- end }}
- name: tmp
  emptyDir:
    sizeLimit: {{ .root.Values.tmpSizeLimit }}
{{- if eq .component "audit-archive" }}
- name: audit-archive
  persistentVolumeClaim:
    claimName: {{ required "auditArchive.existingClaim is required when auditArchive.enabled" .root.Values.auditArchive.existingClaim }}
{{- end }}
{{- with .root.Values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "gpu-portal.volumeMounts" -}}
- name: secrets
  mountPath: /var/run/secrets/gpu-portal
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- if eq .component "audit-archive" }}
- name: audit-archive
  mountPath: /var/lib/gpu-portal/audit-archive
{{- end }}
{{- with .root.Values.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* What every portal pod shares: pass (dict "root" $ "component" "web" "values" .Values.web). */}}
{{- define "gpu-portal.podSpecCommon" -}}
{{- $root := .root }}
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml $root.Values.podSecurityContext | nindent 2 }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $root.Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
volumes:
  {{- include "gpu-portal.volumes" . | nindent 2 }}
{{- end }}

{{/* Spread a component's pods over zones and nodes (ScheduleAnyway by default). */}}
{{- define "gpu-portal.topologySpread" -}}
{{- if .values.topologySpread.enabled }}
topologySpreadConstraints:
{{- range .values.topologySpread.topologyKeys }}
  - maxSkew: {{ $.values.topologySpread.maxSkew }}
    topologyKey: {{ . }}
    whenUnsatisfiable: {{ $.values.topologySpread.whenUnsatisfiable }}
    labelSelector:
      matchLabels:
        {{- include "gpu-portal.componentSelectorLabels" (dict "root" $.root "component" $.component) | nindent 8 }}
{{- end }}
{{- end }}
{{- end }}

{{- define "gpu-portal.container" -}}
image: {{ include "gpu-portal.image" .root }}
imagePullPolicy: {{ .root.Values.image.pullPolicy }}
securityContext:
  {{- toYaml .root.Values.securityContext | nindent 2 }}
env:
  {{- include "gpu-portal.env" . | nindent 2 }}
volumeMounts:
  {{- include "gpu-portal.volumeMounts" . | nindent 2 }}
resources:
  {{- toYaml .values.resources | nindent 2 }}
{{- end }}

{{/* Labels of every object: the component's name, as the kustomize tree has
it, and Helm's own. */}}
{{- define "rebalancer.labels" -}}
app.kubernetes.io/name: {{ . }}
{{- end }}

{{- define "rebalancer.helmLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: rebalancer
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* metadata.labels of an object of component .name. */}}
{{- define "rebalancer.metaLabels" -}}
{{ include "rebalancer.labels" .name }}
{{ include "rebalancer.helmLabels" .root }}
{{- end }}

{{- define "rebalancer.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end }}

{{/* The pod and container hardening every workload has. */}}
{{- define "rebalancer.podSecurityContext" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  seccompProfile:
    type: RuntimeDefault
{{- end }}

{{- define "rebalancer.containerSecurityContext" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: [ALL]
{{- end }}

{{/* A shipped RBAC file (files/rbac, copied from manifests/), in the
release's namespace. */}}
{{- define "rebalancer.rbac" -}}
{{ .root.Files.Get (printf "files/rbac/%s.yaml" .name) | replace "namespace: rebalancer-system" (printf "namespace: %s" .root.Release.Namespace) }}
{{- end }}

{{- define "rebalancer.policyFile" -}}
{{- if .Values.policy -}}custom-policy.yaml{{- else -}}{{ .Values.pair }}-policy.yaml{{- end -}}
{{- end }}

{{- define "rebalancer.schedulerFile" -}}
{{- if .Values.schedulerConfig -}}custom-scheduler.yaml{{- else -}}{{ .Values.pair }}-scheduler.yaml{{- end -}}
{{- end }}

{{/* The rebalancer container, the same in every mode but for its first
arguments. */}}
{{- define "rebalancer.container" -}}
- name: rebalancer
  image: {{ include "rebalancer.image" .root }}
  {{- with .root.Values.image.pullPolicy }}
  imagePullPolicy: {{ . }}
  {{- end }}
  args:
  - run
  {{- range .args }}
  - {{ . }}
  {{- end }}
  - --policy=/etc/rebalancer/{{ include "rebalancer.policyFile" .root }}
  - --scheduler-config=/etc/rebalancer/{{ include "rebalancer.schedulerFile" .root }}
  {{- if .root.Values.extender.enabled }}
  - --scheduler-config=/etc/rebalancer/default-scheduler-extender.yaml
  {{- end }}
  - --max-per-workload={{ .root.Values.rebalancer.maxPerWorkload }}
  {{- if ne .root.Release.Namespace "rebalancer-system" }}
  - --history-configmap={{ .root.Release.Namespace }}/rebalancer-history
  {{- if eq .root.Values.mode "deployment" }}
  - --leader-elect-resource-namespace={{ .root.Release.Namespace }}
  {{- end }}
  {{- end }}
  {{- range .root.Values.rebalancer.extraArgs }}
  - {{ . }}
  {{- end }}
  {{- with .ports }}
  {{- . | nindent 2 }}
  {{- end }}
  resources:
    {{- toYaml .root.Values.rebalancer.resources | nindent 4 }}
  {{- include "rebalancer.containerSecurityContext" . | nindent 2 }}
  volumeMounts:
  - name: policies
    mountPath: /etc/rebalancer
    readOnly: true
{{- end }}

{{- define "rebalancer.podSpec" -}}
serviceAccountName: rebalancer
{{- with .root.Values.rebalancer.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- include "rebalancer.podSecurityContext" . | nindent 0 }}
containers:
{{- include "rebalancer.container" . | nindent 0 }}
volumes:
- name: policies
  configMap:
    name: rebalancer-policies
{{- end }}

{{- define "rebalancer.pdb" -}}
{{- if .values.podDisruptionBudget.enabled }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "rebalancer.metaLabels" (dict "name" .name "root" .root) | nindent 4 }}
spec:
  minAvailable: {{ .values.podDisruptionBudget.minAvailable }}
  selector:
    matchLabels:
      {{- include "rebalancer.labels" .name | nindent 6 }}
{{- end }}
{{- end }}

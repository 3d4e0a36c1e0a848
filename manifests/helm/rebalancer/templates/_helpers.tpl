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

{{/* The image; an empty tag is the chart's appVersion, the release the
chart was made for. */}}
{{- define "rebalancer.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The rules that tie values together, which values.schema.json cannot
express; each message names the values. Rendered once, by rebalancer.yaml.
mode and pair are the schema's too, checked again for renderings that skip
it (--skip-schema-validation). */}}
{{- define "rebalancer.checks" -}}
{{- $v := .Values }}
{{- if not (has $v.mode (list "cronjob" "job" "deployment")) }}
{{- fail (printf "mode %q: want cronjob, job or deployment" $v.mode) }}
{{- end }}
{{- if not (has $v.pair (list "binpacking" "balancing" "load-aware")) }}
{{- fail (printf "pair %q: want binpacking, balancing or load-aware (policy and schedulerConfig replace its files)" $v.pair) }}
{{- end }}
{{- if not (or $v.image.tag .Chart.AppVersion) }}
{{- fail "image.tag: empty, and the chart has no appVersion to fall back on" }}
{{- end }}
{{- if regexMatch "^((0+(\\.0*)?|\\.0+)(ns|us|µs|μs|ms|s|m|h))+$" (toString $v.rebalancer.interval) }}
{{- fail (printf "rebalancer.interval %q: must be above zero" (toString $v.rebalancer.interval)) }}
{{- end }}
{{- with $v.rebalancer.prometheusTokenSecret }}
{{- if and (or .namespace .name) (not (and .namespace .name)) }}
{{- fail "rebalancer.prometheusTokenSecret: give both namespace and name" }}
{{- end }}
{{- end }}
{{- /* Flags the chart sets from a value or the mode: a second one in
extraArgs would silently win or contradict it. */}}
{{- $owned := dict "--policy" "policy" "--max-per-workload" "rebalancer.maxPerWorkload" "--interval" "rebalancer.interval (mode deployment)" "--schedule" "rebalancer.schedule (mode cronjob)" "--once" "mode" "--leader-elect" "mode (deployment elects a leader)" "--bind-address" "the chart (port 10258, its probes and metrics Service)" "--dry-run" "dryRun" }}
{{- range $v.rebalancer.extraArgs }}
{{- $flag := regexReplaceAll "=.*$" (toString .) "" }}
{{- if hasKey $owned $flag }}
{{- fail (printf "rebalancer.extraArgs: %s is set by %s; give it there" $flag (get $owned $flag)) }}
{{- end }}
{{- end }}
{{- if $v.policy }}
{{- $p := fromYaml $v.policy }}
{{- if hasKey $p "Error" }}
{{- fail (printf "policy: not YAML: %s" (get $p "Error")) }}
{{- end }}
{{- if ne (toString (get $p "kind")) "DeschedulerPolicy" }}
{{- fail (printf "policy: kind %q: want a DeschedulerPolicy" (toString (get $p "kind"))) }}
{{- end }}
{{- end }}
{{- if $v.schedulerConfig }}
{{- $c := fromYaml $v.schedulerConfig }}
{{- if hasKey $c "Error" }}
{{- fail (printf "schedulerConfig: not YAML: %s" (get $c "Error")) }}
{{- end }}
{{- if ne (toString (get $c "kind")) "KubeSchedulerConfiguration" }}
{{- fail (printf "schedulerConfig: kind %q: want a KubeSchedulerConfiguration" (toString (get $c "kind"))) }}
{{- end }}
{{- $names := list }}
{{- range (get $c "profiles" | default list) }}
{{- $names = append $names (toString (get . "schedulerName")) }}
{{- end }}
{{- if not (has "rebalancer-scheduler" $names) }}
{{- fail "schedulerConfig: no profile with schedulerName rebalancer-scheduler, the scheduler the hints and the webhook name" }}
{{- end }}
{{- with (get $c "clientConnection") }}
{{- if get . "kubeconfig" }}
{{- fail "schedulerConfig: clientConnection.kubeconfig is set; rebalancer-scheduler runs in the cluster with its ServiceAccount" }}
{{- end }}
{{- end }}
{{- end }}
{{- if eq $v.mode "deployment" }}
{{- include "rebalancer.checkPDB" (dict "path" "rebalancer" "values" $v.rebalancer) }}
{{- end }}
{{- if $v.scheduler.enabled }}
{{- include "rebalancer.checkPDB" (dict "path" "scheduler" "values" $v.scheduler) }}
{{- end }}
{{- if $v.extender.enabled }}
{{- include "rebalancer.checkPDB" (dict "path" "extender" "values" $v.extender) }}
{{- with $v.extender.tls }}
{{- if and .certManager (not .enabled) }}
{{- fail "extender.tls.certManager: cert-manager's certificate is for an extender serving TLS; set extender.tls.enabled=true too" }}
{{- end }}
{{- if and (or .dnsNames .ipAddresses) (not .certManager) }}
{{- fail (printf "extender.tls.%s: only cert-manager's certificate takes them (extender.tls.certManager=true); hack/webhook-cert.sh takes --dns and --ip" (ternary "dnsNames" "ipAddresses" (not (empty .dnsNames)))) }}
{{- end }}
{{- end }}
{{- end }}
{{- if $v.webhook.enabled }}
{{- include "rebalancer.checkPDB" (dict "path" "webhook" "values" $v.webhook) }}
{{- end }}
{{- end }}

{{/* A PodDisruptionBudget that keeps every replica up blocks every
eviction, and with it every drain of the nodes they run on: minAvailable
(a count, or a percentage rounded up as the API server rounds it) must be
below the replicas. */}}
{{- define "rebalancer.checkPDB" -}}
{{- $pdb := .values.podDisruptionBudget }}
{{- if $pdb.enabled }}
{{- $replicas := int .values.replicas }}
{{- $min := $pdb.minAvailable }}
{{- $kept := 0 }}
{{- if kindIs "string" $min }}
{{- $kept = div (add (mul (int (trimSuffix "%" $min)) $replicas) 99) 100 }}
{{- else }}
{{- $kept = int $min }}
{{- end }}
{{- if ge (int $kept) $replicas }}
{{- fail (printf "%s.podDisruptionBudget.minAvailable %v with %s.replicas %d: no pod could ever be evicted, which blocks every drain of their nodes; set it below %d, or %s.podDisruptionBudget.enabled=false" .path $min .path $replicas $replicas .path) }}
{{- end }}
{{- end }}
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
  {{- if .root.Values.dryRun }}
  - --dry-run
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
  {{- if and .root.Values.extender.enabled .root.Values.extender.tls.enabled }}
  - name: extender-ca
    mountPath: {{ include "rebalancer.extenderCADir" . }}
    readOnly: true
  {{- end }}
{{- end }}

{{/* Where the rebalancer finds the CA of the extender's serving
certificate (ca.crt of Secret rebalancer-extender-tls). */}}
{{- define "rebalancer.extenderCADir" -}}/etc/rebalancer-extender{{- end }}

{{/* policies/default-scheduler-extender.yaml as the rebalancer reads it
when the extender serves TLS: HTTPS, verified against the extender's CA.
The extender is the file's last entry; the result is checked, so a
reordered file fails here rather than yield a snippet without TLS. */}}
{{- define "rebalancer.extenderOverTLS" -}}
{{- $file := replace "urlPrefix: http://rebalancer-extender." "urlPrefix: https://rebalancer-extender." . }}
{{- $file = printf "%s\n  enableHTTPS: true\n  tlsConfig:\n    caFile: %s/ca.crt\n" (trimSuffix "\n" $file) (include "rebalancer.extenderCADir" .) }}
{{- $extenders := get (fromYaml $file) "extenders" | default list }}
{{- $ok := false }}
{{- if eq (len $extenders) 1 }}
{{- $e := first $extenders }}
{{- $ok = and (hasPrefix "https://" (toString (get $e "urlPrefix"))) (get $e "httpTimeout") (get $e "tlsConfig") }}
{{- end }}
{{- if not $ok }}
{{- fail "files/policies/default-scheduler-extender.yaml: no longer one extender ending the file, as rebalancer.extenderOverTLS in templates/_helpers.tpl expects" }}
{{- end }}
{{- $file }}
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
{{- if and .root.Values.extender.enabled .root.Values.extender.tls.enabled }}
# Optional: without the Secret yet, the rebalancer runs and reports the
# extender unreachable rather than not start.
- name: extender-ca
  secret:
    secretName: rebalancer-extender-tls
    items:
    - key: ca.crt
      path: ca.crt
    optional: true
{{- end }}
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

{{/*
Koordinator v1.8's chart keys (koordinator-sh/charts versions/v1.8.0/values.yaml) that a values
file gives and that change nothing here, or that are refused. values.schema.json declares every
one of Koordinator's keys (scripts/chart_schema.py), so Helm never stops at "additional
properties not allowed" for them; each key either does here what it does in Koordinator's chart
(the templates read it: see docs/configuration.md) or is named by this template:

- "ignored": NOTES.txt prints each line after `helm install` and `helm upgrade`, under "Values
  of Koordinator's chart that have no effect here". For a key whose value cannot be honoured
  but does no harm when left out.
- "refused": templates/koordinator-keys.yaml fails the install with one message listing them.
  Only for a value that cannot be honoured and whose absence would do harm.

The shape, for whoever adds a key: a YAML map {ignored: [LINE, ...], refused: [LINE, ...]},
each LINE "KEY: why it has no effect here (and what to use instead, if anything)". Add a
line in the section of its component, only when the values give that key (hasKey, or dig with
a default that means "not given"), e.g.

  {{- if hasKey $scheduler "enableJobPreemption" }}
  {{- $ignored = append $ignored "scheduler.enableJobPreemption: no job preemption here" }}
  {{- end }}

Strings only (no `fail` here): one render collects every line.
*/}}
{{- define "koordinator-py.koordinatorKeys" -}}
{{- $v := .Values -}}
{{- $ignored := list -}}
{{- $refused := list -}}

{{- /* -- installation, crds, webhookConfiguration, serviceAccount, deviceDaemon -- */ -}}
{{- $installation := $v.installation | default dict -}}
{{- with $installation.namespace }}
{{- if ne (toString .) $.Release.Namespace }}
{{- $ignored = append $ignored (printf "installation.namespace: everything is installed in the release namespace %s, not in %s (helm install -n %s --create-namespace puts it there)" $.Release.Namespace (toString .) (toString .)) }}
{{- end }}
{{- end }}
{{- if hasKey $installation "roleListGroups" }}
{{- $ignored = append $ignored "installation.roleListGroups: read by no template of Koordinator v1.8's chart either (its 0.x charts granted list on those API groups); the ClusterRoles here grant what each component uses" }}
{{- end }}
{{- /* Koordinator's CRDs this chart does not ship; crds.managed and the chart's own eight are honoured. */ -}}
{{- $crds := list -}}
{{- range $key := list "clusternetworktopologies" "elasticquotaprofiles" "noderesourcetopologies" "recommendations" "scheduleexplanations" }}
{{- if and $v.crds.managed (eq (toString (get $v.crds $key)) "true") }}
{{- $crds = append $crds (printf "crds.%s" $key) }}
{{- end }}
{{- end }}
{{- with $crds }}
{{- $ignored = append $ignored (printf "%s: this chart has no such CRD, no component here reads those kinds (install them from Koordinator's chart where something else needs them)" (join ", " .)) }}
{{- end }}
{{- $webhookConfiguration := $v.webhookConfiguration | default dict -}}
{{- $policies := $webhookConfiguration.failurePolicy | default dict -}}
{{- $absent := list -}}
{{- range $key := list "nodeStatus" "nodes" "reservations" }}
{{- if hasKey $policies $key }}
{{- $absent = append $absent (printf "webhookConfiguration.failurePolicy.%s" $key) }}
{{- end }}
{{- end }}
{{- with $absent }}
{{- $ignored = append $ignored (printf "%s: koord-manager here serves no Node, Node status or Reservation webhook" (join ", " .)) }}
{{- end }}
{{- if and $webhookConfiguration (not (and $v.manager.enabled $v.manager.webhook.enabled)) }}
{{- $ignored = append $ignored "webhookConfiguration: no webhook is served (manager.enabled or manager.webhook.enabled is false)" }}
{{- end }}
{{- $serviceAccount := $v.serviceAccount | default dict -}}
{{- if and $serviceAccount.annotations (not (and $v.manager.enabled $v.manager.serviceAccount.create)) }}
{{- $ignored = append $ignored "serviceAccount.annotations: the chart creates no koord-manager ServiceAccount (manager.enabled or manager.serviceAccount.create is false)" }}
{{- end }}
{{- if hasKey $v "deviceDaemon" }}
{{- $ignored = append $ignored "deviceDaemon: this chart has no koord-device-daemon; koordlet reads the node's GPUs through NVML itself (gate Accelerators)" }}
{{- end }}

{{- /* -- koordlet -- */ -}}
{{- $koordlet := $v.koordlet | default dict -}}
{{- if contains "TerwayQoS=true" (toString (dig "features" "" $koordlet)) }}
{{- $ignored = append $ignored "koordlet.features TerwayQoS=true: no Terway QoS here, so no /var/lib/terway/qos mount" }}
{{- end }}

{{- /* -- manager -- */ -}}

{{- /* -- scheduler: Koordinator's keys are honoured (templates/scheduler: port, log.level,
featureGates, deviceShare, hostNetwork, nodeAffinity, monitorEnabled, ...) but one;
compatible122FeatureGates and compatibleBelow122FeatureGates are read by Koordinator's chart on
Kubernetes 1.22 and older only, where this chart does not install: unread in both. -- */ -}}
{{- $scheduler := $v.scheduler | default dict -}}
{{- if eq (toString (dig "enableJobPreemption" "" $scheduler)) "true" }}
{{- $ignored = append $ignored "scheduler.enableJobPreemption: no Coscheduling here, so no job (gang) preemption; kube-scheduler preempts pod by pod (DefaultPreemption), as Koordinator's does with enableJobPreemption false" }}
{{- end }}

{{- /* -- descheduler: every Koordinator key is honoured (templates/descheduler: hostNetwork,
nodeAffinity, monitorEnabled's PodMonitor, log.level, port, featureGates, ...) -- */ -}}

{{- toYaml (dict "ignored" $ignored "refused" $refused) -}}
{{- end -}}

{{/* NOTES.txt's paragraph naming the given keys that have no effect (empty: none). */}}
{{- define "koordinator-py.koordinatorKeys.notes" -}}
{{- $ignored := (include "koordinator-py.koordinatorKeys" . | fromYaml).ignored -}}
{{- if $ignored }}

Values of Koordinator's chart that have no effect here:
{{- range $ignored }}
- {{ . }}
{{- end }}
{{- end }}
{{- end -}}

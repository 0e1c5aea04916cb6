{{/*
Names and labels shared by every component. A component's objects are named
"<fullname>-<component>" and carry app.kubernetes.io/component: <component>.
*/}}

{{/* The chart's name, or nameOverride. */}}
{{- define "koordinator-py.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The release's base name: fullnameOverride, else the release name when it already contains the
chart's name, else "<release>-<name>". Kept to 52 characters so that "-koordlet" and the like
still fit the 63 of a label value.
*/}}
{{- define "koordinator-py.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "koordinator-py.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* "<chart>-<version>", for the helm.sh/chart label. */}}
{{- define "koordinator-py.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The labels every object carries. */}}
{{- define "koordinator-py.labels" -}}
helm.sh/chart: {{ include "koordinator-py.chart" . }}
app.kubernetes.io/name: {{ include "koordinator-py.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: koordinator-py
{{- end -}}

{{/* koordlet: its objects' name. */}}
{{- define "koordinator-py.koordlet.fullname" -}}
{{- printf "%s-koordlet" (include "koordinator-py.fullname" .) -}}
{{- end -}}

{{/* koordlet: the labels its pods are selected by (never change them on upgrade). */}}
{{- define "koordinator-py.koordlet.selectorLabels" -}}
app.kubernetes.io/name: {{ include "koordinator-py.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: koordlet
{{- end -}}

{{/* koordlet: every label of its objects. */}}
{{- define "koordinator-py.koordlet.labels" -}}
{{ include "koordinator-py.labels" . }}
app.kubernetes.io/component: koordlet
{{- end -}}

{{/* koordlet: the service account it runs as. */}}
{{- define "koordinator-py.koordlet.serviceAccountName" -}}
{{- if .Values.koordlet.serviceAccount.create -}}
{{- default (include "koordinator-py.koordlet.fullname" .) .Values.koordlet.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.koordlet.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* koordlet: "repository:tag", the tag defaulting to the chart's appVersion. */}}
{{- define "koordinator-py.koordlet.image" -}}
{{- $image := .Values.koordlet.image -}}
{{- printf "%s:%s" $image.repository (default .Chart.AppVersion ($image.tag | toString)) -}}
{{- end -}}

{{/*
A flag value as koordlet's command line wants it. Values arrive as float64 from YAML and
JSON, and Go would print 104857600 as 1.048576e+08: whole numbers are printed as integers.
*/}}
{{- define "koordinator-py.flagValue" -}}
{{- if and (kindIs "float64" .) (eq (floor .) .) -}}
{{- int64 . -}}
{{- else -}}
{{- . -}}
{{- end -}}
{{- end -}}

{{/* koordlet: --feature-gates=A=true,B=false from the featureGates map, in name order. */}}
{{- define "koordinator-py.koordlet.featureGates" -}}
{{- $gates := list -}}
{{- range $name, $on := .Values.koordlet.featureGates -}}
{{- $gates = append $gates (printf "%s=%t" $name (eq (toString $on) "true")) -}}
{{- end -}}
{{- join "," $gates -}}
{{- end -}}

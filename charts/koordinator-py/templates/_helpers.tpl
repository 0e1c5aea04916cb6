{{/*
Names and labels shared by every component. Objects carry app.kubernetes.io/component:
<component>; their names are Koordinator's (koordinator-py.objectName).
*/}}

{{/* The chart's name, or nameOverride: the app.kubernetes.io/name label. */}}
{{- define "koordinator-py.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
An object's name: (list root NAME). Koordinator's chart names its objects without the release
(koordlet, koord-manager, koordinator-webhook-service, ...), and so does this one, so that what
was written for Koordinator (kubectl commands, alerts, scripts) finds them. fullnameOverride, when
set, goes in front of every name the chart derives ("<fullnameOverride>-koordlet"): a second
release in one cluster needs that, since ClusterRoles, their bindings and the webhook
configurations are cluster-wide. It is cut to 30 characters so that the longest Service name
(<fullnameOverride>-koordinator-webhook-service) stays within a DNS label's 63.
*/}}
{{- define "koordinator-py.objectName" -}}
{{- $prefix := (index . 0).Values.fullnameOverride | default "" | trunc 30 | trimSuffix "-" -}}
{{- if $prefix -}}
{{- printf "%s-%s" $prefix (index . 1) -}}
{{- else -}}
{{- index . 1 -}}
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

{{/* koordlet: the DaemonSet's and the ServiceAccount's name (Koordinator's). */}}
{{- define "koordinator-py.koordlet.fullname" -}}
{{- include "koordinator-py.objectName" (list . "koordlet") -}}
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

{{/* The image the Containerfile builds, which every component runs unless told otherwise. */}}
{{- define "koordinator-py.defaultRepository" -}}
koordinator-py/koordlet
{{- end -}}

{{/*
A component's image, (list root IMAGE): its repository, else koordlet's, else the chart's own
image (koordinator-py.defaultRepository); its tag, else koordlet's, else the chart's appVersion.
Koordinator's imageRepositoryHost goes in front of a repository the user gave (its chart
renders HOST/REPOSITORY:TAG), never in front of the chart's own image name: Koordinator's
default host (registry.cn-beijing.aliyuncs.com) has no koordinator-py images.
*/}}
{{- define "koordinator-py.image" -}}
{{- $root := index . 0 -}}
{{- $image := index . 1 | default dict -}}
{{- $koordlet := $root.Values.koordlet.image -}}
{{- $repository := default ($koordlet.repository | default "") ($image.repository | default "") -}}
{{- $tag := default (default $root.Chart.AppVersion ($koordlet.tag | toString)) ($image.tag | toString) -}}
{{- $host := $root.Values.imageRepositoryHost | default "" | trimSuffix "/" -}}
{{- if not $repository -}}
{{- printf "%s:%s" (include "koordinator-py.defaultRepository" $root) $tag -}}
{{- else if $host -}}
{{- printf "%s/%s:%s" $host $repository $tag -}}
{{- else -}}
{{- printf "%s:%s" $repository $tag -}}
{{- end -}}
{{- end -}}

{{/* koordlet: its image (koordinator-py.image). */}}
{{- define "koordinator-py.koordlet.image" -}}
{{- include "koordinator-py.image" (list . .Values.koordlet.image) -}}
{{- end -}}

{{/*
A daemon's --log-level: ours (debug, info, ...), unless Koordinator's log.level (klog's
verbosity) is given: 4 and above is debug, below info, as the daemons read -v.
(dict "ours" LEVEL "koordinator" LOG)
*/}}
{{- define "koordinator-py.logLevel" -}}
{{- $v := dig "level" "" (.koordinator | default dict) | toString -}}
{{- if $v -}}{{ ternary "debug" "info" (ge (atoi $v) 4) }}{{- else -}}{{ .ours }}{{- end -}}
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
{{- if .Values.koordlet.features -}}
{{- /* Koordinator's koordlet.features: the --feature-gates value as written */ -}}
{{- .Values.koordlet.features -}}
{{- else -}}
{{- $gates := list -}}
{{- range $name, $on := .Values.koordlet.featureGates -}}
{{- $gates = append $gates (printf "%s=%t" $name (eq (toString $on) "true")) -}}
{{- end -}}
{{- join "," $gates -}}
{{- end -}}
{{- end -}}

{{/* manager: the Deployment's and the ServiceAccount's name (Koordinator's). */}}
{{- define "koordinator-py.manager.fullname" -}}
{{- include "koordinator-py.objectName" (list . "koord-manager") -}}
{{- end -}}

{{/* manager: the labels its pods are selected by (never change them on upgrade). */}}
{{- define "koordinator-py.manager.selectorLabels" -}}
app.kubernetes.io/name: {{ include "koordinator-py.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: manager
{{- end -}}

{{/* manager: every label of its objects. */}}
{{- define "koordinator-py.manager.labels" -}}
{{ include "koordinator-py.labels" . }}
app.kubernetes.io/component: manager
{{- end -}}

{{/* manager: the service account it runs as. */}}
{{- define "koordinator-py.manager.serviceAccountName" -}}
{{- if .Values.manager.serviceAccount.create -}}
{{- default (include "koordinator-py.manager.fullname" .) .Values.manager.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.manager.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* manager: its image, each part defaulting to koordlet's (the same image). */}}
{{- define "koordinator-py.manager.image" -}}
{{- include "koordinator-py.image" (list . .Values.manager.image) -}}
{{- end -}}

{{/* manager: the webhook Service, whose DNS names the serving certificate carries. */}}
{{- define "koordinator-py.manager.webhookServiceName" -}}
{{- include "koordinator-py.objectName" (list . "koordinator-webhook-service") -}}
{{- end -}}

{{/* manager: the Secret with tls.crt and tls.key. */}}
{{- define "koordinator-py.manager.certSecretName" -}}
{{- default (include "koordinator-py.objectName" (list . "koordinator-webhook-certs")) .Values.manager.webhook.certificates.existingSecret -}}
{{- end -}}

{{/* manager: where the container finds tls.crt and tls.key (--webhook-cert-dir). */}}
{{- define "koordinator-py.manager.certDir" -}}
/etc/koord-manager/webhook-certs
{{- end -}}

{{/*
A generated CA and a serving certificate signed by it, as YAML {ca, crt, key} (PEM), from a dict
{root, cacheKey, service, certificates}: the certificate is for the Service's DNS names <svc>,
<svc>.<ns>, <svc>.<ns>.svc and <svc>.<ns>.svc.<certificates.clusterDomain>, valid
certificates.validityDays. Generated once per render and kept on the root context under
cacheKey, so that objects rendered from different files (the Secret, and whatever carries the
CA) get the same pair.
*/}}
{{- define "koordinator-py.generatedTLS" -}}
{{- $root := .root -}}
{{- if not (hasKey $root .cacheKey) -}}
{{- $svc := .service -}}
{{- $ns := $root.Release.Namespace -}}
{{- $days := int .certificates.validityDays -}}
{{- $dnsNames := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns .certificates.clusterDomain) -}}
{{- $ca := genCA (printf "%s-ca" $svc) $days -}}
{{- $cert := genSignedCert (printf "%s.%s.svc" $svc $ns) nil $dnsNames $days $ca -}}
{{- $_ := set $root .cacheKey (dict "ca" $ca.Cert "caKey" $ca.Key "crt" $cert.Cert "key" $cert.Key) -}}
{{- end -}}
{{- toYaml (get $root .cacheKey) -}}
{{- end -}}

{{/*
A CA given in values (PEM, or base64 of the PEM) as base64 of the PEM: PEM is encoded here,
base64 taken as is.
*/}}
{{- define "koordinator-py.caBundleValue" -}}
{{- $bundle := . | default "" | trim -}}
{{- if contains "-----BEGIN" $bundle -}}
{{- printf "%s\n" $bundle | b64enc -}}
{{- else -}}
{{- $bundle | nospace -}}
{{- end -}}
{{- end -}}

{{/*
A Secret of the release as the cluster has it (Helm's lookup; nothing under helm template), as
YAML {ca, caKey, crt, key} (PEM), from a list (root, name): empty unless it holds a CA with its
key (ca-cert.pem, ca-key.pem, as koord-manager writes them) and a pair (tls.crt, tls.key).
*/}}
{{- define "koordinator-py.keptTLS" -}}
{{- $root := index . 0 -}}
{{- $secret := lookup "v1" "Secret" $root.Release.Namespace (index . 1) | default dict -}}
{{- $data := get $secret "data" | default dict -}}
{{- if and (get $data "ca-cert.pem") (get $data "ca-key.pem") (get $data "tls.crt") (get $data "tls.key") -}}
{{- toYaml (dict "ca" (get $data "ca-cert.pem" | b64dec) "caKey" (get $data "ca-key.pem" | b64dec) "crt" (get $data "tls.crt" | b64dec) "key" (get $data "tls.key" | b64dec)) -}}
{{- end -}}
{{- end -}}

{{/*
manager: the generated CA and serving certificate of the webhook Service. With autoRenew, the
Secret as the cluster has it (which koord-manager may have renewed) is kept on upgrades while it
holds a CA with its key and a pair.
*/}}
{{- define "koordinator-py.manager.generatedTLS" -}}
{{- if and .Values.manager.webhook.certificates.autoRenew (not (hasKey . "koordinatorPyManagerTLS")) -}}
{{- $kept := include "koordinator-py.keptTLS" (list . (include "koordinator-py.manager.certSecretName" .)) | fromYaml -}}
{{- if $kept -}}
{{- $_ := set . "koordinatorPyManagerTLS" $kept -}}
{{- end -}}
{{- end -}}
{{- include "koordinator-py.generatedTLS" (dict "root" . "cacheKey" "koordinatorPyManagerTLS" "service" (include "koordinator-py.manager.webhookServiceName" .) "certificates" .Values.manager.webhook.certificates) -}}
{{- end -}}

{{/*
manager: the webhook configurations' caBundle (base64 of the PEM CA): the generated CA, or
certificates.caBundle with an existing Secret (PEM is encoded here, base64 taken as is).
Empty only when cert-manager's CA injector is to fill it.
*/}}
{{- define "koordinator-py.manager.caBundle" -}}
{{- $certs := .Values.manager.webhook.certificates -}}
{{- if $certs.existingSecret -}}
{{- $bundle := $certs.caBundle | default "" | trim -}}
{{- if and (not $bundle) (not (hasKey (.Values.manager.webhook.annotations | default dict) "cert-manager.io/inject-ca-from")) -}}
{{- fail "manager.webhook.certificates.existingSecret needs manager.webhook.certificates.caBundle (the CA that signed it), or a cert-manager.io/inject-ca-from annotation in manager.webhook.annotations" -}}
{{- end -}}
{{- include "koordinator-py.caBundleValue" $bundle -}}
{{- else -}}
{{- (include "koordinator-py.manager.generatedTLS" . | fromYaml).ca | b64enc -}}
{{- end -}}
{{- end -}}

{{/*
manager: the fields every webhook entry shares, from a dict {path, service, namespace, timeout,
caBundle}; the caBundle is left out when empty (cert-manager's CA injector fills it).
*/}}
{{- define "koordinator-py.manager.webhookCommon" -}}
admissionReviewVersions: ["v1"]
sideEffects: None
matchPolicy: Equivalent
timeoutSeconds: {{ .timeout }}
clientConfig:
  service:
    name: {{ .service }}
    namespace: {{ .namespace }}
    path: {{ .path }}
    port: 443
  {{- with .caBundle }}
  caBundle: {{ . }}
  {{- end }}
{{- end -}}

{{/*
The label that puts a ConfigMap under the manager's validating webhook (slo-controller-config).
*/}}
{{- define "koordinator-py.sloConfigSelector" -}}
koordinator-py.io/validated-by: koord-manager
{{- end -}}

{{/* scheduler: the Deployment's and the ServiceAccount's name (Koordinator's). */}}
{{- define "koordinator-py.scheduler.fullname" -}}
{{- include "koordinator-py.objectName" (list . "koord-scheduler") -}}
{{- end -}}

{{/*
scheduler: its HTTPS Service, which kube-scheduler calls and whose DNS names the serving
certificate carries (Koordinator's scheduler has none: named as its webhook Service is).
*/}}
{{- define "koordinator-py.scheduler.serviceName" -}}
{{- include "koordinator-py.objectName" (list . "koord-scheduler-service") -}}
{{- end -}}

{{/* scheduler: the labels its pods are selected by (never change them on upgrade). */}}
{{- define "koordinator-py.scheduler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "koordinator-py.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: scheduler
{{- end -}}

{{/* scheduler: every label of its objects. */}}
{{- define "koordinator-py.scheduler.labels" -}}
{{ include "koordinator-py.labels" . }}
app.kubernetes.io/component: scheduler
{{- end -}}

{{/* scheduler: the service account it runs as. */}}
{{- define "koordinator-py.scheduler.serviceAccountName" -}}
{{- if .Values.scheduler.serviceAccount.create -}}
{{- default (include "koordinator-py.scheduler.fullname" .) .Values.scheduler.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.scheduler.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* scheduler: its image, each part defaulting to koordlet's (the same image). */}}
{{- define "koordinator-py.scheduler.image" -}}
{{- include "koordinator-py.image" (list . .Values.scheduler.image) -}}
{{- end -}}

{{/* scheduler: the Secret with tls.crt and tls.key. */}}
{{- define "koordinator-py.scheduler.certSecretName" -}}
{{- default (include "koordinator-py.objectName" (list . "koord-scheduler-certs")) .Values.scheduler.certificates.existingSecret -}}
{{- end -}}

{{/* scheduler: where the container finds tls.crt and tls.key (--cert-dir). */}}
{{- define "koordinator-py.scheduler.certDir" -}}
/etc/koord-scheduler/certs
{{- end -}}

{{/* scheduler: the ConfigMap with its LoadAware arguments. */}}
{{- define "koordinator-py.scheduler.loadAwareConfigName" -}}
{{- include "koordinator-py.objectName" (list . "koord-scheduler-loadaware-config") -}}
{{- end -}}

{{/* scheduler: the LoadAware arguments' file in that ConfigMap and in the container. */}}
{{- define "koordinator-py.scheduler.loadAwareConfigKey" -}}
loadaware.yaml
{{- end -}}
{{- define "koordinator-py.scheduler.loadAwareConfigDir" -}}
/etc/koord-scheduler/loadaware
{{- end -}}

{{/* scheduler: the URL path its verbs sit under: one leading slash, no trailing one. */}}
{{- define "koordinator-py.scheduler.urlPrefix" -}}
{{- printf "/%s" (.Values.scheduler.urlPrefix | default "" | trimAll "/") -}}
{{- end -}}

{{/* scheduler: the name kube-scheduler calls and checks the certificate for. */}}
{{- define "koordinator-py.scheduler.serverName" -}}
{{- printf "%s.%s.svc" (include "koordinator-py.scheduler.serviceName" .) .Release.Namespace -}}
{{- end -}}

{{/*
scheduler: the DNS names of its serving certificate, comma-separated (what the generated Secret's
koordinator-py.io/dns-names annotation records).
*/}}
{{- define "koordinator-py.scheduler.dnsNames" -}}
{{- $svc := include "koordinator-py.scheduler.serviceName" . -}}
{{- $ns := .Release.Namespace -}}
{{- join "," (list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns .Values.scheduler.certificates.clusterDomain)) -}}
{{- end -}}

{{/*
scheduler: the CA and serving certificate of its Service. Unlike the manager's, kept across
upgrades: kube-scheduler has the CA in its own configuration, outside the release, and a new
one on every upgrade would fail every extender call until that is merged again. So the Secret
the cluster already has (lookup; nothing in `helm template` or lint) is reused while its
koordinator-py.io/dns-names annotation matches; otherwise, or once it is deleted, a new pair is
generated.
*/}}
{{- define "koordinator-py.scheduler.generatedTLS" -}}
{{- if not (hasKey . "koordinatorPySchedulerTLS") -}}
{{- $kept := lookup "v1" "Secret" .Release.Namespace (include "koordinator-py.scheduler.certSecretName" .) | default dict -}}
{{- $data := get $kept "data" | default dict -}}
{{- $names := dig "metadata" "annotations" "koordinator-py.io/dns-names" "" $kept -}}
{{- $withKey := or (not .Values.scheduler.certificates.autoRenew) (get $data "ca-key.pem") -}}
{{- if and (eq $names (include "koordinator-py.scheduler.dnsNames" .)) (get $data "ca.crt") (get $data "tls.crt") (get $data "tls.key") $withKey -}}
{{- $_ := set . "koordinatorPySchedulerTLS" (dict "ca" (get $data "ca.crt" | b64dec) "caKey" (get $data "ca-key.pem" | default "" | b64dec) "crt" (get $data "tls.crt" | b64dec) "key" (get $data "tls.key" | b64dec)) -}}
{{- end -}}
{{- end -}}
{{- include "koordinator-py.generatedTLS" (dict "root" . "cacheKey" "koordinatorPySchedulerTLS" "service" (include "koordinator-py.scheduler.serviceName" .) "certificates" .Values.scheduler.certificates) -}}
{{- end -}}

{{/*
scheduler: the extender's tlsConfig.caData (base64 of the PEM CA): the generated CA, or
certificates.caBundle with an existing Secret. Never empty: with enableHTTPS and no CA,
kube-scheduler would skip checking the certificate.
*/}}
{{- define "koordinator-py.scheduler.caData" -}}
{{- $certs := .Values.scheduler.certificates -}}
{{- if $certs.existingSecret -}}
{{- $bundle := $certs.caBundle | default "" | trim -}}
{{- if not $bundle -}}
{{- fail "scheduler.certificates.existingSecret needs scheduler.certificates.caBundle (the CA that signed it): kube-scheduler checks the extender's certificate against it" -}}
{{- end -}}
{{- include "koordinator-py.caBundleValue" $bundle -}}
{{- else -}}
{{- (include "koordinator-py.scheduler.generatedTLS" . | fromYaml).ca | b64enc -}}
{{- end -}}
{{- end -}}

{{/*
scheduler: the extenders entry of a KubeSchedulerConfiguration that calls koord-scheduler (the
ConfigMap to merge, and the chart's own kube-scheduler), as a one-item YAML list.
*/}}
{{- define "koordinator-py.scheduler.extenders" -}}
{{- $e := .Values.scheduler.extender -}}
{{- if lt (int $e.weight) 1 }}
{{- fail "scheduler.extender.weight must be a positive integer: kube-scheduler refuses a prioritizing extender without one" }}
{{- end }}
{{- $serverName := include "koordinator-py.scheduler.serverName" . -}}
# koord-scheduler of release {{ .Release.Name }} in namespace {{ .Release.Namespace }}.
- urlPrefix: {{ printf "https://%s:443%s" $serverName (include "koordinator-py.scheduler.urlPrefix" .) | quote }}
  filterVerb: filter
  prioritizeVerb: prioritize
  {{- if eq (toString $e.bind) "true" }}
  bindVerb: bind
  {{- end }}
  weight: {{ int $e.weight }}
  nodeCacheCapable: {{ eq (toString $e.nodeCacheCapable) "true" }}
  httpTimeout: {{ toString $e.httpTimeout | quote }}
  ignorable: {{ eq (toString $e.ignorable) "true" }}
  enableHTTPS: true
  tlsConfig:
    serverName: {{ $serverName | quote }}
    caData: {{ include "koordinator-py.scheduler.caData" . }}
    {{- with include "koordinator-py.scheduler.clientCertDir" . }}
    # kube-scheduler's client certificate: koord-scheduler asks for one (scheduler.clientAuth).
    certFile: {{ printf "%s/tls.crt" . | quote }}
    keyFile: {{ printf "%s/tls.key" . | quote }}
    {{- end }}
  {{- if ne (toString $e.allPods) "true" }}
  # Only pods that request batch resources reach the extender; kube-scheduler still
  # fits those resources itself (ignoredByScheduler: false).
  managedResources:
    - name: kubernetes.io/batch-cpu
      ignoredByScheduler: false
    - name: kubernetes.io/batch-memory
      ignoredByScheduler: false
  {{- end }}
{{- end -}}

{{/* The chart's own kube-scheduler (scheduler.kubeScheduler): on only with the extender. */}}
{{- define "koordinator-py.kubeScheduler.enabled" -}}
{{- if and .Values.scheduler.enabled .Values.scheduler.kubeScheduler.enabled -}}true{{- end -}}
{{- end -}}

{{/*
The chart's kube-scheduler (Koordinator's chart has none: its koord-scheduler is a
kube-scheduler build): its Deployment's and ServiceAccount's name, in Koordinator's style.
*/}}
{{- define "koordinator-py.kubeScheduler.fullname" -}}
{{- include "koordinator-py.objectName" (list . "koord-kube-scheduler") -}}
{{- end -}}

{{/*
Its KubeSchedulerConfiguration: the scheduler named koord-scheduler's, as Koordinator's
koord-scheduler-config is (the same profile and Lease).
*/}}
{{- define "koordinator-py.kubeScheduler.configName" -}}
{{- include "koordinator-py.objectName" (list . "koord-scheduler-config") -}}
{{- end -}}

{{/*
scheduler: the ConfigMap with the extenders entry to merge into the cluster's own
kube-scheduler configuration (scheduler-config.yaml; NOTES.txt names it).
*/}}
{{- define "koordinator-py.scheduler.extenderConfigName" -}}
{{- include "koordinator-py.objectName" (list . "koord-scheduler-extender-config") -}}
{{- end -}}

{{- define "koordinator-py.kubeScheduler.serviceAccountName" -}}
{{- $account := .Values.scheduler.kubeScheduler.serviceAccount -}}
{{- if $account.create -}}
{{- default (include "koordinator-py.kubeScheduler.fullname" .) $account.name -}}
{{- else -}}
{{- default "default" $account.name -}}
{{- end -}}
{{- end -}}

{{- define "koordinator-py.kubeScheduler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "koordinator-py.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: kube-scheduler
{{- end -}}

{{- define "koordinator-py.kubeScheduler.labels" -}}
{{ include "koordinator-py.labels" . }}
app.kubernetes.io/component: kube-scheduler
{{- end -}}

{{/*
kube-scheduler's image: the tag defaults to the cluster's version (vMAJOR.MINOR.PATCH, without
a provider's suffix such as -eks-...), since kube-scheduler supports its own minor's API server.
*/}}
{{- define "koordinator-py.kubeScheduler.image" -}}
{{- $image := .Values.scheduler.kubeScheduler.image -}}
{{- $tag := $image.tag | toString | default (regexFind "^v[0-9]+\\.[0-9]+\\.[0-9]+" .Capabilities.KubeVersion.Version) -}}
{{- printf "%s:%s" $image.repository $tag -}}
{{- end -}}

{{/*
The scheduler names that run in the cluster, comma-separated, for the manager's --schedulers:
the cluster's default-scheduler, the chart's kube-scheduler's, and manager.knownSchedulers.
*/}}
{{- define "koordinator-py.knownSchedulers" -}}
{{- $names := list "default-scheduler" -}}
{{- if include "koordinator-py.kubeScheduler.enabled" . -}}
{{- $names = append $names .Values.scheduler.kubeScheduler.schedulerName -}}
{{- end -}}
{{- join "," (concat $names .Values.manager.knownSchedulers | uniq) -}}
{{- end -}}

{{/* CRD schemas: a core/v1 ObjectReference (atomic: replaced as a whole). */}}
{{- define "koordinator-py.crd.objectReference" -}}
type: object
x-kubernetes-map-type: atomic
properties:
  apiVersion:
    type: string
  fieldPath:
    type: string
  kind:
    type: string
  name:
    type: string
  namespace:
    type: string
  resourceVersion:
    type: string
  uid:
    type: string
{{- end -}}

{{/* descheduler: the Deployment's and the ServiceAccount's name (Koordinator's). */}}
{{- define "koordinator-py.descheduler.fullname" -}}
{{- include "koordinator-py.objectName" (list . "koord-descheduler") -}}
{{- end -}}

{{/* descheduler: the labels its pods are selected by (never change them on upgrade). */}}
{{- define "koordinator-py.descheduler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "koordinator-py.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: descheduler
{{- end -}}

{{/* descheduler: every label of its objects. */}}
{{- define "koordinator-py.descheduler.labels" -}}
{{ include "koordinator-py.labels" . }}
app.kubernetes.io/component: descheduler
{{- end -}}

{{/* descheduler: the service account it runs as. */}}
{{- define "koordinator-py.descheduler.serviceAccountName" -}}
{{- if .Values.descheduler.serviceAccount.create -}}
{{- default (include "koordinator-py.descheduler.fullname" .) .Values.descheduler.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.descheduler.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* descheduler: its image, each part defaulting to koordlet's (the same image). */}}
{{- define "koordinator-py.descheduler.image" -}}
{{- include "koordinator-py.image" (list . .Values.descheduler.image) -}}
{{- end -}}

{{/* descheduler: its configuration's ConfigMap, key and folder (Koordinator's names). */}}
{{- define "koordinator-py.descheduler.configName" -}}
{{- include "koordinator-py.objectName" (list . "koord-descheduler-config") -}}
{{- end -}}
{{- define "koordinator-py.descheduler.configKey" -}}
koord-descheduler-config
{{- end -}}
{{- define "koordinator-py.descheduler.configDir" -}}
/etc/koord-descheduler
{{- end -}}

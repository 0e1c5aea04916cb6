{{- /*
Client authentication of the webhook's and the extender's callers (ours; koordkube.clientauth):
manager.webhook.clientAuth and scheduler.clientAuth. Off (all empty) by default. The CA bundle
and the token file are mounted as whole volumes (not subPath), so the kubelet's updates reach
the files and the servers reload them without a restart.

Each helper takes a dict: "auth" (the clientAuth values), "dir" (the mount folder),
"flag" (the flags' prefix: "--webhook-client-" or "--client-").
*/ -}}

{{/* "true" when callers must present a client certificate. */}}
{{- define "koordinator-py.clientAuth.certs" -}}
{{- $a := .auth | default dict -}}
{{- if and $a.caConfigMap $a.caSecret }}
{{- fail "clientAuth: give caConfigMap or caSecret, not both" }}
{{- end }}
{{- if or $a.caConfigMap $a.caSecret }}true{{- end -}}
{{- end -}}

{{/* "true" when callers may present a bearer token. */}}
{{- define "koordinator-py.clientAuth.tokens" -}}
{{- if (.auth | default dict).tokenSecret }}true{{- end -}}
{{- end -}}

{{/* The command-line flags, one list item a line. */}}
{{- define "koordinator-py.clientAuth.args" -}}
{{- $a := .auth | default dict -}}
{{- if include "koordinator-py.clientAuth.certs" . }}
- {{ printf "%sca-file=%s/ca/ca.crt" .flag .dir }}
{{- with $a.allowedNames }}
- {{ printf "%sallowed-names=%s" $.flag (join "," .) | quote }}
{{- end }}
{{- else if $a.allowedNames }}
{{- fail "clientAuth.allowedNames needs caConfigMap or caSecret (the CA that signs those names)" }}
{{- end }}
{{- if include "koordinator-py.clientAuth.tokens" . }}
- {{ printf "%stoken-file=%s/token/tokens" .flag .dir }}
{{- end }}
{{- end -}}

{{- define "koordinator-py.clientAuth.volumeMounts" -}}
{{- if include "koordinator-py.clientAuth.certs" . }}
- name: client-ca
  mountPath: {{ .dir }}/ca
  readOnly: true
{{- end }}
{{- if include "koordinator-py.clientAuth.tokens" . }}
- name: client-token
  mountPath: {{ .dir }}/token
  readOnly: true
{{- end }}
{{- end -}}

{{- define "koordinator-py.clientAuth.volumes" -}}
{{- $a := .auth | default dict -}}
{{- if $a.caConfigMap }}
- name: client-ca
  configMap:
    name: {{ $a.caConfigMap }}
    items:
      - key: {{ $a.caKey | default "ca.crt" }}
        path: ca.crt
{{- else if $a.caSecret }}
- name: client-ca
  secret:
    secretName: {{ $a.caSecret }}
    defaultMode: 0440
    items:
      - key: {{ $a.caKey | default "ca.crt" }}
        path: ca.crt
{{- end }}
{{- if $a.tokenSecret }}
- name: client-token
  secret:
    secretName: {{ $a.tokenSecret }}
    defaultMode: 0440
    items:
      - key: {{ $a.tokenKey | default "tokens" }}
        path: tokens
{{- end }}
{{- end -}}

{{/* Where koord-manager and koord-scheduler find the mounted files. */}}
{{- define "koordinator-py.manager.clientAuthDir" -}}
/etc/koord-manager/webhook-client-auth
{{- end -}}

{{- define "koordinator-py.scheduler.clientAuthDir" -}}
/etc/koord-scheduler/client-auth
{{- end -}}

{{/*
kube-scheduler's client certificate for the extender (the extender tlsConfig's certFile and
keyFile): where the files are in kube-scheduler's filesystem. The chart's kube-scheduler mounts
scheduler.clientAuth.clientCertSecret there; a kube-scheduler of your own needs them there.
Empty when the extender asks for no client certificate.
*/}}
{{- define "koordinator-py.scheduler.clientCertDir" -}}
{{- $a := .Values.scheduler.clientAuth | default dict -}}
{{- if include "koordinator-py.clientAuth.certs" (dict "auth" $a) -}}
{{- $a.clientCertDir | default "/etc/kubernetes/koord-scheduler-client" -}}
{{- end -}}
{{- end -}}

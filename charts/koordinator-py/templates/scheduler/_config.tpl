{{/*
scheduler: the file of its ConfigMap that --config names (a KubeSchedulerConfiguration with
DeviceShareArgs, given Koordinator's scheduler.deviceShare): Koordinator's own file name, beside
the LoadAware arguments in the same folder.
*/}}
{{- define "koordinator-py.scheduler.configKey" -}}
koord-scheduler.config
{{- end -}}

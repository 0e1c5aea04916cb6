"""koord-descheduler: moving pods off nodes that run hot, in the spirit of Koordinator's
descheduler (pkg/descheduler). So far only pure decisions: the LowNodeLoad plugin's
(``descheduler.lownodeload`` and the modules it builds on: fields, selectors, args, cluster,
anomaly, utilization) and the migration controller's (``descheduler.migration``:
PodMigrationJob, its arguments, limits and arbitration). No informers, no evictions yet."""

"""koord-descheduler: moving pods off nodes that run hot, in the spirit of Koordinator's
descheduler (pkg/descheduler). So far only the pure decisions of the LowNodeLoad plugin
(``descheduler.lownodeload`` and the modules it builds on: fields, selectors, args, cluster,
anomaly, utilization): no informers, no evictions yet."""

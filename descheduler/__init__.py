"""koord-descheduler: moving pods off nodes that run hot, in the spirit of Koordinator's
descheduler (pkg/descheduler). Pure decisions: the LowNodeLoad plugin's
(``descheduler.lownodeload`` and the modules it builds on: fields, selectors, args, cluster,
anomaly, utilization) and the migration controller's (``descheduler.migration``:
PodMigrationJob, its arguments, limits and arbitration). The running component on them:
``config`` (the DeschedulerConfiguration file), ``state`` (informers), ``balancer`` (the
descheduling loop), ``controller`` (PodMigrationJobs to Succeeded or Failed, through the
Eviction API), ``events``, ``metrics``, ``app`` (composition, Lease) and ``cli``
(``koord-descheduler``); see docs/descheduler.md."""

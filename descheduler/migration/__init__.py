"""koord-descheduler's migration controller, so far its pure decisions: the PodMigrationJob
API (``job``), MigrationControllerArgs (``args``), int-or-percent limits
(``int_or_percent``), the cluster as arbitration sees it (``view``), the order of waiting
jobs (``order``), the checks and limits on a job's pod (``limits``), TTL and scavenging
(``ttl``) and one arbitration round (``arbitration``). No Kubernetes I/O and no clock: the
caller reads the objects, passes ``now`` and writes back what the decisions say.

It follows Koordinator v1.8.0's apis/scheduling/v1alpha1/pod_migration_job_types.go and
pkg/descheduler/controllers/migration/ (arbitrator/, util/, controller.go, evict.go), and
the Reservation a ReservationFirst job creates (``reservation``: reservation/util.go).
"""

"""Koordinator's elastic quotas: the ElasticQuota objects as the components read them
(``model``), shared by koord-manager (the webhook's tree checks) and the scheduler (the
runtime quota a pod is admitted against)."""

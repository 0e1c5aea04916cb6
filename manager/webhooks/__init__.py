"""koord-manager's admission webhooks: pod mutating and validating, slo-controller-config
validating, and the HTTPS server in front of them.

``admission`` decodes AdmissionReview v1 and builds answers and JSON Patches; ``profiles``,
``pod_mutating``, ``pod_validating`` and ``configmap_validating`` are pure decisions over one
request; ``server`` is the only module doing I/O (aiohttp, certificate files).
"""

"""Koordinator's runtime hooks as pure rules: pod and container requests in, sparse patches out.

No I/O here: no NRI types, no cgroup files, no Kubernetes clients. Coming with the runtime-hooks
issue.
"""

"""Koordinator's runtime hooks as pure rules: pod and container requests in, sparse patches out.

No I/O here: no NRI types, no cgroup files, no clock, no Kubernetes clients. ``request``
holds what is asked, ``patch`` what hooks answer, ``rules`` the node snapshot they decide
from, ``registry`` how a stage runs them; ``hooks/`` has one module per feature and
``HOOKS`` lists them all. koordlet translates the patches to NRI and to cgroup writes.
"""

from runtimehooks.hooks import (
    batchresource,
    coresched,
    cpunormalization,
    cpuset,
    gpu,
    groupidentity,
    memoryqos,
    oomscoreadj,
    rdma,
    resctrl,
    tc,
)
from runtimehooks.registry import Hook

HOOKS: tuple[Hook, ...] = (
    batchresource.HOOK,
    cpunormalization.HOOK,
    cpuset.HOOK,
    coresched.HOOK,
    groupidentity.HOOK,
    memoryqos.HOOK,
    oomscoreadj.HOOK,
    resctrl.HOOK,
    tc.HOOK,
    gpu.HOOK,
    rdma.HOOK,
)

__all__ = ["HOOKS", "Hook"]

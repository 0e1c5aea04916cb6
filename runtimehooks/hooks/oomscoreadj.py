"""OOMScoreAdj: a container's oom_score_adj from pod annotations.

``koordinator.sh/oom-score-adj-spec`` (container → value) wins over ``koordinator.sh/oom-score-adj``
(the pod's default); values outside [-1000, 1000] are refused. NRI v0.7+ runtimes take it in the
adjustment; on older ones (containerd 1.7) koordlet writes /proc/<pid>/oom_score_adj for the
container's processes once it runs, and the reconciler keeps it.
"""

from __future__ import annotations

from koordapi import annotation, features, keys
from runtimehooks.patch import ContainerPatch
from runtimehooks.registry import Hook
from runtimehooks.request import ContainerRequest, Stage
from runtimehooks.rules import Rules


def value(req: ContainerRequest) -> int | None:
    notes = req.pod.annotations
    spec_text = notes.get(keys.ANNOTATION_OOM_SCORE_ADJ_SPEC)
    if spec_text is not None:
        spec = annotation.parse_oom_score_adj_spec(spec_text)
        if req.name in spec:
            return spec[req.name]
    default = notes.get(keys.ANNOTATION_OOM_SCORE_ADJ)
    return None if default is None else annotation.parse_oom_score_adj(default)


def container(req: ContainerRequest, rules: Rules, stage: Stage) -> ContainerPatch | None:
    if req.sandbox:
        return None
    adj = value(req)
    return None if adj is None else ContainerPatch(oom_score_adj=adj)


HOOK = Hook(
    name="OOMScoreAdj",
    gate=features.OOM_SCORE_ADJ,
    stages=frozenset({Stage.PRE_CREATE_CONTAINER, Stage.RECONCILE_CONTAINER}),
    container=container,
)

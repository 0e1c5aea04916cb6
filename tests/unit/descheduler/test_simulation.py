"""The descheduler benchmark's simulator on a small cluster: it runs LowNodeLoad, the
arbitration and the object limiters as koord-descheduler would, and its moves keep to what
those allow."""

from __future__ import annotations

import random
from collections import Counter

from benchmarks import descheduler_sim, scheduler_sim
from descheduler.anomaly import LowNodeLoadState
from descheduler.args import LowNodeLoadArgs
from descheduler.migration.args import MigrationControllerArgs
from descheduler.migration.objectlimit import ObjectLimiters


def test_moves_wait_for_the_anomaly_condition_and_keep_to_the_limits() -> None:
    sim = descheduler_sim.build(40, 700, seed=3)
    args = LowNodeLoadArgs.from_dict(descheduler_sim.DEFAULT_ARGS)
    migration = MigrationControllerArgs.from_dict({})
    state = LowNodeLoadState.for_args(args)
    limits = ObjectLimiters(migration.object_limiters, clock=lambda: sim.now)
    rng = random.Random(3)  # noqa: S311 - test data, not secrets
    now = scheduler_sim.T0
    rounds = []
    moved_any = False
    moved_per_workload: Counter[str] = Counter()
    for _ in range(7):
        now += 60
        before = {name: pod["spec"]["nodeName"] for name, pod in sim.pods.items()}
        out = descheduler_sim.cycle(
            sim, now, args=args, state=state, migration=migration, limits=limits, rng=rng
        )
        rounds.append(out)
        moved = {n: node for n, node in before.items() if sim.pods[n]["spec"]["nodeName"] != node}
        assert len(moved) == out.migrated <= out.chosen
        # arbitration's default: at most 2 migrations off one node at a time
        per_node = Counter(moved.values())
        assert max(per_node.values(), default=0) <= (migration.max_migrating_per_node or 0)
        moved_any = moved_any or bool(moved)
        for name in moved:
            (owner,) = sim.pods[name]["metadata"]["ownerReferences"]
            moved_per_workload[owner["uid"]] += 1
        # every node still holds the requests placed on it (the new pods fit where they went)
        for node, left in sim.free.items():
            assert all(amount >= 0 for amount in left.values()), (node, left)
    # Koordinator's anomaly condition: 5 consecutive abnormal rounds before a node is drained
    assert [r.chosen for r in rounds[:5]] == [0] * 5
    assert rounds[0].hot_nodes > 0 and moved_any
    # the default workload limiter: one eviction per ReplicaSet in five minutes (the moves
    # come in the last two cycles, 60 s apart), and it held back pods arbitration let through
    assert max(moved_per_workload.values()) == 1
    assert sum(r.held_back["ObjectLimiter:workload"] for r in rounds) > 0

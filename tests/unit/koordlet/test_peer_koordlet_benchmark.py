"""benchmarks/peer_koordlet.py's pure parts: CreateContainer's duration from containerd's own
log lines, and the trial pod that tells whether a koordlet's hook answered."""

from __future__ import annotations

import json

from benchmarks import peer_koordlet as bench
from koordapi import keys

SANDBOX = "9287f4c2fe41d03e2a5de05d335a69f0e0da3e3dfbeb542908d651a80e01decf"
# The shape containerd 1.7 and 2.1 log (seen on the cluster tier); across a second boundary.
LOG = f"""\
time="2026-12-07T08:10:59.993718400Z" level=info msg="CreateContainer within sandbox \\"{SANDBOX}\\" for container &ContainerMetadata{{Name:t0-ours-3,Attempt:0,}}"
time="2026-12-07T08:10:59.995000000Z" level=info msg="CreateContainer within sandbox \\"{SANDBOX}\\" for container &ContainerMetadata{{Name:web,Attempt:0,}}"
time="2026-12-07T08:11:00.006064478Z" level=info msg="CreateContainer within sandbox \\"{SANDBOX}\\" for &ContainerMetadata{{Name:t0-ours-3,Attempt:0,}} returns container id \\"a204274edd29\\""
time="2026-12-07T08:11:00.100000000Z" level=info msg="CreateContainer within sandbox \\"{SANDBOX}\\" for &ContainerMetadata{{Name:web,Attempt:0,}} returns container id \\"c6201e3a01f3\\""
time="2026-12-07T08:11:01Z" level=info msg="CreateContainer within sandbox \\"{SANDBOX}\\" for container &ContainerMetadata{{Name:t0-ours-4,Attempt:0,}}"
"""  # noqa: E501


def test_create_times_pairs_a_trials_start_and_end_lines_and_skips_the_rest() -> None:
    times = bench.create_times(LOG, {"t0-ours-3", "t0-ours-4"})
    assert list(times) == ["t0-ours-3"]  # t0-ours-4 never returned; web is not a trial
    ms, container = times["t0-ours-3"]
    assert abs(ms - 12.346078) < 1e-3
    assert container == "a204274edd29"


def test_log_time_reads_nanoseconds_and_whole_seconds() -> None:
    assert (
        bench.log_time("2026-12-07T08:11:01Z") - bench.log_time("2026-12-07T08:11:00.75Z") == 0.25
    )


def test_the_trial_pod_asks_for_batch_cpu_through_koordinators_annotation() -> None:
    pod = bench.trial_pod("t1-theirs-7")
    assert pod["metadata"]["labels"][keys.LABEL_QOS_CLASS] == "BE"
    (container,) = pod["spec"]["containers"]
    assert container["name"] == "t1-theirs-7"
    assert "resources" not in container  # BestEffort: the kubelet alone would give 2 shares
    spec = json.loads(pod["metadata"]["annotations"][keys.ANNOTATION_EXTENDED_RESOURCE_SPEC])
    assert spec["containers"]["t1-theirs-7"]["requests"][keys.BATCH_CPU] == "1000"

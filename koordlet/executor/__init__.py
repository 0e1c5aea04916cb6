"""The only writers of kernel state: cgroup files (v1 and v2), resctrl groups, process
oom_score_adj, core-scheduling cookies, traffic-control classes and node-wide settings under
/proc/sys and /sys (``sysctl``). tests/unit/koordlet/test_layers.py holds the rest of koordlet
to it.

Everything else in koordlet computes; these modules write, validate first, skip writes that
change nothing, and report every write's result.
"""

from koordlet.executor.writer import CgroupWrite, Executor, Status, WriteResult

__all__ = ["CgroupWrite", "Executor", "Status", "WriteResult"]

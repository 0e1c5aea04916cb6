"""Koordinator's cgroup arithmetic: CFS quota and shares from milli-cores, v1→v2 conversions."""

from __future__ import annotations

CFS_PERIOD_US = 100_000
MIN_CFS_QUOTA_US = 1000
UNLIMITED = -1
MIN_SHARES = 2
MAX_SHARES = 262_144
MIN_WEIGHT = 1
MAX_WEIGHT = 10_000
# The largest CFS quota the kernel takes (kernel/sched/core.c: max_cfs_runtime, 2^44 - 1 µs);
# above it the write, and runc's container creation with it, fail with EINVAL.
MAX_CFS_QUOTA_US = (1 << 44) - 1
MAX_INT64 = (1 << 63) - 1  # NRI's and the kernel's memory limit is an int64
# The smallest memory limit a container can start under (Docker's linuxMinMemory, 6 MiB):
# below it runc's init and the first exec are killed by the OOM killer.
MIN_MEMORY_LIMIT = 6 << 20


def milli_cpu_to_shares(milli_cpu: int) -> int:
    """cpu.shares for a request: milli * 1024 / 1000, within [2, 262144]; ≤ 0 gives 2."""
    if milli_cpu <= 0:
        return MIN_SHARES
    return max(MIN_SHARES, min(MAX_SHARES, milli_cpu * 1024 // 1000))


def milli_cpu_to_quota(milli_cpu: int) -> int:
    """cpu.cfs_quota_us for a limit over a 100 ms period; ≤ 0 is unlimited, the floor 1000 µs."""
    if milli_cpu <= 0:
        return UNLIMITED
    return max(MIN_CFS_QUOTA_US, milli_cpu * CFS_PERIOD_US // 1000)


def shares_to_weight(shares: int) -> int:
    """cgroup v2 cpu.weight for v1 cpu.shares (runc's formula), clamped to [1, 10000]."""
    weight = 1 + ((shares - 2) * 9999) // 262_142
    return max(MIN_WEIGHT, min(MAX_WEIGHT, weight))

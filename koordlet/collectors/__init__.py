"""Collectors: each reads one source (procfs, cgroup files, PSI, perf, NVML, sysfs, netlink) on its
own interval and returns samples for the metric cache. They only read, under injected roots."""

"""The QoS manager: strategies that re-balance the node as load moves.

Hooks set a container's values once, when it is created; the strategies here run on their own
intervals and keep batch work in its place: CPU suppress shrinks the best-effort CPUs when
latency-sensitive pods need them, CPU burst lends quota to throttled services, the cgroup and
resctrl reconcilers keep memory and cache QoS true, and eviction frees memory or CPU by
stopping the right batch pods. Every action is recorded with its reason (``audit``).
"""

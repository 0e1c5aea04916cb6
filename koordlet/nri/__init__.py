"""koordlet's side of NRI: the runtime's events in, Koordinator's hooks run, answers out.

``hooks`` (``HookServer``) handles each pod and container event; ``translate`` turns hook
results into NRI messages (adjustments, updates) and cgroup writes; ``conflicts`` compares what
koordlet asked over NRI with what a started container's cgroup holds.
"""

"""What koordlet knows of the cgroup filesystem, in one place, for every part that reads it.

- ``hierarchy``: where things are: the version (v1, hybrid or v2) under a root, the v2 tree,
  a file's path for a subsystem and a cgroup, paths that leave the root, reading a whole
  kernel file, and a cgroup's pids.
- ``resources``: the resources koordlet writes, as Koordinator names them (v1 file names),
  with their v2 files and value conversions, validators and values by meaning; and
  ``CgroupReader``, which reads them back (the executor before each write, the status API).
- ``readers``: what the collectors read (CPU and memory counters, cpusets, CFS quota) with the
  v1 → v2 mapping, every failure a ``Skip`` with a short reason.

Nothing here writes: ``koordlet.executor`` is the only writer of kernel state.
"""
